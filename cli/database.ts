// The database an operator command works on: the configured one, migrated, closed afterwards —
// or, when a running server carries the command out, that server's open database.
import type { Config } from '../config.ts'
import { isPostgresUrl } from '../domain/database-url.ts'
import { createJsonLogger, type Logger } from '../log.ts'
import { openDatabase, type DatabaseHandle } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { holdingEventLoop } from './event-loop.ts'
import { prepareDataDir } from './data-dir.ts'
import { lockDataDir, type DataDirLock, type HolderRole } from './lock.ts'

/** Where a command works: the configuration, and the running server's database when it carries the command out. */
export interface CommandDatabase {
  readonly config: Config
  /**
   * The open, migrated database of the running server that carries the command out; absent when
   * the command runs alone. Handed down explicitly, never through AsyncLocalStorage: on Node 20
   * its first `run` turns on a hook for every promise and async resource the process makes from
   * then on, and every request of the server that had carried out one command cost about 15 %
   * more CPU until it restarted (docs/architecture.md).
   */
  readonly database?: DatabaseHandle | undefined
}

/** Opens the configured database, migrated, for one command; closes it afterwards. */
export async function withDatabase<T>({ config, database }: CommandDatabase, work: (handle: DatabaseHandle, applied: string[]) => Promise<T>): Promise<T> {
  // The server migrated at start: nothing is left to apply.
  if (database) return await work(database, [])
  const opened = await openLockedDatabase(config, 'command', createJsonLogger('warn'))
  try {
    return await work(opened.handle, opened.applied)
  } finally {
    await opened.close()
  }
}

export interface LockedDatabase {
  readonly handle: DatabaseHandle
  readonly applied: string[]
  /** Held for an embedded database under DATA_DIR; null on PostgreSQL and in memory. */
  readonly lock: DataDirLock | null
  close(): Promise<void>
}

/** True when the configuration puts the database in files under DATA_DIR (embedded PGlite). */
export function usesDataDir(config: Config): boolean {
  return config.databaseUrl === null
}

/**
 * Locks DATA_DIR (embedded database), opens and migrates the database. A failure closes what
 * was opened and says which setting to check.
 */
export function openLockedDatabase(config: Config, role: HolderRole, logger: Logger): Promise<LockedDatabase> {
  return holdingEventLoop(() => openLocked(config, role, logger))
}

async function openLocked(config: Config, role: HolderRole, logger: Logger): Promise<LockedDatabase> {
  let lock: DataDirLock | null = null
  if (usesDataDir(config)) {
    prepareDataDir(config.dataDir)
    lock = await lockDataDir(config.dataDir, role)
    lock.watch((reason) => stopAtOnce(config.dataDir, reason, logger))
  }
  let handle: DatabaseHandle | null = null
  try {
    handle = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger })
    const applied = await migrateToLatest(handle.db)
    const opened = handle
    return {
      handle,
      applied,
      lock,
      async close() {
        await opened.close()
        await lock?.release()
      },
    }
  } catch (error) {
    await handle?.close().catch(() => {})
    await lock?.release()
    throw describeDatabaseError(error, config)
  }
}

/**
 * The data directory was deleted, moved or taken over under this process. Its embedded database
 * opens files by path, so any further write (a lead acknowledged, a checkpoint at close) would
 * land in whatever directory now has that name, and another process may hold it: a server that
 * went on would corrupt the new directory or acknowledge leads nobody will find. So no close, no
 * drain: the reason is logged and the process exits at once, as PostgreSQL does when its
 * postmaster.pid is no longer its own.
 */
function stopAtOnce(dataDir: string, reason: string, logger: Logger): never {
  const message = `DATA_DIR ${dataDir} is no longer this process's: ${reason}; stopping at once without another write. Start Steward again on the directory you mean to keep`
  logger.log('error', 'data directory lost', { data_dir: dataDir, reason })
  process.stderr.write(`steward: ${message}\n`)
  process.exit(1)
}

/** A database that cannot be reached, named by the setting that chose it (password masked). */
class DatabaseUnreachableError extends Error {
  override name = 'DatabaseUnreachableError'
}

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', '28P01', '28000', '3D000'])

function describeDatabaseError(error: unknown, config: Config): unknown {
  const e = error as Error & { code?: string }
  if (!isPostgresUrl(config.databaseUrl)) return error
  const timedOut = /timeout/i.test(e?.message ?? '')
  if (!CONNECTION_CODES.has(e?.code ?? '') && !timedOut) return error
  return new DatabaseUnreachableError(
    `cannot use the database at DATABASE_URL=${maskUrl(config.databaseUrl)} (${e.message}${e.code ? `, ${e.code}` : ''}): ` +
      'check that PostgreSQL is running and reachable from here, and the host, port, user, password and database name in DATABASE_URL',
  )
}

/** The URL with its password replaced, for messages and logs. */
function maskUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable URL)'
  }
}
