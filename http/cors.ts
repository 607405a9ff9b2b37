// CORS for browsers posting from another origin (the marketing website), per the Fetch standard.
// Never Access-Control-Allow-Credentials: the API has no cookies, and credentials with a
// wildcard or an arbitrary echoed origin would let any site act as the user.
import type { PipelineConfig } from './context.ts'
import { reply, type Reply } from './reply.ts'

const EXPOSED = 'Retry-After, Deprecation, Sunset, Link, Location, RateLimit, RateLimit-Policy, X-Request-Id'
const ALLOWED_HEADERS = 'Content-Type, Service-Api-Version, Authorization, X-Request-Id'
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** Headers every response to a cross-origin request carries, errors included. */
export function corsHeaders(config: Pick<PipelineConfig, 'corsOrigins'>, request: Request): Record<string, string> {
  const origin = request.headers.get('origin')
  if (config.corsOrigins === '*') {
    return { 'Access-Control-Allow-Origin': '*', 'Access-Control-Expose-Headers': EXPOSED }
  }
  // The answer depends on Origin: caches must key on it.
  if (origin !== null && config.corsOrigins.includes(origin)) {
    return { 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': EXPOSED, Vary: 'Origin' }
  }
  return { Vary: 'Origin' }
}

/** Answer to an OPTIONS request: a CORS preflight (204) or a plain capability query. */
export function preflight(config: Pick<PipelineConfig, 'corsOrigins'>, request: Request, allow: readonly string[]): Reply {
  const methods = [...new Set([...allow, 'OPTIONS'])].join(', ')
  const headers: Record<string, string> = { Allow: methods, ...corsHeaders(config, request) }
  if (request.headers.get('access-control-request-method') !== null && headers['Access-Control-Allow-Origin']) {
    headers['Access-Control-Allow-Methods'] = methods
    const requested = (request.headers.get('access-control-request-headers') ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => HEADER_TOKEN.test(name))
    headers['Access-Control-Allow-Headers'] = requested.length > 0 ? requested.join(', ') : ALLOWED_HEADERS
    headers['Access-Control-Max-Age'] = '7200'
  }
  return reply(204, null, headers)
}
