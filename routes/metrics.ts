// GET /metrics (docs/observability.md): the Prometheus text exposition, served only when
// METRICS_TOKEN is set, to a request that bears that token. It is not part of the product API
// (no OpenAPI operation, no organization), so it has its own small surface.
import { createHash, timingSafeEqual } from 'node:crypto'
import type { Config } from '../config.ts'
import { HttpError, REASON } from '../http/errors.ts'
import { reply, type Reply } from '../http/reply.ts'
import { requireSecureTransport } from './access.ts'
import type { RequestContext, Surface } from './deps.ts'

export const METRICS_PATH = '/metrics'

const digest = (text: string) => createHash('sha256').update(text).digest()

const CHALLENGE = { 'WWW-Authenticate': 'Bearer realm="metrics"' }
const UNAUTHORIZED = 'GET /metrics needs the METRICS_TOKEN as a bearer token (Authorization: Bearer …)'

/** The /metrics surface, or null when METRICS_TOKEN is unset (then /metrics is an unknown path). */
export function createMetricsSurface(config: Config): Surface | null {
  if (config.metricsToken === null) return null
  // Compared as SHA-256 digests: equal lengths for timingSafeEqual, and no length leak.
  const expected = digest(config.metricsToken)

  async function scrape(request: Request, ctx: RequestContext): Promise<Reply> {
    requireSecureTransport(ctx)
    const header = request.headers.get('authorization') ?? ''
    const given = /^Bearer +(\S+)\s*$/i.exec(header)?.[1]
    if (given === undefined || !timingSafeEqual(digest(given), expected)) throw new HttpError(401, UNAUTHORIZED, { headers: CHALLENGE })
    const scraped = await ctx.deps.telemetry?.scrape()
    if (!scraped) throw new HttpError(503, 'Metrics could not be loaded; see the server log', { headers: { 'Retry-After': '5' } })
    return reply(200, scraped.text, { 'Content-Type': scraped.contentType })
  }

  return {
    name: 'metrics',
    routes: [
      {
        method: 'GET',
        path: METRICS_PATH,
        handler: scrape,
        doc: {
          operationId: 'getMetrics',
          summary: 'Prometheus metrics',
          tags: ['Operations'],
          scopes: null,
          responses: { 200: { description: 'The Prometheus text exposition format.', mediaType: 'text/plain' }, 401: { description: 'The METRICS_TOKEN bearer token is missing or wrong.' } },
        },
      },
    ],
    errorBody: (status, error) => ({ status: REASON[status] ?? 'Error', error: error.message }),
    headers: { 'Cache-Control': 'no-store' },
  }
}
