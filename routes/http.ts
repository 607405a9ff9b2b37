// HTTP glue shared by every surface: the error type, JSON responses, bounded body reading and
// the request context that travels through the router as an extra fetch argument.
import type { Config } from '../config.ts'
import { clientRateKey } from './client-address.ts'
import type { Deps } from './deps.ts'

/** RFC 9110 §15 reason phrases for the statuses this server sends. */
export const REASON: Readonly<Record<number, string>> = Object.freeze({
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  410: 'Gone',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  499: 'Client Closed Request',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
})

/**
 * The one error type. `message` is safe to show to the client; `code` is an optional
 * machine-readable code (the OAuth token endpoint uses RFC 6749 §5.2 codes).
 */
export class HttpError extends Error {
  override name = 'HttpError'
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly code: string | null
  constructor(status: number, message: string, options: { headers?: Record<string, string>; code?: string } = {}) {
    // An HttpError is an answer, not a fault: its stack is never shown or logged, and capturing
    // one was the largest single cost of a 400/401/404 (about a tenth of the request's CPU).
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
    this.status = status
    this.headers = Object.freeze({ ...options.headers })
    this.code = options.code ?? null
  }
}

/** Thrown by storage when the database cannot be reached; surfaces answer 503 + Retry-After. */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false
  const { code, message } = error as { code?: unknown; message?: unknown }
  if (typeof code === 'string') {
    // Node socket errors, and PostgreSQL class 08 (connection) / 57P0x (shutdown) / 53 (resources).
    if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH'].includes(code)) return true
    if (/^(08|57P0|53)/.test(code)) return true
  }
  if (typeof message === 'string') {
    return /timeout exceeded when trying to connect|Connection terminated|connection (is )?closed|Client has encountered a connection error|PGlite is closed|database is closed|driver has already been destroyed/i.test(
      message,
    )
  }
  return false
}

/**
 * The request body stopped arriving because the client went away (reset, closed mid-upload).
 * Not a fault of ours and never a database outage: logged as an abort and counted, and the
 * answer (status 499, which nobody reads) says so in the access log.
 */
export class ClientAbortError extends Error {
  override name = 'ClientAbortError'
}

/** CONNECT asks us to be a proxy, which we are not (and no resource of ours is its target). */
export function connectNotSupported(): HttpError {
  return new HttpError(405, 'CONNECT is not supported: this server is not a proxy', {
    headers: { Allow: 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' },
  })
}

/** The status logged for a request whose client went away before it was answered (as nginx does). */
export const CLIENT_CLOSED = 499

export const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'X-Content-Type-Options': 'nosniff',
})

// No answer of ours may be framed (clickjacking). Nothing we serve is HTML, so nothing in an
// answer may load or run either: JSON, llms.txt and the SVG logo get `default-src 'none'` too.
const CSP_FRAME = "frame-ancestors 'none'"
const CSP_NONE = "default-src 'none'; frame-ancestors 'none'"

/**
 * Sets the headers every answer carries, whatever produced it (a route, the router's 404/405,
 * or the runtime adapter refusing a malformed request): they win over a handler's.
 */
export function setSecurityHeaders(reply: Reply): void {
  setHeaders(reply, SECURITY_HEADERS)
  const type = reply.headers['content-type'] ?? ''
  reply.headers['content-security-policy'] = /^\s*text\/html\b/i.test(type) ? CSP_FRAME : CSP_NONE
}

/**
 * What a handler answers. The pipeline (access guard, surface, CORS, security headers) adds its
 * headers to the reply, and surface.ts turns it into a Response once, at the very end. Why not a
 * Response from the start: on Node, @hono/node-server writes a Response straight to the socket
 * only while its headers are the plain object it was built with; a single `headers.set` on it
 * builds a Headers object and a second, native Response (about a third of a small request's CPU).
 */
export interface Reply {
  readonly status: number
  readonly body: string | null
  /**
   * Lower-cased names, so a later header replaces an earlier one of the same name as
   * Headers.set does (and as Headers wrote them to the wire). Owned by this reply, never shared.
   */
  readonly headers: Record<string, string>
}

export function reply(status: number, body: string | null, headers: Readonly<Record<string, string>> = {}): Reply {
  const out: Reply = { status, body, headers: {} }
  setHeaders(out, headers)
  return out
}

/** Sets headers on a reply, replacing any of the same name whatever its case. */
export function setHeaders(reply: Reply, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) reply.headers[name.toLowerCase()] = headers[name]!
}

export function json(status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): Reply {
  const out: Reply = { status, body: JSON.stringify(body), headers: { 'content-type': 'application/json; charset=utf-8' } }
  setHeaders(out, headers)
  return out
}

export interface RequestContext {
  readonly config: Config
  readonly deps: Deps
  readonly requestId: string
  /** The client's address: the peer, or the forwarded one when the peer is a trusted proxy. */
  readonly clientAddress: string
  /** The client as per-client limits count it: `clientAddress`, IPv6 grouped by its network prefix. */
  readonly clientKey: string
  /** The request reached us over TLS (directly, or through a trusted proxy), or from loopback. */
  readonly secure: boolean
  /** Milliseconds since the epoch, read once per request from the injected clock. */
  readonly now: number
}

/** What a runtime adapter knows about the connection; all optional for embedders. */
export interface ConnectionInfo {
  readonly remoteAddress?: string
  readonly tls?: boolean
}

const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/

export function isLoopback(address: string): boolean {
  return LOOPBACK.test(address)
}

export function buildContext(request: Request, config: Config, deps: Deps, conn: ConnectionInfo | undefined): RequestContext {
  const peer = conn?.remoteAddress ?? '127.0.0.1'
  const trusted = config.trustProxy === '*' || config.trustProxy.includes(peer)
  let clientAddress = peer
  let tls = conn?.tls === true || config.tlsCertFile !== null
  if (trusted) {
    // The proxy appends the address it saw last: that is the one the proxy vouches for.
    const forwarded = request.headers.get('x-forwarded-for')
    const last = forwarded?.split(',').pop()?.trim()
    if (last) clientAddress = last
    const proto = request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase()
    if (proto === 'https') tls = true
  }
  return {
    config,
    deps,
    requestId: request.headers.get('x-request-id')?.slice(0, 64).replace(/[^\w.-]/g, '') || crypto.randomUUID(),
    clientAddress,
    clientKey: clientRateKey(clientAddress, config.rateLimitIpv6Prefix),
    secure: tls || (!trusted && isLoopback(peer)),
    now: deps.clock(),
  }
}

const decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * Reads the body as text, refusing more than `limit` bytes while reading: a Content-Length
 * over the limit is refused before any byte is read, and a chunked body is cut off as soon as
 * it passes the limit. The whole body must arrive within `timeoutMs` (a client trickling one
 * byte a second would otherwise hold the request open for as long as it likes): 408.
 * A body that stops because the client went away is a ClientAbortError, never a server fault.
 * Refusals close the connection: the unread rest of the body cannot be left for the next request.
 */
export async function readText(request: Request, limit: number, timeoutMs: number): Promise<string> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) throw tooLarge(limit)
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null
  let timer: ReturnType<typeof setTimeout> | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      // Stop waiting for the stream; the 408 closes the connection, which ends any read left.
      reader?.cancel().catch(() => {})
      reject(tooSlow(timeoutMs))
    }, timeoutMs)
  })
  try {
    const bytes = readBytes(request, limit, declared, (opened) => (reader = opened))
    return decodeUtf8(await Promise.race([bytes, expired]))
  } finally {
    clearTimeout(timer)
  }
}

async function readBytes(
  request: Request,
  limit: number,
  declared: string | null,
  opened: (reader: ReadableStreamDefaultReader<Uint8Array>) => void,
): Promise<Uint8Array> {
  if (declared !== null && /^\d+$/.test(declared)) {
    // A declared length within the limit bounds the read (the HTTP parser frames the body by it),
    // so read it whole: on @hono/node-server this skips building a Request and a ReadableStream.
    const bytes = new Uint8Array(await clientRead(request.arrayBuffer()))
    if (bytes.byteLength > limit) throw tooLarge(limit)
    return bytes
  }
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  opened(reader)
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for (;;) {
      const { done, value } = await clientRead(reader.read())
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
  return chunks.length === 1 ? chunks[0]! : concat(chunks, size)
}

/**
 * A failed read of the body is the client's stream failing (a reset, a close mid-upload): name it
 * so, or it passes for whatever its error code resembles (ECONNRESET looks like a lost database
 * connection). A read the 408 race left behind may fail later with nobody awaiting it: caught.
 */
function clientRead<T>(pending: Promise<T>): Promise<T> {
  const read = pending.catch((error: unknown) => {
    if (error instanceof HttpError) throw error
    throw new ClientAbortError('The client closed the connection while sending the request body', { cause: error })
  })
  read.catch(() => {})
  return read
}

function decodeUtf8(bytes: Uint8Array): string {
  if (bytes.byteLength === 0) return ''
  try {
    return decoder.decode(bytes)
  } catch {
    throw new HttpError(400, 'Request body is not valid UTF-8')
  }
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
  return (request.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
}

const MAX_DEPTH = 32
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Parses a JSON object body and checks, without recursion, what the database and the rest of
 * the code cannot take: nesting deeper than 32, NUL characters (PostgreSQL rejects them in text,
 * SQLSTATE 22021), lone surrogates (stored silently as U+FFFD) and `__proto__` keys.
 */
export function parseJsonObject(text: string): Record<string, unknown> {
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

export function checkJsonValue(root: unknown): void {
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
export function parseForm(text: string): Record<string, string> {
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
