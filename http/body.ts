// Reading a request body, the one way: bounded in size and time, strict UTF-8, a media type the
// route accepts, and JSON (or a form) checked for what the database cannot take.
import * as v from 'valibot'
import type { PipelineConfig, RequestContext } from './context.ts'
import type { BodyDoc, BodyMediaType } from './pipeline.ts'
import { ClientAbortError, HttpError } from './errors.ts'

const decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * Reads the body as text, refusing more than `limit` bytes while reading: a Content-Length
 * over the limit is refused before any byte is read, and a chunked body is cut off as soon as
 * it passes the limit. The whole body must arrive within `timeoutMs` (a client trickling one
 * byte a second would otherwise hold the request open for as long as it likes): 408.
 * A body that stops because the client went away is a ClientAbortError, never a server fault.
 * Refusals close the connection: the unread rest of the body cannot be left for the next request.
 */
export function readText(request: Request, limit: number, timeoutMs: number): Promise<string> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) return Promise.reject(tooLarge(limit))
  // One promise settled by whichever comes first, the body or the deadline (not a race of two
  // promises: every body read is on the hot path of the lead forms).
  return new Promise<string>((resolve, reject) => {
    let reader: ReadableStreamDefaultReader<Uint8Array> | null = null
    const timer = setTimeout(() => {
      // Stop waiting for the stream; the 408 closes the connection, which ends any read left.
      reader?.cancel().catch(() => {})
      reject(tooSlow(timeoutMs))
    }, timeoutMs)
    readBytes(request, limit, declared, (opened) => (reader = opened)).then(
      (bytes) => {
        clearTimeout(timer)
        try {
          resolve(decodeUtf8(bytes))
        } catch (error) {
          reject(error)
        }
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

/**
 * Where a runtime adapter may leave the request's raw byte stream for the body reader: on Node,
 * cli/serve.ts puts the IncomingMessage here. Read from it, a body arrives as the Buffers the HTTP
 * parser made and is decoded in place; the adapter's `arrayBuffer()` copies it into a fresh
 * ArrayBuffer first, which cost about a tenth of a refused lead post's CPU (docs/architecture.md,
 * "Performance idioms"). Embedders need not set it: the standard Request body is read instead.
 */
const RAW_BODY: unique symbol = Symbol('steward.rawBody')

/** The part of Node's IncomingMessage the body reader uses. */
export interface RawBodySource {
  readonly readableEnded: boolean
  readonly readableDidRead: boolean
  readonly destroyed: boolean
  on(event: string, listener: (...args: any[]) => void): unknown
  off(event: string, listener: (...args: any[]) => void): unknown
}

type WithRawBody = Request & { [RAW_BODY]?: RawBodySource }

/** Leaves the request's raw byte stream for the body reader (a runtime adapter's step). */
export function attachRawBody(request: Request, source: RawBodySource): void {
  ;(request as WithRawBody)[RAW_BODY] = source
}

function readBytes(
  request: Request,
  limit: number,
  declared: string | null,
  opened: (reader: ReadableStreamDefaultReader<Uint8Array>) => void,
): Promise<Uint8Array> {
  const raw = (request as WithRawBody)[RAW_BODY]
  if (raw !== undefined && !raw.readableDidRead) return readRaw(raw, limit)
  if (declared !== null && DIGITS.test(declared)) {
    // A declared length within the limit bounds the read (the HTTP parser frames the body by it),
    // so read it whole: on @hono/node-server this skips building a Request and a ReadableStream.
    return request.arrayBuffer().then((buffer) => {
      if (buffer.byteLength > limit) throw tooLarge(limit)
      return new Uint8Array(buffer)
    }, clientFailure)
  }
  return readStream(request, limit, opened)
}

const DIGITS = /^\d+$/

/**
 * The body from the adapter's raw stream, chunk by chunk, cut off past the limit (the HTTP parser
 * frames it: by its declared length, or chunked). It ends with `end`; a `close` or `error` first is
 * the client going away. Past the limit the listeners are removed and the rest is left to the
 * connection's close. After a 408 they stay until that close (the 408 closes the connection),
 * which settles this read when nobody listens to it any more.
 */
function readRaw(raw: RawBodySource, limit: number): Promise<Uint8Array> {
  if (raw.destroyed && !raw.readableEnded) return Promise.reject(clientGone())
  return new Promise<Uint8Array>((resolve, reject) => {
    const chunks: Uint8Array[] = []
    let size = 0
    const stop = () => {
      raw.off('data', onData)
      raw.off('end', onEnd)
      raw.off('close', onClose)
      raw.off('error', onError)
    }
    const onData = (chunk: Uint8Array) => {
      size += chunk.byteLength
      if (size > limit) {
        stop()
        return reject(tooLarge(limit))
      }
      chunks.push(chunk)
    }
    const onEnd = () => {
      stop()
      resolve(joined(chunks, size))
    }
    // `close` before `end`: the connection went away mid-body (Node emits `end` first otherwise).
    const onClose = () => (raw.readableEnded ? onEnd() : onError(new Error('closed before the body ended')))
    const onError = (error: Error) => {
      stop()
      reject(clientGone(error))
    }
    raw.on('data', onData)
    raw.on('end', onEnd)
    raw.on('close', onClose)
    raw.on('error', onError)
  })
}

/** A body of unknown length (chunked), read chunk by chunk and cut off past the limit. */
async function readStream(request: Request, limit: number, opened: (reader: ReadableStreamDefaultReader<Uint8Array>) => void): Promise<Uint8Array> {
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  opened(reader)
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for (;;) {
      const { done, value } = await reader.read().catch(clientFailure)
      if (done) break
      size += value.byteLength
      if (size > limit) throw tooLarge(limit)
      chunks.push(value)
    }
  } catch (error) {
    // A 413 (or a dead stream): stop reading and free the stream.
    reader.cancel().catch(() => {})
    throw error
  }
  return joined(chunks, size)
}

/**
 * A failed read of the body is the client's stream failing (a reset, a close mid-upload): name it
 * so, or it passes for whatever its error code resembles (ECONNRESET looks like a lost database
 * connection). Every read is awaited or chained by its caller, even after a 408 was answered, so a
 * late failure is never unhandled.
 */
function clientFailure(error: unknown): never {
  if (error instanceof HttpError) throw error
  throw clientGone(error)
}

/** The error of a body that stopped because the client went away. */
function clientGone(cause?: unknown): ClientAbortError {
  return new ClientAbortError('The client closed the connection while sending the request body', { cause })
}

function decodeUtf8(bytes: Uint8Array): string {
  if (bytes.byteLength === 0) return ''
  try {
    return decoder.decode(bytes)
  } catch {
    throw new HttpError(400, 'Request body is not valid UTF-8')
  }
}

/** The chunks of a body as one array: a single chunk as it is, none as an empty array. */
function joined(chunks: Uint8Array[], size: number): Uint8Array {
  return chunks.length === 1 ? chunks[0]! : concat(chunks, size)
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

function tooLarge(limit: number): HttpError {
  return new HttpError(413, `Request body is larger than ${limit} bytes`, { headers: { Connection: 'close' } })
}

function tooSlow(timeoutMs: number): HttpError {
  return new HttpError(408, `Request body did not arrive within ${timeoutMs} ms`, { headers: { Connection: 'close' } })
}

/** The media type of the request, lower-cased, without parameters. */
export function mediaType(request: Request): string {
  const header = request.headers.get('content-type')
  if (header === null) return ''
  const end = header.indexOf(';')
  return (end < 0 ? header : header.slice(0, end)).trim().toLowerCase()
}

const MAX_DEPTH = 32
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Parses a JSON object body and checks, without recursion, what the database and the rest of
 * the code cannot take: nesting deeper than 32, NUL characters (PostgreSQL rejects them in text,
 * SQLSTATE 22021), lone surrogates (stored silently as U+FFFD) and `__proto__` keys.
 */
function parseJsonObject(text: string): Record<string, unknown> {
  if (text.trim() === '') throw new HttpError(400, 'Request body is empty; send a JSON object')
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new HttpError(400, 'Request body is not valid JSON')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'Request body must be a JSON object')
  }
  checkJsonValue(value)
  return value as Record<string, unknown>
}

function checkJsonValue(root: unknown): void {
  const stack: Array<[unknown, number]> = [[root, 1]]
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!
    if (typeof value === 'string') {
      checkString(value)
    } else if (typeof value === 'object' && value !== null) {
      if (depth > MAX_DEPTH) throw new HttpError(400, `Request body is nested more than ${MAX_DEPTH} levels deep`)
      if (Array.isArray(value)) {
        for (const item of value) stack.push([item, depth + 1])
      } else {
        for (const key of Object.keys(value)) {
          if (key === '__proto__') throw new HttpError(400, 'Request body contains the forbidden key "__proto__"')
          checkString(key)
          stack.push([(value as Record<string, unknown>)[key], depth + 1])
        }
      }
    }
  }
}

/**
 * What PostgreSQL text cannot hold: NUL (refused, SQLSTATE 22021) and lone UTF-16 surrogates
 * (not Unicode; stored silently as U+FFFD, so the value read back differs from the one sent).
 */
export function unsafeTextProblem(text: string): 'nul' | 'surrogate' | null {
  if (text.includes('\u0000')) return 'nul'
  if (LONE_SURROGATE.test(text)) return 'surrogate'
  return null
}

function checkString(value: string): void {
  const problem = unsafeTextProblem(value)
  if (problem === 'nul') throw new HttpError(400, 'Request body contains a NUL character')
  if (problem === 'surrogate') throw new HttpError(400, 'Request body contains an unpaired UTF-16 surrogate')
}

/** Body of a form post (`application/x-www-form-urlencoded`), with the same string checks. */
function parseForm(text: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [key, value] of new URLSearchParams(text)) {
    if (key === '__proto__') throw new HttpError(400, 'Request body contains the forbidden key "__proto__"')
    checkString(key)
    checkString(value)
    if (key in out) throw new HttpError(400, `Parameter ${key} is repeated`)
    out[key] = value
  }
  return out
}


/** The body formats a route may accept. */
export type BodyFormat = 'json' | 'form' | 'text/plain-json'

export interface BodyOptions {
  /** Accepted formats: `json` (application/json, any +json), `form` (x-www-form-urlencoded), `text/plain-json` (text/plain or no type, holding JSON: no CORS preflight). */
  readonly accept: readonly BodyFormat[]
  /** An empty body reads as `{}` (whatever its type). */
  readonly optional?: boolean
}

export interface Body {
  readonly form: boolean
  readonly params: Record<string, unknown>
}

/**
 * The one body reader: reads the text (bounded, timed), refuses a media type the route does not
 * accept (415), and parses a JSON object or a form with the shared checks.
 */
export function readBody(request: Request, ctx: RequestContext<PipelineConfig>, options: BodyOptions): Promise<Body> {
  const type = mediaType(request)
  const format = formatOf(type, options.accept)
  // A lead post (text/plain accepted) refuses its type before reading; other routes read first,
  // so an over-long body is a 413 whatever its type, and an optional empty body has no type.
  if (format === null && options.accept.includes('text/plain-json')) return Promise.reject(unsupported(type, options.accept))
  return readText(request, ctx.config.bodyLimitBytes, ctx.config.bodyTimeoutMs).then((text) => {
    if (options.optional && text.trim() === '') return { form: false, params: {} }
    if (format === null) throw unsupported(type, options.accept)
    return format === 'form' ? { form: true, params: parseForm(text) } : { form: false, params: parseJsonObject(text) }
  })
}

function formatOf(type: string, accept: readonly BodyFormat[]): 'json' | 'form' | null {
  if (type === 'application/json' || type.endsWith('+json')) return 'json'
  if (accept.includes('text/plain-json') && (type === '' || type === 'text/plain')) return 'json'
  if (accept.includes('form') && type === 'application/x-www-form-urlencoded') return 'form'
  return null
}

function unsupported(type: string, accept: readonly BodyFormat[]): HttpError {
  const what = accept.includes('form') ? 'application/json or application/x-www-form-urlencoded' : 'application/json'
  return new HttpError(415, `Content-Type ${type || '(none)'} is not supported; send ${what}`)
}

/**
 * The one way valibot issues become a 400: the first issue's message, with the field it concerns
 * when the message does not name it; a missing field is "Field X is required".
 */
export function parseWith<S extends v.GenericSchema>(schema: S, input: unknown, precedence: readonly string[] = []): v.InferOutput<S> {
  return orThrow(checkWith(schema, input, precedence))
}

/** The value, or the refusal thrown. */
function orThrow<T>(checked: T | HttpError): T {
  if (checked instanceof HttpError) throw checked
  return checked
}

/** valibot's own setting: stop at the first issue. */
const FIRST_ISSUE_ONLY = Object.freeze({ abortEarly: true })

/**
 * `parseWith` with the 400 returned instead of thrown. With a precedence, the schema runs first
 * up to its first issue: a valid body passes the same way, and when that issue already carries
 * the message that wins over every other, nothing a full run could add changes the answer, so the
 * other issues are never built (on a lead post missing fields, four of five). Any other first
 * issue gets the full run, whose issues decide as before.
 */
function checkWith<S extends v.GenericSchema>(schema: S, input: unknown, precedence: readonly string[] = []): v.InferOutput<S> | HttpError {
  if (precedence.length > 0) {
    const early = v.safeParse(schema, input, FIRST_ISSUE_ONLY)
    if (early.success) return early.output
    if (early.issues[0].message === precedence[0]) return new HttpError(400, precedence[0]!)
  }
  const result = v.safeParse(schema, input)
  return result.success ? result.output : new HttpError(400, firstProblem(result.issues, precedence))
}

/** The message of the problem that wins: a listed message in order, then an unknown field, then the first. */
function firstProblem(issues: readonly v.BaseIssue<unknown>[], precedence: readonly string[]): string {
  for (const message of precedence) if (issues.some((issue) => issue.message === message)) return message
  // A field the schema does not know wins over any other problem (OWASP API3: mass assignment).
  const unknown = issues.find((issue) => issue.type === 'strict_object' && issue.expected === 'never')
  return issueMessage(unknown ?? issues[0]!)
}

const FORMATS: Readonly<Record<BodyMediaType, BodyFormat>> = {
  'application/json': 'json',
  'application/merge-patch+json': 'json',
  'application/x-www-form-urlencoded': 'form',
  'text/plain': 'text/plain-json',
}

/**
 * Reads and validates a body exactly as its doc publishes it: the doc's media types, its schema,
 * its precedence of messages. Handlers read bodies only through here (or `readBody` when the
 * shape depends on the content, as at the token endpoint).
 */
export async function readInput<S extends v.GenericSchema>(request: Request, ctx: RequestContext<PipelineConfig>, doc: BodyDoc<S>): Promise<v.InferOutput<S>> {
  return orThrow(await readInputOrRefusal(request, ctx, doc))
}

/**
 * `readInput` with the refusal (413, 415, 400…) returned as an HttpError instead of thrown, for
 * routes where refusals are the expected load (the public lead forms): a handler returns it and
 * the pipeline answers it exactly as a thrown one (docs/architecture.md, "Refusals returned").
 * Anything else (the client going away, a fault) still rejects.
 */
export function readInputOrRefusal<S extends v.GenericSchema>(request: Request, ctx: RequestContext<PipelineConfig>, doc: BodyDoc<S>): Promise<v.InferOutput<S> | HttpError> {
  return readBody(request, ctx, optionsOf(doc)).then(
    ({ params }) => checkInput(doc, params),
    (error: unknown) => (error instanceof HttpError ? error : Promise.reject(error)),
  )
}

/** What `readBody` is told for a doc, worked out once per doc rather than once per request. */
const OPTIONS = new WeakMap<BodyDoc, BodyOptions>()
function optionsOf(doc: BodyDoc): BodyOptions {
  let options = OPTIONS.get(doc)
  if (options === undefined) OPTIONS.set(doc, (options = { accept: doc.mediaTypes.map((type) => FORMATS[type]), optional: !doc.required }))
  return options
}

/** Validates an already-read body as `doc` publishes it. */
export function validateInput<S extends v.GenericSchema>(doc: BodyDoc<S>, params: Record<string, unknown>): v.InferOutput<S> {
  return orThrow(checkInput(doc, params))
}

/** The body's value as `doc` publishes it, or the 400 that says what is wrong. */
function checkInput<S extends v.GenericSchema>(doc: BodyDoc<S>, params: Record<string, unknown>): v.InferOutput<S> | HttpError {
  let input = params
  // A copy without the nulls, made only when there is one (most bodies have none).
  if (doc.nullIsAbsent && hasNull(params)) {
    input = {}
    for (const [key, value] of Object.entries(params)) if (value !== null) input[key] = value
  }
  return checkWith(doc.schema, input, doc.precedence)
}

function hasNull(params: Record<string, unknown>): boolean {
  for (const key in params) if (params[key] === null) return true
  return false
}

/** A body doc with its schema's type kept, for `readInput`. */
export function bodyDoc<S extends v.GenericSchema>(schema: S, mediaTypes: readonly BodyMediaType[], required: boolean, extra: Pick<BodyDoc, 'precedence' | 'nullIsAbsent'> = {}): BodyDoc<S> {
  return { schema, mediaTypes, required, ...extra }
}

function issueMessage(issue: v.BaseIssue<unknown>): string {
  const path = issue.path?.map((item) => String(item.key)).join('.')
  if (path && issue.input === undefined && issue.path?.length === 1) return `Field ${path} is required`
  // A missing field inside a list item (a replay's drafts): name the field and where it is.
  if (path && issue.input === undefined) return `Field ${String(issue.path!.at(-1)!.key)} is required (at ${path})`
  const message = issue.message
  return path && !message.includes(path) ? `${message} (at ${path})` : message
}

/** What `unknownField` may also say: a nested object's type message, a retired field's own message. */
export interface UnknownFieldOptions {
  /** The message when the value is not an object at all (a nested object such as approval). */
  readonly notAnObject?: string
  /** Fields that once existed, each with the message that says what replaced it. */
  readonly retired?: Readonly<Record<string, string>>
}

/**
 * The message of a strict object's unknown key: fields the server owns are "read-only", any other
 * is unknown. `readOnly` names response fields, not the schema's keys.
 */
export function unknownField(readOnly: readonly string[] = [], options: UnknownFieldOptions = {}): (issue: v.BaseIssue<unknown>) => string {
  // Called for a missing field too (the object's own message): parseWith words that one itself.
  return (issue) => {
    if (issue.expected === 'Object' && options.notAnObject !== undefined) return options.notAnObject
    const key = String(issue.path?.[issue.path.length - 1]?.key ?? '')
    // Own keys only: a field named valueOf or constructor must not find Object.prototype's.
    const retired = issue.expected === 'never' && options.retired && Object.hasOwn(options.retired, key) ? options.retired[key] : undefined
    if (retired !== undefined) return retired
    return readOnly.includes(key) ? `Field ${key} is read-only` : `Unknown field: ${key}`
  }
}
