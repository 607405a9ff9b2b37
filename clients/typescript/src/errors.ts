// What the client throws. An error answer throws the subclass of APIStatusError for its status
// family; a request that got no answer throws APIConnectionError (or APITimeoutError); a governed
// action that may not run throws ActionDenied (or a subclass). Messages never hold a credential:
// they are built from the server's error text, the status and the request id only.

/** The base of every error this package throws. */
export class StewardError extends Error {
  override name = 'StewardError'
}

/** The server answered 4xx or 5xx. */
export class APIStatusError extends StewardError {
  override name = 'APIStatusError'
  /** The HTTP status. */
  readonly status: number
  /** The server's message (its `error_description` or `error`). */
  readonly error: string
  /** The decoded JSON answer, or null. */
  readonly body: unknown
  /** The answer's X-Request-Id, for support. */
  readonly requestId: string | null
  /** Seconds from Retry-After, or null. */
  readonly retryAfter: number | null

  constructor(status: number, error: string, options: { body?: unknown; requestId?: string | null; retryAfter?: number | null } = {}) {
    super(`${status}: ${error}${options.requestId ? ` (request ${options.requestId})` : ''}`)
    this.status = status
    this.error = error
    this.body = options.body ?? null
    this.requestId = options.requestId ?? null
    this.retryAfter = options.retryAfter ?? null
  }
}

/** 400: malformed or invalid request. */
export class BadRequestError extends APIStatusError {
  override name = 'BadRequestError'
}
/** 401: the credential is missing, malformed, unknown, expired or revoked. */
export class AuthenticationError extends APIStatusError {
  override name = 'AuthenticationError'
}
/** 403: the credential may not do this. */
export class PermissionDeniedError extends APIStatusError {
  override name = 'PermissionDeniedError'
}
/** 404: no such resource in the credential's organization. */
export class NotFoundError extends APIStatusError {
  override name = 'NotFoundError'
}
/** 409: conflicts with the current state (a changed plan, a taken handle, a cap…). */
export class ConflictError extends APIStatusError {
  override name = 'ConflictError'
}
/** 413: the body is over the server's limit. */
export class PayloadTooLargeError extends APIStatusError {
  override name = 'PayloadTooLargeError'
}
/** Any other 4xx (405, 408, 410, 415, 422…). */
export class UnprocessableEntityError extends APIStatusError {
  override name = 'UnprocessableEntityError'
}
/** 429: too many requests; retryAfter says when to come back. */
export class RateLimitError extends APIStatusError {
  override name = 'RateLimitError'
}
/** 5xx: the server could not answer (a 503 from POST /decisions means nothing was logged). */
export class ServerError extends APIStatusError {
  override name = 'ServerError'
}

/** No answer: the server could not be reached or the connection broke. */
export class APIConnectionError extends StewardError {
  override name = 'APIConnectionError'
  constructor(message = 'Could not reach the Steward server', options?: { cause?: unknown }) {
    super(message, options)
  }
}

/** No answer within the client's timeout. */
export class APITimeoutError extends APIConnectionError {
  override name = 'APITimeoutError'
  constructor(message = 'The request to the Steward server timed out') {
    super(message)
  }
}

/** A governed action may not run: the decision was deny, or its approval did not come. */
export class ActionDenied extends StewardError {
  override name = 'ActionDenied'
  readonly action: string
  /** The last decision answer. */
  readonly decision: Record<string, unknown> | null
  /** Its reasons. */
  readonly reasons: Record<string, unknown>[]
  /** The approval, when one was asked for. */
  readonly approval: Record<string, unknown> | null

  constructor(message: string, options: { action?: string; decision?: Record<string, unknown> | null; approval?: Record<string, unknown> | null } = {}) {
    super(message)
    this.action = options.action ?? ''
    this.decision = options.decision ?? null
    this.approval = options.approval ?? null
    this.reasons = Array.isArray(this.decision?.reasons) ? (this.decision.reasons as Record<string, unknown>[]) : []
  }
}

/** The approval expired (nobody decided in time, or it was not used in time): a deny. */
export class ApprovalExpired extends ActionDenied {
  override name = 'ApprovalExpired'
}

/** The caller's own wait ran out while the approval was still pending: the action does not run. */
export class ApprovalTimeout extends ActionDenied {
  override name = 'ApprovalTimeout'
}

const BY_STATUS: Record<number, typeof APIStatusError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  429: RateLimitError,
}

/** The error for an error answer, from its status and decoded body. */
export function statusError(status: number, body: unknown, requestId: string | null, retryAfter: number | null): APIStatusError {
  let error = ''
  if (body !== null && typeof body === 'object') {
    for (const field of ['error_description', 'error', 'message']) {
      const value = (body as Record<string, unknown>)[field]
      if (typeof value === 'string' && value !== '') {
        error = value
        break
      }
    }
  }
  if (error === '') error = `HTTP ${status}`
  const Class = status >= 500 ? ServerError : (BY_STATUS[status] ?? UnprocessableEntityError)
  return new Class(status, error, { body, requestId, retryAfter })
}
