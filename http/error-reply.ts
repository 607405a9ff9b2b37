// A thrown or returned error as an answer in a surface's own format. An HttpError says what to
// answer; a client gone away, a database down and any other fault are turned into one here, and
// a fault is logged without ever being shown.
import { errorCode } from '../log.ts'
import type { RequestContext } from './context.ts'
import { CLIENT_CLOSED, ClientAbortError, HttpError, isDatabaseUnavailable } from './errors.ts'
import { json, jsonText, type Reply } from './reply.ts'
import type { Surface } from './surface.ts'

const GENERIC_500 = 'Internal server error'
const UNAVAILABLE = 'Service temporarily unavailable; try again shortly'

/** Turns a thrown value into a reply in the surface's format; unknown errors are logged, never shown. */
export function errorReply(surface: Surface<any, any>, error: unknown, ctx: RequestContext): Reply {
  const httpError = asHttpError(error, ctx)
  if (!httpError.fixed) return json(httpError.status, surface.errorBody(httpError.status, httpError), httpError.headers)
  // A fixed refusal (errors.ts `fixedError`) is the same on every request: its body, once per surface.
  let bodies = FIXED_BODIES.get(surface)
  if (bodies === undefined) FIXED_BODIES.set(surface, (bodies = new WeakMap()))
  let text = bodies.get(httpError)
  if (text === undefined) bodies.set(httpError, (text = JSON.stringify(surface.errorBody(httpError.status, httpError))))
  return jsonText(httpError.status, text, httpError.headers)
}

/** The serialized error body of each fixed refusal, per surface. */
const FIXED_BODIES = new WeakMap<Surface<any, any>, WeakMap<HttpError, string>>()

function asHttpError(error: unknown, ctx: RequestContext): HttpError {
  if (error instanceof HttpError) return error
  if (error instanceof ClientAbortError) {
    // Checked before the database test: a reset client stream carries ECONNRESET too. Logged and
    // counted by the fetch handler; the reply reaches nobody.
    return new HttpError(CLIENT_CLOSED, error.message)
  }
  if (isDatabaseUnavailable(error)) {
    ctx.deps.logger.log('warn', 'database unavailable', { requestId: ctx.requestId, code: errorCode(error) })
    return new HttpError(503, UNAVAILABLE, { headers: { 'Retry-After': '5' } })
  }
  const e = error as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown }
  // Logged by name, code and message only: pg's `detail` can hold submitted values.
  ctx.deps.logger.log('error', 'unhandled error', {
    requestId: ctx.requestId,
    error: String(e?.name ?? 'Error'),
    code: errorCode(error),
    message: typeof e?.message === 'string' ? e.message.slice(0, 500) : null,
    stack: typeof e?.stack === 'string' ? e.stack.split('\n').slice(0, 6).join(' | ') : null,
  })
  return new HttpError(500, GENERIC_500)
}
