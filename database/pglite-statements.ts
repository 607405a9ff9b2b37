// Prepared statements for embedded PGlite, kept by SQL text.
//
// PGlite's `query` runs every statement as an unnamed one: Parse, Describe, Bind, Describe,
// Execute and Sync, each a separate call into WebAssembly, and PostgreSQL parses, analyses and
// plans the text again each time. Here a statement is parsed and described once under a name; after
// that a call is one message buffer (Bind, Execute, Sync) and one call into WebAssembly, and
// PostgreSQL reuses its plan (its own plan cache decides between custom and generic plans, and
// re-plans by itself when a table the plan uses changes).
//
// What stays PGlite's: the parameters are serialized by PGlite's serializers for the types
// PostgreSQL reported for them, the rows parsed by its `parseResults` with its parsers, and the
// call holds PGlite's query mutex, so nothing else PGlite runs (LISTEN, its own queries) can
// interleave. Statements that are not queries (begin, commit, DDL …) still go through `query`.
//
// The cache is bounded (least recently used first out, closed in PostgreSQL with the next call),
// so SQL that differs per call cannot grow it without end, and large batches are not kept at all. A schema
// change run through here empties it: a prepared statement's result columns are fixed when it is
// prepared, and PostgreSQL refuses to run one whose columns a change altered (0A000).
import type { PGlite, Results } from '@electric-sql/pglite'

type PgliteModule = typeof import('@electric-sql/pglite')
type BackendMessage = Parameters<PgliteModule['parse']['parseResults']>[0][number]

/** Statements kept prepared at most; a few dozen distinct statements make up the hot paths. */
export const STATEMENT_CACHE_SIZE = 256

/**
 * Statements with more parameters are not kept: they are batches (the decision log's multi-row
 * insert of up to 256 rows) whose text changes with their size and whose planning spreads over
 * their rows, while a kept plan's memory grows with its parameters (256 batch sizes of 20 columns
 * prepared added 109 MB to the process). 16 decision rows (288 parameters) still are.
 */
export const MAX_PREPARED_PARAMETERS = 320
/** Statements worth preparing: they run many times with different parameters (after any comment). */
const PREPARABLE = /^\s*(?:\/\*[^]*?\*\/\s*)*(?:select|insert|update|delete|with|values)\b/i
/** Statements after which prepared ones may describe columns that no longer exist. */
const SCHEMA_CHANGE = /^\s*(?:\/\*[^]*?\*\/\s*)*(?:create|alter|drop|truncate|comment|grant|revoke)\b/i
/** PostgreSQL's "cached plan must not change result type". */
const RESULT_TYPE_CHANGED = '0A000'

/** Names are unique in the process: two caches on one PGlite (two dialects) never share one. */
let statementCounter = 0

interface Statement {
  readonly name: string
  /** Type oids of the parameters, as PostgreSQL inferred them: they choose the serializers. */
  readonly paramTypes: readonly number[]
  /** The statement's RowDescription (absent for a statement that returns no rows). */
  readonly rowDescription: BackendMessage | undefined
}

export class PreparedStatements {
  readonly #pglite: PGlite
  readonly #statements = new Map<string, Statement>()
  /** Names dropped from the cache, closed in PostgreSQL with the next call. */
  #closing: string[] = []
  #module: PgliteModule | null = null
  readonly #prepare: boolean

  /** `prepare: false` sends everything through PGlite's `query` (bench/pglite-statements.ts compares). */
  constructor(pglite: PGlite, options: { prepare?: boolean } = {}) {
    this.#pglite = pglite
    this.#prepare = options.prepare ?? true
  }

  /** The number of statements held (tests). */
  get size(): number {
    return this.#statements.size
  }

  async query<R>(sql: string, parameters: readonly unknown[]): Promise<Results<R>> {
    if (!this.#prepare || parameters.length > MAX_PREPARED_PARAMETERS || !PREPARABLE.test(sql)) {
      try {
        return await this.#pglite.query<R>(sql, [...parameters])
      } finally {
        if (SCHEMA_CHANGE.test(sql)) this.#forgetAll()
      }
    }
    // PGlite is already loaded (the caller opened it): this import resolves from the module cache.
    const lib = (this.#module ??= await import('@electric-sql/pglite'))
    return this.#pglite._runExclusiveQuery(async () => {
      let statement = this.#statements.get(sql)
      if (statement === undefined) {
        statement = await this.#prepareStatement(lib, sql)
      } else {
        // Most recently used goes last; eviction takes the first.
        this.#statements.delete(sql)
        this.#statements.set(sql, statement)
      }
      const serialize = lib.protocol.serialize
      const serializers = this.#pglite.serializers
      const values = parameters.map((value, i) => {
        if (value === null || value === undefined) return null
        const serializer = serializers[statement.paramTypes[i]!]
        return serializer ? serializer(value) : String(value)
      })
      let messages: BackendMessage[]
      try {
        messages = await this.#exec(lib, [serialize.bind({ statement: statement.name, values }), serialize.execute({}), serialize.sync()])
      } catch (error) {
        if ((error as { code?: unknown }).code === RESULT_TYPE_CHANGED) this.#forget(sql)
        throw error
      }
      if (statement.rowDescription !== undefined) messages.unshift(statement.rowDescription)
      return lib.parse.parseResults(messages, this.#pglite.parsers)[0] as Results<R>
    })
  }

  /** Parses and describes `sql` under a new name; the cache keeps it once PostgreSQL has it. */
  async #prepareStatement(lib: PgliteModule, sql: string): Promise<Statement> {
    const serialize = lib.protocol.serialize
    const name = `steward_${++statementCounter}`
    let messages: BackendMessage[]
    try {
      messages = await this.#exec(lib, [serialize.parse({ name, text: sql }), serialize.describe({ type: 'S', name }), serialize.sync()])
    } catch (error) {
      // Closing a statement that does not exist is no error: close it in case the parse went through.
      this.#closing.push(name)
      throw error
    }
    const statement: Statement = {
      name,
      paramTypes: lib.parse.parseDescribeStatementResults(messages),
      rowDescription: messages.find((message) => message.name === 'rowDescription'),
    }
    this.#statements.set(sql, statement)
    if (this.#statements.size > STATEMENT_CACHE_SIZE) this.#forget(this.#statements.keys().next().value!)
    return statement
  }

  /** Sends the messages (after any pending Close) as one buffer; returns the backend's answers. */
  async #exec(lib: PgliteModule, parts: Uint8Array[]): Promise<BackendMessage[]> {
    if (this.#closing.length > 0) {
      parts.unshift(...this.#closing.map((name) => lib.protocol.serialize.close({ type: 'S', name })))
      this.#closing = []
    }
    let length = 0
    for (const part of parts) length += part.length
    const buffer = new Uint8Array(length)
    let offset = 0
    for (const part of parts) {
      buffer.set(part, offset)
      offset += part.length
    }
    const { messages } = await this.#pglite.execProtocol(buffer, { syncToFs: false })
    // As PGlite's query does after every statement (a no-op for files on disk and for memory).
    await this.#pglite.syncToFs()
    return messages
  }

  #forget(sql: string): void {
    const statement = this.#statements.get(sql)
    if (statement === undefined) return
    this.#statements.delete(sql)
    this.#closing.push(statement.name)
  }

  #forgetAll(): void {
    for (const statement of this.#statements.values()) this.#closing.push(statement.name)
    this.#statements.clear()
  }
}
