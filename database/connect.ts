// Opens the database the configuration names: PostgreSQL through pg, or embedded PGlite.
import { mkdirSync } from 'node:fs'
import { Kysely, PostgresDialect } from 'kysely'
import type pg from 'pg'
import { isPostgresUrl } from '../domain/database-url.ts'
import type { Logger } from '../log.ts'
import { openPglite } from './pglite-array-types.ts'
import { PgliteDialect } from './pglite-dialect.ts'
import { PGLITE_PARSERS, POSTGRES_PARSERS } from './type-parsers.ts'
import { PREPARED_MARK, preparedName } from './prepared.ts'
import { migrations } from './migrations/index.ts'
import { createFromTemplate, finishNewDataDir, prepareNewDataDir } from './pglite-template.ts'
import type { Database } from './schema.ts'

export interface DatabaseHandle {
  readonly db: Kysely<Database>
  readonly kind: 'postgres' | 'pglite'
  /** The pg pool, for LISTEN/NOTIFY and benchmarks; null on PGlite. */
  readonly pool: pg.Pool | null
  close(): Promise<void>
}

export interface DatabaseOptions {
  readonly databaseUrl: string | null
  readonly dataDir: string
  readonly logger: Logger
  /** Pool size on PostgreSQL. */
  readonly maxConnections?: number
}

/**
 * pg is loaded when PostgreSQL is used, not with the server: loading it costs about 60 ms of every
 * start, which the embedded database never needs.
 */
export async function createPostgresPool(url: string, logger: Logger, max = 10): Promise<pg.Pool> {
  const { default: pg } = await import('pg')
  // This pool's own parsers: another pg user in the process (pg.types.setTypeParser) never reaches them.
  const types = {
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      return (format !== 'binary' && POSTGRES_PARSERS[oid]) || pg.types.getTypeParser(oid, format as 'text')
    },
  }
  const pool = new pg.Pool({
    connectionString: url,
    max,
    // pg waits forever for a connection by default: fail fast and answer 503 instead.
    connectionTimeoutMillis: 3000,
    idleTimeoutMillis: 30_000,
    // A runaway statement must not hold a connection forever.
    statement_timeout: 10_000,
    types,
  } as pg.PoolConfig)
  // Without a listener, an idle client's error (e.g. 57P01 when the server restarts) crashes the process.
  pool.on('error', (error: Error & { code?: string }) => {
    logger.log('warn', 'database connection lost', { code: error.code ?? null })
  })
  // The pool listens only to idle clients. A connection lost while checked out (between acquire
  // and query, or mid-query) emits 'error' on the client itself, which crashed the process (seen
  // here). Its query is already rejected (→ 503) and the pool drops the client on release.
  pool.on('connect', (client) => {
    client.on('error', () => {})
    // Kysely sends every statement as query(text, values): a text marked by preparedText goes
    // out as a named statement instead.
    const query = client.query.bind(client) as (...args: unknown[]) => unknown
    client.query = ((config: unknown, ...rest: unknown[]) =>
      typeof config === 'string' && config.startsWith(PREPARED_MARK)
        ? query({ name: preparedName(config), text: config, values: rest[0] }, ...rest.slice(1))
        : query(config, ...rest)) as typeof client.query
  })
  return pool
}

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  const url = options.databaseUrl
  if (isPostgresUrl(url)) {
    const pool = await createPostgresPool(url, options.logger, options.maxConnections)
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
    return { db, kind: 'postgres', pool, close: () => db.destroy() }
  }
  if (url === 'memory://' || url === 'memory:') return fromPglite(await openEmbeddedPglite())
  mkdirSync(options.dataDir, { recursive: true })
  const isNew = prepareNewDataDir(options.dataDir)
  if (isNew) {
    const { PGlite } = await import('@electric-sql/pglite')
    await createFromTemplate(options.dataDir, pgliteStartParams(PGlite.defaultStartParams), Object.keys(migrations))
  }
  const pglite = await openEmbeddedPglite({ dataDir: options.dataDir })
  if (isNew) finishNewDataDir(options.dataDir)
  return fromPglite(pglite)
}

/**
 * Opens PGlite as every Steward database opens it: Steward's start settings (below), its type
 * parsers (database/type-parsers.ts) and no array-type catalog query
 * (database/pglite-array-types.ts). In memory unless `dataDir` (files) or `loadDataDir` (a dump,
 * as the tests clone their template) is given.
 */
export async function openEmbeddedPglite(options: { dataDir?: string; loadDataDir?: Blob } = {}): Promise<import('@electric-sql/pglite').PGlite> {
  const pgliteModule = await import('@electric-sql/pglite')
  return openPglite(pgliteModule, { ...options, startParams: pgliteStartParams(pgliteModule.PGlite.defaultStartParams), parsers: PGLITE_PARSERS })
}

/**
 * PGlite's own start settings, plus a small buffer cache (4 MB). PostgreSQL sizes shared_buffers
 * for a server with many connections (128 MB here); embedded, it is one connection inside this
 * process, and every megabyte of it is WebAssembly memory the process keeps. The operating system
 * still caches the data files underneath, so a larger database reads from memory either way.
 * Every start also pays for it: PGlite zeroes its whole shared memory when it opens, and memory a
 * process touches for the first time is slow on a virtual machine. Measured on a 2-core VM: 16 MB
 * (24 MB of shared memory) opened in about 0.67 s, 4 MB (11 MB) in 0.57 s, 1 MB no faster again;
 * the tree's RSS 20 MB lower; decision and lead throughput on a growing data directory unchanged
 * (alternating rounds, 4 MB within the noise of 16 MB, slightly ahead).
 *
 * Durability is PGlite's, unchanged: its defaults already run PostgreSQL with fsync off (`-F`),
 * because its WebAssembly file layer has no working fsync to call. A commit is written to the
 * files before it is acknowledged, so it survives the process being killed; a power loss or
 * kernel crash can lose the last commits. PostgreSQL (DATABASE_URL) is the choice when that matters.
 */
export function pgliteStartParams(defaults: readonly string[]): string[] {
  return [...defaults, '-c', 'shared_buffers=4MB']
}

/** Wraps an open PGlite instance (tests clone a migrated template). */
export function fromPglite(pglite: import('@electric-sql/pglite').PGlite): DatabaseHandle {
  const db = new Kysely<Database>({ dialect: new PgliteDialect(pglite) })
  // Kysely's destroy() is a no-op for a driver that never ran a query: close PGlite ourselves.
  const close = async () => {
    await db.destroy()
    if (!pglite.closed) await pglite.close()
  }
  return { db, kind: 'pglite', pool: null, close }
}
