// GET /health (docs/api.md): public probe with a database round trip; 503 when it fails.
import type { Kysely } from 'kysely'
import * as v from 'valibot'
import { ProductErrorSchema } from './access.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { databaseAnswers } from '../storage/health.ts'
import type { Database } from '../database/schema.ts'
import type { OperationDoc } from '../http/pipeline.ts'

const CHECK_TIMEOUT_MS = 2000

const HealthSchema = v.pipe(
  v.object({
    status: v.pipe(v.literal('ok'), v.description('"ok" when the service and its database answer.')),
    database: v.pipe(v.literal('ok'), v.description('Result of a database round trip.')),
    time: v.pipe(v.string(), v.isoTimestamp(), v.description("The server's clock.")),
  }),
  v.title('Health'),
)

interface Checks {
  /** The check under way, if any. */
  running: Promise<boolean> | null
  /** The check that starts when `running` ends, shared by every request that arrived meanwhile. */
  next: Promise<boolean> | null
}

/**
 * Concurrent probes share one `select 1` instead of sending one each (under load the probe
 * queries crowded out real work in the pool). Never a cached answer: a request shares only a
 * check that starts after it arrived — the one it starts itself when none is under way, or
 * else the next one, which starts as soon as the current one ends.
 */
function createDatabaseCheck(db: Kysely<Database>): () => Promise<boolean> {
  const checks: Checks = { running: null, next: null }
  function start(): Promise<boolean> {
    const check = databaseAnswers(db, CHECK_TIMEOUT_MS)
    checks.running = check
    void check.then(() => {
      if (checks.running === check) checks.running = null
    })
    return check
  }
  return () => {
    if (checks.running === null) return start()
    checks.next ??= checks.running.then(() => {
      checks.next = null
      return start()
    })
    return checks.next
  }
}

export function healthRoutes(db: Kysely<Database>): Route[] {
  const checkDatabase = createDatabaseCheck(db)
  async function health(_request: Request, ctx: RequestContext): Promise<Reply> {
    if (await checkDatabase()) return json(200, { status: 'ok', database: 'ok', time: new Date(ctx.now).toISOString() })
    return json(503, { status: 'Service Unavailable', error: 'Database unavailable' }, { 'Retry-After': '5' })
  }
  return [{ method: 'GET', path: '/health', handler: health, doc }]
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

