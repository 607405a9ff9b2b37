// GET /health (SPEC.md §4): public probe with a database round trip; 503 when it fails.
import { sql } from 'kysely'
import * as v from 'valibot'
import { ProductErrorSchema } from './access.ts'
import { json, type RequestContext } from './http.ts'
import type { OperationDoc, Route } from './surface.ts'

const CHECK_TIMEOUT_MS = 2000

export const HealthSchema = v.pipe(
  v.object({
    status: v.pipe(v.literal('ok'), v.description('"ok" when the service and its database answer.')),
    database: v.pipe(v.literal('ok'), v.description('Result of a database round trip.')),
    time: v.pipe(v.string(), v.isoTimestamp(), v.description("The server's clock.")),
  }),
  v.title('Health'),
)

async function databaseAnswers(ctx: RequestContext): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), CHECK_TIMEOUT_MS)))
  try {
    // A probe must answer within its own deadline even when the pool is exhausted.
    return await Promise.race([sql`select 1`.execute(ctx.deps.db).then(() => true, () => false), timeout])
  } finally {
    clearTimeout(timer)
  }
}

async function health(_request: Request, ctx: RequestContext): Promise<Response> {
  if (await databaseAnswers(ctx)) return json(200, { status: 'ok', database: 'ok', time: new Date(ctx.now).toISOString() })
  return json(503, { status: 'Service Unavailable', error: 'Database unavailable' }, { 'Retry-After': '5' })
}

const doc: OperationDoc = {
  operationId: 'getHealth',
  summary: 'Service health probe',
  tags: ['Health'],
  scopes: null,
  responses: {
    200: { description: 'The service and its database answer.', schema: HealthSchema },
    503: { description: 'The database does not answer ("Database unavailable").', schema: ProductErrorSchema, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
  },
}

export const healthRoutes: readonly Route[] = [{ method: 'GET', path: '/health', handler: health, doc }]
