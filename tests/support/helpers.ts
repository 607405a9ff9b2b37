// Test support: a real database per test file (PGlite cloned from a migrated template, or a
// fresh schema on the PostgreSQL of TEST_DATABASE_URL), the handler built on it, a fake clock.
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { PassThrough } from 'node:stream'
import { join } from 'node:path'
import type { Test } from 'tap'
import { loadConfig, type Config } from '../../config.ts'
import type { Logger, LogLevel } from '../../log.ts'
import type { ConnectionInfo } from '../../http/context.ts'
import { createHandler, type Steward } from '../../server.ts'
import { createPostgresPool, fromPglite, openEmbeddedPglite, type DatabaseHandle } from '../../database/connect.ts'
import { Kysely, Migrator, PostgresDialect } from 'kysely'
import { migrateToLatest } from '../../database/migrate.ts'
import { migrations } from '../../database/migrations/index.ts'
import type { Database } from '../../database/schema.ts'
import { silentLogger } from '../../log.ts'

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || null
export const DATABASE_KIND = TEST_DATABASE_URL ? 'postgres' : 'pglite'

/** A migrated PGlite data directory, dumped once per migration set and shared by all test files. */
export async function pgliteTemplate(): Promise<Blob> {
  const key = createHash('sha256').update(Object.keys(migrations).join('\n')).digest('hex').slice(0, 16)
  const file = join(tmpdir(), `steward-pglite-template-${key}.tar.gz`)
  if (existsSync(file)) return new Blob([readFileSync(file)])
  const pglite = await openEmbeddedPglite()
  const handle = fromPglite(pglite)
  await migrateToLatest(handle.db)
  const dump = await pglite.dumpDataDir('gzip')
  await handle.close()
  const bytes = Buffer.from(await dump.arrayBuffer())
  // Write then rename: concurrent test files never read a half-written template.
  const partial = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`
  writeFileSync(partial, bytes)
  renameSync(partial, file)
  return new Blob([bytes])
}

/** A fresh schema on TEST_DATABASE_URL's PostgreSQL, with a Kysely on it and the migrator for it. */
async function postgresSchema(poolSize: number): Promise<{ db: Kysely<Database>; pool: import('pg').Pool; migrator: Migrator; drop(): Promise<void> }> {
  const schema = `t_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = await createPostgresPool(TEST_DATABASE_URL!, silentLogger, 1)
  await admin.query(`create schema ${schema}`)
  const url = new URL(TEST_DATABASE_URL!)
  url.searchParams.set('options', `-c search_path=${schema}`)
  const pool = await createPostgresPool(url.toString(), silentLogger, poolSize)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  // Kysely's migrator looks for its tables in every schema unless told which: with another
  // test file's schema present it would skip creating its own and fail.
  const migrator = new Migrator({ db, migrationTableSchema: schema, provider: { getMigrations: async () => ({ ...migrations }) } })
  return {
    db,
    pool,
    migrator,
    async drop() {
      await db.destroy()
      await admin.query(`drop schema ${schema} cascade`)
      await admin.end()
    },
  }
}

/**
 * An empty database (no migration applied) and a migrator over Steward's migrations that can stop
 * at any one, for tests of a migration on data written before it. Closed at teardown.
 */
export async function emptyDatabase(t: Test): Promise<{ db: Kysely<any>; migrator: Migrator }> {
  if (TEST_DATABASE_URL) {
    const { db, migrator, drop } = await postgresSchema(2)
    t.teardown(drop)
    return { db, migrator }
  }
  const handle = fromPglite(await openEmbeddedPglite())
  t.teardown(() => handle.close())
  return { db: handle.db, migrator: new Migrator({ db: handle.db, provider: { getMigrations: async () => ({ ...migrations }) } }) }
}

/** A fresh, migrated database for one test file (or one test), closed at teardown. */
export async function openTestDatabase(t: Test): Promise<DatabaseHandle> {
  if (TEST_DATABASE_URL) {
    const { db, pool, migrator, drop } = await postgresSchema(10)
    const { error } = await migrator.migrateToLatest()
    if (error) throw error
    let closed = false
    const handle: DatabaseHandle = {
      db,
      kind: 'postgres',
      pool,
      async close() {
        if (closed) return
        closed = true
        await drop()
      },
    }
    t.teardown(() => handle.close())
    return handle
  }
  // Opened as the server opens its own (the 4 MB buffer cache: PGlite's default of 128 MB is
  // zeroed on every open, about 0.5 s and 136 MB of shared memory per test database).
  const pglite = await openEmbeddedPglite({ loadDataDir: await pgliteTemplate() })
  const handle = fromPglite(pglite)
  let closed = false
  const close = handle.close
  const once: DatabaseHandle = {
    ...handle,
    async close() {
      if (closed) return
      closed = true
      await close()
    },
  }
  t.teardown(() => once.close())
  return once
}

export class FakeClock {
  now: number
  constructor(start = Date.parse('2026-11-22T12:00:00Z')) {
    this.now = start
  }
  advance(ms: number): void {
    this.now += ms
  }
  readonly read = (): number => this.now
}

export interface LogLine {
  level: LogLevel
  message: string
  fields: Record<string, unknown>
}

export function memoryLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  return {
    lines,
    log(level, message, fields = {}) {
      lines.push({ level, message, fields })
    },
  }
}

export function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: 'memory://',
    LOG_LEVEL: 'warn',
    LEAD_RATE_LIMIT: '100000/60',
    API_RATE_LIMIT: '100000/60',
    BASE_URL: 'https://api.example.com',
    PRODUCT_API_URL: 'https://api.example.com',
    APP_URL: 'https://app.example.com',
    // scrypt at N=2^10 in tests; production keeps the OWASP N=2^17.
    PASSWORD_HASH_COST: '10',
    ...env,
  })
}

export interface TestApp {
  readonly app: Steward
  readonly db: DatabaseHandle['db']
  readonly database: DatabaseHandle
  readonly clock: FakeClock
  readonly logs: LogLine[]
  readonly config: Config
  /** Sends a request through the combined handler, as a client on `conn` (loopback by default). */
  request(path: string, init?: RequestInit & { json?: unknown; conn?: ConnectionInfo }): Promise<Response>
}

/** The handler on a fresh database, a fake clock and a memory logger. */
export async function createTestApp(
  t: Test,
  options: { env?: Record<string, string>; database?: DatabaseHandle; clock?: FakeClock } = {},
): Promise<TestApp> {
  const database = options.database ?? (await openTestDatabase(t))
  const clock = options.clock ?? new FakeClock()
  const logger = memoryLogger()
  const config = testConfig(options.env)
  // On PostgreSQL the product API's revocation feed LISTENs on the test database itself.
  const listenUrl = database.kind === 'postgres' ? TEST_DATABASE_URL : null
  const app = createHandler(config, { db: database.db, clock: clock.read, logger, listenUrl })
  app.start()
  t.teardown(() => app.close())
  return {
    app,
    db: database.db,
    database,
    clock,
    logs: logger.lines,
    config,
    async request(path, init = {}) {
      const { json, conn, ...rest } = init
      const headers = new Headers(rest.headers)
      let body = rest.body
      if (json !== undefined) {
        body = JSON.stringify(json)
        if (!headers.has('content-type')) headers.set('content-type', 'application/json')
      }
      return app.fetch(new Request(`http://localhost${path}`, { ...rest, headers, body }), conn ?? { remoteAddress: '127.0.0.1' })
    },
  }
}

/** Reads a response body as JSON, failing the test with the text when it is not JSON. */
export async function bodyOf(response: Response): Promise<unknown> {
  const text = await response.text()
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`response body is not JSON: ${text.slice(0, 200)}`)
  }
}

let emails = 0

/** An email no other test of this process uses: `prefix-N-pid@example.com`. */
export function nextEmail(prefix: string): string {
  emails++
  return `${prefix}-${emails}-${process.pid}@example.com`
}

/** Runs an in-process command (e.g. `runCli`) with its stdout and stderr captured as text. */
export async function captured(command: (io: { stdout: PassThrough; stderr: PassThrough }) => Promise<number>): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.on('data', (chunk) => (out += chunk))
  stderr.on('data', (chunk) => (err += chunk))
  const code = await command({ stdout, stderr })
  return { code, out, err }
}
