// CORS for browsers posting from another origin (the marketing website), per the Fetch standard.
// Never Access-Control-Allow-Credentials: the API has no cookies, and credentials with a
// wildcard or an arbitrary echoed origin would let any site act as the user.
import type { PipelineConfig } from './context.ts'
import { reply, type Reply } from './reply.ts'

const EXPOSED = 'Retry-After, Deprecation, Sunset, Link, Location, RateLimit, RateLimit-Policy, X-Request-Id'
const ALLOWED_HEADERS = 'Content-Type, Service-Api-Version, Authorization, X-Request-Id'
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/**
 * Headers every response to a cross-origin request carries, errors included, written straight
 * into the reply's record by their lower-case names (this runs on every answer).
 */
export function setCorsHeaders(reply: Reply, config: Pick<PipelineConfig, 'corsOrigins'>, request: Request): void {
  const headers = reply.headers
  if (config.corsOrigins === '*') {
    headers['access-control-allow-origin'] = '*'
    headers['access-control-expose-headers'] = EXPOSED
    return
  }
  const origin = request.headers.get('origin')
  if (origin !== null && config.corsOrigins.includes(origin)) {
    headers['access-control-allow-origin'] = origin
    headers['access-control-expose-headers'] = EXPOSED
  }
  // The answer depends on Origin: caches must key on it.
  headers.vary = 'Origin'
}

/** Answer to an OPTIONS request: a CORS preflight (204) or a plain capability query. */
export function preflight(config: Pick<PipelineConfig, 'corsOrigins'>, request: Request, allow: readonly string[]): Reply {
  const methods = [...new Set([...allow, 'OPTIONS'])].join(', ')
  const out = reply(204, null, { Allow: methods })
  setCorsHeaders(out, config, request)
  if (request.headers.get('access-control-request-method') !== null && out.headers['access-control-allow-origin']) {
    out.headers['access-control-allow-methods'] = methods
    const requested = (request.headers.get('access-control-request-headers') ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => HEADER_TOKEN.test(name))
    out.headers['access-control-allow-headers'] = requested.length > 0 ? requested.join(', ') : ALLOWED_HEADERS
    out.headers['access-control-max-age'] = '7200'
  }
  return out
}
