// Webhook endpoints, the fan-out of the outbox (audit events and denied decisions) into the
// delivery log, and the per-endpoint claim the delivery worker works from. Knows nothing of HTTP.
import { sql, type Kysely, type Transaction } from 'kysely'
import { withoutSecrets, type Actor } from '../domain/audit.ts'
import { coveredTypes, DISABLE_AFTER_MS, retryDelay, SUBSCRIPTION_COVERS, WEBHOOK_EVENT_TYPES, type WebhookEventType } from '../domain/webhooks.ts'
import { recordEvent } from './audit.ts'
import type { Database } from '../database/schema.ts'

export interface WebhookRow {
  webhook_id: string
  organization_id: string
  url: string
  event_types: string[]
  description: string
  status: 'active' | 'disabled'
  created_at: Date
  created_by: string
  disabled_at: Date | null
  disabled_reason: string | null
}

const COLUMNS = ['webhook_id', 'organization_id', 'url', 'event_types', 'description', 'status', 'created_at', 'created_by', 'disabled_at', 'disabled_reason'] as const

function toWebhook(row: Record<string, unknown>): WebhookRow {
  const types = row.event_types
  return {
    ...(row as unknown as WebhookRow),
    event_types: typeof types === 'string' ? (JSON.parse(types) as string[]) : (types as string[]),
    created_at: new Date(row.created_at as Date),
    disabled_at: row.disabled_at ? new Date(row.disabled_at as Date) : null,
  }
}

export interface Change {
  readonly actor: Actor
  readonly requestId: string | null
  readonly now: Date
}

export async function createWebhook(
  db: Kysely<Database>,
  input: { organizationId: string; url: string; eventTypes: readonly string[]; description: string; secret: string; createdBy: string },
  change: Change,
): Promise<WebhookRow> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('webhooks')
      .values({
        webhook_id: crypto.randomUUID(),
        organization_id: input.organizationId,
        url: input.url,
        event_types: JSON.stringify(input.eventTypes),
        description: input.description,
        secret: input.secret,
        created_at: change.now,
        created_by: input.createdBy,
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    const webhook = toWebhook(row)
    await recordEvent(trx, {
      organizationId: input.organizationId,
      actor: change.actor,
      type: 'webhook.created',
      target: { type: 'webhook', id: webhook.webhook_id },
      data: { url: webhook.url, event_types: webhook.event_types, description: webhook.description },
      requestId: change.requestId,
      occurredAt: change.now,
    })
    return webhook
  })
}

export interface WebhookCursor {
  createdAt: Date
  webhookId: string
}

/** Newest first. */
export async function listWebhooks(db: Kysely<Database>, organizationId: string, after: WebhookCursor | null, limit: number): Promise<WebhookRow[]> {
  let query = db.selectFrom('webhooks').select(COLUMNS).where('organization_id', '=', organizationId)
  if (after) {
    query = query.where((eb) =>
      eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('webhook_id', '<', after.webhookId)])]),
    )
  }
  const rows = await query.orderBy('created_at', 'desc').orderBy('webhook_id', 'desc').limit(limit).execute()
  return rows.map(toWebhook)
}

export async function findWebhook(db: Kysely<Database>, organizationId: string, webhookId: string): Promise<WebhookRow | null> {
  const row = await db.selectFrom('webhooks').select(COLUMNS).where('organization_id', '=', organizationId).where('webhook_id', '=', webhookId).executeTakeFirst()
  return row ? toWebhook(row) : null
}

/** Deletes the endpoint and its delivery log; false when it is not the organization's. */
export async function deleteWebhook(db: Kysely<Database>, organizationId: string, webhookId: string, change: Change): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.deleteFrom('webhooks').where('organization_id', '=', organizationId).where('webhook_id', '=', webhookId).returning(['url']).executeTakeFirst()
    if (!row) return false
    await recordEvent(trx, {
      organizationId,
      actor: change.actor,
      type: 'webhook.deleted',
      target: { type: 'webhook', id: webhookId },
      data: { url: row.url },
      requestId: change.requestId,
      occurredAt: change.now,
    })
    return true
  })
}

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
  const at = (value: unknown) => (value === null || value === undefined ? null : new Date(value as Date))
  return {
    ...(row as unknown as DeliveryRow),
    seq: Number(row.seq),
    event_id: row.event_id === null ? null : Number(row.event_id),
    occurred_at: new Date(row.occurred_at as Date),
    created_at: new Date(row.created_at as Date),
    next_attempt_at: at(row.next_attempt_at),
    last_attempt_at: at(row.last_attempt_at),
    delivered_at: at(row.delivered_at),
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

// ---- Fan-out: the outbox into the delivery log ----

/** Any constant: the fan-out's advisory lock. */
const FANOUT_LOCK = 0x57e6a7d0

interface OutboxItem {
  readonly xid: number
  readonly order: number
  readonly organizationId: string
  readonly subscription: WebhookEventType
  readonly type: string
  readonly messageId: string
  readonly eventId: number | null
  readonly decisionId: string | null
  readonly occurredAt: Date
  readonly payload: string
}

function iso(value: unknown): string | null {
  return value === null || value === undefined ? null : new Date(value as Date).toISOString()
}

function parsed(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value
}

function subscriptionOf(type: string): WebhookEventType | null {
  for (const name of WEBHOOK_EVENT_TYPES) if (SUBSCRIPTION_COVERS[name].includes(type)) return name
  return null
}

function body(type: string, occurredAt: Date, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: occurredAt.toISOString(), data: withoutSecrets(data) })
}

/**
 * One fan-out pass, if no other process is running one: every event and denied decision of a
 * transaction with xid in [cursor, bound), bound being the oldest transaction still running, becomes
 * a delivery for each active endpoint of its organization that subscribes to it and was created in
 * an earlier transaction. Returns how many deliveries were queued (null: another pass held the lock).
 */
export async function fanOut(db: Kysely<Database>, now: Date, apiUrl: string): Promise<number | null> {
  if (await movedWithoutEndpoints(db)) return 0
  return db.transaction().execute(async (trx) => {
    const locked = await sql<{ ok: boolean }>`select pg_try_advisory_xact_lock(${FANOUT_LOCK}) as ok`.execute(trx)
    if (!locked.rows[0]?.ok) return null
    const bound = Number((await sql<{ xid: string | number }>`select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as xid`.execute(trx)).rows[0]!.xid)
    const from = Number((await trx.selectFrom('webhook_fanout').select('xid_through').executeTakeFirstOrThrow()).xid_through)
    if (bound <= from) return 0
    const endpoints = (await trx.selectFrom('webhooks').select(['webhook_id', 'organization_id', 'event_types', 'created_xid']).where('status', '=', 'active').execute()).map((row) => ({
      ...row,
      event_types: parsed(row.event_types) as string[],
      created_xid: Number(row.created_xid),
    }))
    let queued = 0
    if (endpoints.length > 0) {
      const items = await readOutbox(trx, from, bound, endpoints, apiUrl)
      for (let i = 0; i < items.length; i += FANOUT_CHUNK) queued += await insertDeliveries(trx, items.slice(i, i + FANOUT_CHUNK), endpoints, now)
    }
    await trx.updateTable('webhook_fanout').set({ xid_through: bound }).execute()
    return queued
  })
}

/**
 * With no active endpoint anywhere (a server without webhooks), a pass has nothing to deliver and
 * only moves the cursor: one statement, no transaction, no lock. On PGlite, where the database runs
 * on the server's thread, the locked transaction of five statements held every request for 4–7 ms
 * each second. Safe without the lock: the check and the move share one snapshot, so an endpoint
 * this snapshot does not see was created by a transaction at or above its xmin, the new cursor,
 * and it only ever receives items above its own transaction. Returns false when endpoints exist.
 */
async function movedWithoutEndpoints(db: Kysely<Database>): Promise<boolean> {
  const { rows } = await sql<{ active: boolean }>`
    with b as materialized (
      select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as bound, exists (select 1 from webhooks where status = 'active') as active
    ), moved as (
      -- A data-modifying CTE runs whether or not the select reads it.
      update webhook_fanout set xid_through = b.bound from b where not b.active and webhook_fanout.xid_through < b.bound
    )
    select b.active from b`.execute(db)
  return rows[0]?.active === false
}

/** Outbox items per fan-out statement. */
const FANOUT_CHUNK = 2000

/**
 * One statement: each item's fields (its body once) and the (item, endpoint) pairs go in as arrays;
 * the join writes one delivery per pair, in the items' order (seq follows the order by).
 */
async function insertDeliveries(
  trx: Transaction<Database>,
  items: readonly OutboxItem[],
  endpoints: readonly { webhook_id: string; organization_id: string; event_types: string[]; created_xid: number }[],
  now: Date,
): Promise<number> {
  const pairItem: number[] = []
  const pairWebhook: string[] = []
  items.forEach((item, index) => {
    for (const endpoint of endpoints) {
      if (endpoint.organization_id !== item.organizationId || item.xid <= endpoint.created_xid || !endpoint.event_types.includes(item.subscription)) continue
      pairItem.push(index + 1)
      pairWebhook.push(endpoint.webhook_id)
    }
  })
  if (pairItem.length === 0) return 0
  await sql`
    insert into webhook_deliveries (delivery_id, webhook_id, organization_id, event_id, decision_id, message_id, type, occurred_at, payload, next_attempt_at, created_at)
    select gen_random_uuid(), p.webhook_id, i.organization_id, i.event_id, i.decision_id, i.message_id, i.type, i.occurred_at, i.payload, ${now}, ${now}
    from unnest(${pairItem}::int[], ${pairWebhook}::uuid[]) with ordinality as p(item, webhook_id, n)
    join unnest(
      ${items.map((item) => item.organizationId)}::uuid[], ${items.map((item) => item.eventId)}::bigint[], ${items.map((item) => item.decisionId)}::uuid[],
      ${items.map((item) => item.messageId)}::text[], ${items.map((item) => item.type)}::text[], ${items.map((item) => item.occurredAt.toISOString())}::timestamptz[],
      ${items.map((item) => item.payload)}::text[]
    ) with ordinality as i(organization_id, event_id, decision_id, message_id, type, occurred_at, payload, n) on i.n = p.item
    order by p.n`.execute(trx)
  return pairItem.length
}

async function readOutbox(
  trx: Transaction<Database>,
  from: number,
  bound: number,
  endpoints: readonly { organization_id: string; event_types: string[] }[],
  apiUrl: string,
): Promise<OutboxItem[]> {
  const organizations = [...new Set(endpoints.map((endpoint) => endpoint.organization_id))]
  const types = coveredTypes(endpoints.flatMap((endpoint) => endpoint.event_types))
  const items: OutboxItem[] = []
  if (types.length > 0) {
    const events = await trx
      .selectFrom('audit_events')
      .select(['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'xid'])
      .where('organization_id', 'in', organizations)
      .where('xid', '>=', from)
      .where('xid', '<', bound)
      .where('type', 'in', types)
      .execute()
    const approvalIds = events.filter((event) => event.target_type === 'approval' && event.target_id && /^[0-9a-f-]{36}$/i.test(event.target_id)).map((event) => event.target_id!)
    const approvals = new Map<string, Record<string, unknown>>()
    if (approvalIds.length > 0) {
      const rows = await trx
        .selectFrom('approvals')
        .select(['approval_id', 'decision_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'expires_at', 'approvers_required', 'approver_roles', 'status'])
        .where('approval_id', 'in', [...new Set(approvalIds)])
        .execute()
      for (const row of rows) {
        const base = `${apiUrl}/approvals/${row.approval_id}`
        approvals.set(row.approval_id, {
          approval_id: row.approval_id,
          decision_id: row.decision_id,
          agent: { agent_id: row.agent_id, handle: row.agent_handle },
          action: row.action,
          resource: row.resource,
          args: parsed(row.args),
          context: parsed(row.context),
          expires_at: iso(row.expires_at),
          approvers_required: row.approvers_required,
          approver_roles: parsed(row.approver_roles),
          links: { approval: base, approve: `${base}/approve`, deny: `${base}/deny` },
        })
      }
    }
    for (const event of events) {
      const subscription = subscriptionOf(event.type)
      if (!subscription) continue
      const occurredAt = new Date(event.occurred_at)
      const data = {
        ...(event.target_type === 'approval' && event.target_id ? approvals.get(event.target_id) ?? {} : {}),
        ...(parsed(event.data) as Record<string, unknown>),
        organization_id: event.organization_id,
        event_id: Number(event.event_id),
        actor: { type: event.actor_type, id: event.actor_id },
        target: { type: event.target_type, id: event.target_id },
      }
      items.push({
        xid: Number(event.xid),
        order: Number(event.event_id),
        organizationId: event.organization_id,
        subscription,
        type: event.type,
        messageId: `evt_${Number(event.event_id)}`,
        eventId: Number(event.event_id),
        decisionId: null,
        occurredAt,
        payload: body(event.type, occurredAt, data),
      })
    }
  }
  const deniedFor = [...new Set(endpoints.filter((endpoint) => endpoint.event_types.includes('decision.denied')).map((endpoint) => endpoint.organization_id))]
  if (deniedFor.length > 0) {
    const decisions = await trx
      .selectFrom('decisions')
      .select(['decision_id', 'organization_id', 'agent_id', 'agent_handle', 'action', 'resource', 'reasons', 'args_sha256', 'requested_by', 'evaluated_at', 'xid'])
      .where('organization_id', 'in', deniedFor)
      .where('xid', '>=', from)
      .where('xid', '<', bound)
      .where('decision', '=', 'deny')
      .execute()
    for (const decision of decisions) {
      const occurredAt = new Date(decision.evaluated_at)
      const [kind, id] = String(decision.requested_by).split(':')
      items.push({
        xid: Number(decision.xid),
        order: occurredAt.getTime(),
        organizationId: decision.organization_id,
        subscription: 'decision.denied',
        type: 'decision.denied',
        messageId: `dec_${decision.decision_id}`,
        eventId: null,
        decisionId: decision.decision_id,
        occurredAt,
        payload: body('decision.denied', occurredAt, {
          decision_id: decision.decision_id,
          agent: { agent_id: decision.agent_id, handle: decision.agent_handle },
          action: decision.action,
          resource: decision.resource,
          decision: 'deny',
          reasons: parsed(decision.reasons),
          args_sha256: decision.args_sha256,
          links: { decision: `${apiUrl}/decisions/${decision.decision_id}` },
          organization_id: decision.organization_id,
          event_id: null,
          actor: { type: kind === 'user' ? 'user' : kind === 'agent-key' ? 'agent' : 'key', id: id ?? null },
          target: { type: 'decision', id: decision.decision_id },
        }),
      })
    }
  }
  // In the order of the writing transactions, then of the events within one.
  return items.sort((a, b) => a.xid - b.xid || a.order - b.order)
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
  return result.rows.map((row) => ({ ...row, failing_since: row.failing_since ? new Date(row.failing_since) : null }))
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
  return rows.map((row) => ({ ...row, next_attempt_at: new Date(row.next_attempt_at!) }))
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
