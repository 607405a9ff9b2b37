// The one error type and what the pipeline knows about errors: reason phrases, the database-down
// test, a client that went away, and the refusal of CONNECT.

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

/** The headers of every HttpError that has none of its own: one frozen object, shared. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/**
 * The one error type. `message` is safe to show to the client; `code` is an optional
 * machine-readable code (the OAuth token endpoint uses RFC 6749 §5.2 codes).
 *
 * An HttpError is an answer, not a fault: nothing shows or logs where it was made, and unknown
 * paths and bad bodies make one per request. So it captures no stack trace (capturing one is
 * dear beside the rest of such an answer): its `stack` is its first line only, "HttpError:
 * message". Node builds some of its own errors the same way, with stackTraceLimit 0.
 */
export class HttpError extends Error {
  static {
    // On the prototype, as Error's own name is: nothing to define on every refusal.
    this.prototype.name = 'HttpError'
  }
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly code: string | null
  /** Made by `fixedError`: shared by every request it answers, frozen, its body serialized once. */
  readonly fixed: boolean = false
  constructor(status: number, message: string, options: { headers?: Record<string, string>; code?: string } = {}) {
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
    super(message)
    Error.stackTraceLimit = limit
    this.status = status
    this.headers = options.headers ? Object.freeze({ ...options.headers }) : NO_HEADERS
    this.code = options.code ?? null
  }
}

/**
 * A refusal that is the same on every request that earns it (a malformed credential's 401): made
 * once and shared, frozen so that nothing can change it for the next request. The pipeline
 * serializes its body once per surface instead of on every answer (error-reply.ts).
 */
export function fixedError(status: number, message: string, options: { headers?: Record<string, string>; code?: string } = {}): HttpError {
  const error = new HttpError(status, message, options)
  ;(error as { fixed: boolean }).fixed = true
  return Object.freeze(error)
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

/** The one message for a request target or Host that cannot make a URL, whichever runtime saw it. */
export const BAD_TARGET = 'Bad request target or Host header'
