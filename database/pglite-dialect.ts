// A Kysely dialect for embedded PGlite. PGlite is one connection; Kysely assumes a pool. So a
// connection is lent to one caller at a time (a FIFO lock held from acquire to release): a
// transaction owns the connection until it commits or rolls back, and no concurrent query can
// slip into it — the flaw measured in kysely-pglite 0.6.1, where a rollback also discarded a
// concurrent insert. Affected-row counts come from the statement's command tag.
//
// Queries run as prepared statements (database/pglite-statements.ts says how and why).
import type { PGlite } from '@electric-sql/pglite'
import {
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely'
import { PreparedStatements } from './pglite-statements.ts'

const WRITE_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE'])

class PgliteConnection implements DatabaseConnection {
  readonly #statements: PreparedStatements
  constructor(pglite: PGlite, options: PgliteDialectOptions) {
    this.#statements = new PreparedStatements(pglite, options)
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const result = await this.#statements.query<R>(compiled.sql, compiled.parameters)
    const command = result.command?.toUpperCase()
    return {
      rows: result.rows ?? [],
      numAffectedRows:
        command !== undefined && WRITE_COMMANDS.has(command) ? BigInt(result.rowCount ?? result.affectedRows ?? 0) : undefined,
    }
  }

  async *streamQuery<R>(compiled: CompiledQuery, chunkSize = 100): AsyncIterableIterator<QueryResult<R>> {
    const { rows } = await this.executeQuery<R>(compiled)
    for (let i = 0; i < rows.length; i += chunkSize) yield { rows: rows.slice(i, i + chunkSize) }
  }
}

/** A FIFO lock: `acquire` resolves once every earlier holder has released. */
class Lock {
  #tail: Promise<void> = Promise.resolve()
  acquire(): Promise<() => void> {
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    const ready = this.#tail.then(() => release)
    this.#tail = this.#tail.then(() => held)
    return ready
  }
}

class PgliteDriver implements Driver {
  readonly #pglite: PGlite
  readonly #connection: PgliteConnection
  readonly #lock = new Lock()
  readonly #releases = new WeakMap<DatabaseConnection, () => void>()
  #destroyed = false

  constructor(pglite: PGlite, options: PgliteDialectOptions) {
    this.#pglite = pglite
    this.#connection = new PgliteConnection(pglite, options)
  }

  async init(): Promise<void> {
    await this.#pglite.waitReady
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const release = await this.#lock.acquire()
    if (this.#destroyed) {
      release()
      throw new Error('PGlite is closed')
    }
    // One connection object, lent to one holder at a time.
    this.#releases.set(this.#connection, release)
    return this.#connection
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let statement = 'begin'
    if (settings.isolationLevel || settings.accessMode) {
      statement = 'start transaction'
      if (settings.isolationLevel) statement += ` isolation level ${settings.isolationLevel}`
      if (settings.accessMode) statement += ` ${settings.accessMode}`
    }
    await connection.executeQuery(CompiledQuery.raw(statement))
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'))
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'))
  }

  async savepoint(connection: DatabaseConnection, name: string, compile: QueryCompiler['compileQuery']): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdentifier(name)}`))
    void compile
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdentifier(name)}`))
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdentifier(name)}`))
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const release = this.#releases.get(connection)
    this.#releases.delete(connection)
    release?.()
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return
    // Wait for the current holder (if any) to finish, then close.
    const release = await this.#lock.acquire()
    this.#destroyed = true
    try {
      if (!this.#pglite.closed) await this.#pglite.close()
    } finally {
      release()
    }
  }
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`
}

export interface PgliteDialectOptions {
  /** Prepare queries (the default); false runs each through PGlite's `query`, for comparison. */
  readonly prepare?: boolean
}

export class PgliteDialect implements Dialect {
  readonly #pglite: PGlite
  readonly #options: PgliteDialectOptions
  constructor(pglite: PGlite, options: PgliteDialectOptions = {}) {
    this.#pglite = pglite
    this.#options = options
  }
  createAdapter(): PostgresAdapter {
    return new PostgresAdapter()
  }
  createDriver(): Driver {
    return new PgliteDriver(this.#pglite, this.#options)
  }
  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler()
  }
  createIntrospector(db: Kysely<any>): PostgresIntrospector {
    return new PostgresIntrospector(db)
  }
}
