// The webhook delivery log: an endpoint's deliveries and their replay, and the per-endpoint claim
// the delivery worker (jobs/webhook-delivery.ts) works from. Knows nothing of HTTP.
import { sql, type Kysely } from 'kysely'
import { DISABLE_AFTER_MS, retryDelay } from '../domain/webhooks.ts'
import { recordEvent } from './audit.ts'
import type { Database } from '../database/schema.ts'

export interface DeliveryRow {
  delivery_id: string
  seq: number
  webhook_id: string
  event_id: number | null
  decision_id: string | null
  message_id: string
  type: string
  occurred_at: Date
  status: 'pending' | 'delivered' | 'failed'
  attempts: number
  next_attempt_at: Date | null
  last_attempt_at: Date | null
  last_status_code: number | null
  last_error: string | null
  delivered_at: Date | null
  created_at: Date
  replay_of: string | null
}

const DELIVERY_COLUMNS = [
  'delivery_id',
  'seq',
  'webhook_id',
  'event_id',
  'decision_id',
  'message_id',
  'type',
  'occurred_at',
  'status',
  'attempts',
  'next_attempt_at',
  'last_attempt_at',
  'last_status_code',
  'last_error',
  'delivered_at',
  'created_at',
  'replay_of',
] as const

function toDelivery(row: Record<string, unknown>): DeliveryRow {
  return {
    ...(row as unknown as DeliveryRow),
    seq: Number(row.seq),
    event_id: row.event_id === null ? null : Number(row.event_id),
  }
}

/** The endpoint's delivery log, newest first; `beforeSeq` pages. */
export async function listDeliveries(db: Kysely<Database>, webhookId: string, beforeSeq: number | null, limit: number): Promise<DeliveryRow[]> {
  let query = db.selectFrom('webhook_deliveries').select(DELIVERY_COLUMNS).where('webhook_id', '=', webhookId)
  if (beforeSeq !== null) query = query.where('seq', '<', beforeSeq)
  const rows = await query.orderBy('seq', 'desc').limit(limit).execute()
  return rows.map(toDelivery)
}

export async function findDelivery(db: Kysely<Database>, webhookId: string, deliveryId: string): Promise<DeliveryRow | null> {
  const row = await db.selectFrom('webhook_deliveries').select(DELIVERY_COLUMNS).where('webhook_id', '=', webhookId).where('delivery_id', '=', deliveryId).executeTakeFirst()
  return row ? toDelivery(row) : null
}

/** Queues the delivery's event again for its endpoint, behind what is already queued. */
export async function replayDelivery(db: Kysely<Database>, original: DeliveryRow, now: Date): Promise<DeliveryRow> {
  const row = await sql<Record<string, unknown>>`
    insert into webhook_deliveries (delivery_id, webhook_id, organization_id, event_id, decision_id, message_id, type, occurred_at, payload, next_attempt_at, created_at, replay_of)
    select ${crypto.randomUUID()}, webhook_id, organization_id, event_id, decision_id, message_id, type, occurred_at, payload, ${now}, ${now}, delivery_id
    from webhook_deliveries where delivery_id = ${original.delivery_id}
    returning ${sql.join(DELIVERY_COLUMNS.map((column) => sql.ref(column)))}
  `.execute(db)
  return toDelivery(row.rows[0]!)
}

// ---- Delivery: claim an endpoint, send its queue in order, record ----

export interface ClaimedEndpoint {
  webhook_id: string
  organization_id: string
  url: string
  secret: string
  failing_since: Date | null
}

/**
 * Leases up to `limit` active endpoints whose oldest pending delivery is due and that no process
 * is working (their rows are taken FOR UPDATE SKIP LOCKED, so concurrent claimers split them).
 */
export async function claimEndpoints(db: Kysely<Database>, now: Date, leaseMs: number, limit: number): Promise<ClaimedEndpoint[]> {
  const result = await sql<ClaimedEndpoint>`
    update webhooks set lease_until = ${new Date(now.getTime() + leaseMs)}
    where webhook_id in (
      select w.webhook_id from webhooks w
      where w.status = 'active' and (w.lease_until is null or w.lease_until <= ${now})
        and (select d.next_attempt_at from webhook_deliveries d where d.webhook_id = w.webhook_id and d.status = 'pending' order by d.seq limit 1) <= ${now}
      order by w.lease_until nulls first
      limit ${limit}
      for update skip locked
    )
    returning webhook_id, organization_id, url, secret, failing_since`.execute(db)
  return result.rows
}

export interface QueuedDelivery {
  delivery_id: string
  message_id: string
  attempts: number
  next_attempt_at: Date
  payload: string
}

/** The endpoint's pending deliveries, oldest first. */
export async function queuedDeliveries(db: Kysely<Database>, webhookId: string, limit: number): Promise<QueuedDelivery[]> {
  const rows = await db
    .selectFrom('webhook_deliveries')
    .select(['delivery_id', 'message_id', 'attempts', 'next_attempt_at', 'payload'])
    .where('webhook_id', '=', webhookId)
    .where('status', '=', 'pending')
    .orderBy('seq')
    .limit(limit)
    .execute()
  return rows.map((row) => ({ ...row, next_attempt_at: row.next_attempt_at! }))
}

export interface DeliveredResult {
  readonly deliveryId: string
  readonly statusCode: number
  readonly at: Date
}

/** Marks deliveries done (one statement) and the endpoint healthy. */
export async function recordDelivered(db: Kysely<Database>, webhookId: string, results: readonly DeliveredResult[]): Promise<void> {
  if (results.length === 0) return
  await sql`
    update webhook_deliveries d set status = 'delivered', attempts = d.attempts + 1, last_status_code = r.code, last_error = null,
      last_attempt_at = r.at, delivered_at = r.at, next_attempt_at = null
    from unnest(${results.map((r) => r.deliveryId)}::uuid[], ${results.map((r) => r.statusCode)}::int[], ${results.map((r) => r.at.toISOString())}::timestamptz[]) as r(id, code, at)
    where d.delivery_id = r.id`.execute(db)
  await db.updateTable('webhooks').set({ failing_since: null }).where('webhook_id', '=', webhookId).execute()
}

export interface FailureOutcome {
  /** The delivery is given up (its schedule is exhausted). */
  readonly gaveUp: boolean
  /** The endpoint has failed for DISABLE_AFTER_MS and was disabled. */
  readonly disabled: boolean
}

/**
 * Records a failed attempt: the next one on the schedule, or given up after the last. An endpoint
 * that has failed every attempt since DISABLE_AFTER_MS ago is disabled, with a webhook.disabled event.
 */
export async function recordFailure(
  db: Kysely<Database>,
  endpoint: ClaimedEndpoint,
  delivery: QueuedDelivery,
  failure: { statusCode: number | null; error: string; at: Date },
): Promise<FailureOutcome> {
  return db.transaction().execute(async (trx) => {
    const attempts = delivery.attempts + 1
    const delay = retryDelay(attempts)
    await trx
      .updateTable('webhook_deliveries')
      .set({
        status: delay === null ? 'failed' : 'pending',
        attempts,
        last_status_code: failure.statusCode,
        last_error: failure.error.slice(0, 500),
        last_attempt_at: failure.at,
        next_attempt_at: delay === null ? null : new Date(failure.at.getTime() + delay),
      })
      .where('delivery_id', '=', delivery.delivery_id)
      .execute()
    const since = endpoint.failing_since ?? failure.at
    if (!endpoint.failing_since) await trx.updateTable('webhooks').set({ failing_since: since }).where('webhook_id', '=', endpoint.webhook_id).execute()
    const disabled = failure.at.getTime() - since.getTime() >= DISABLE_AFTER_MS
    if (disabled) {
      const reason = `Every delivery attempt failed since ${since.toISOString()}`
      await trx.updateTable('webhooks').set({ status: 'disabled', disabled_at: failure.at, disabled_reason: reason, lease_until: null }).where('webhook_id', '=', endpoint.webhook_id).execute()
      await recordEvent(trx, {
        organizationId: endpoint.organization_id,
        actor: { type: 'system', id: null },
        type: 'webhook.disabled',
        target: { type: 'webhook', id: endpoint.webhook_id },
        data: { url: endpoint.url, reason, last_error: failure.error.slice(0, 500) },
        occurredAt: failure.at,
      })
    }
    return { gaveUp: delay === null, disabled }
  })
}

/** Ends the lease on an endpoint, so any process may work it again. */
export async function releaseEndpoint(db: Kysely<Database>, webhookId: string): Promise<void> {
  await db.updateTable('webhooks').set({ lease_until: null }).where('webhook_id', '=', webhookId).execute()
}
