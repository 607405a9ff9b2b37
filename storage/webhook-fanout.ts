// The fan-out of the outbox (audit events and denied decisions) into the webhook delivery log.
// The rows are read here; their public body is built by the caller's `payloadOf`
// (services/webhook-payloads.ts), so storage knows nothing of the published shape or the API's URL.
import { sql, type Kysely, type Transaction } from 'kysely'
import { coveredTypes } from '../domain/webhooks.ts'
import type { Database } from '../database/schema.ts'

/** The approval an approval.* event is about, as the outbox reads it. */
export interface OutboxApproval {
  approval_id: string
  decision_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  args: unknown
  context: unknown
  expires_at: Date | null
  approvers_required: number
  approver_roles: unknown
}

/** An audit event a subscription covers. */
export interface OutboxEvent {
  kind: 'event'
  event_id: number
  organization_id: string
  occurred_at: Date
  actor_type: string
  actor_id: string | null
  type: string
  target_type: string
  target_id: string | null
  data: Record<string, unknown>
  /** For an event whose target is an approval: that approval, if it still exists. */
  approval: OutboxApproval | null
}

/** A denied decision (decision.denied). */
export interface OutboxDecision {
  kind: 'decision'
  decision_id: string
  organization_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  reasons: unknown
  args_sha256: string
  requested_by: string
  evaluated_at: Date
}

export type OutboxRow = OutboxEvent | OutboxDecision

/** The delivery body (JSON text) of an outbox row. */
export type PayloadOf = (row: OutboxRow) => string

/** Any constant: the fan-out's advisory lock. */
const FANOUT_LOCK = 0x57e6a7d0

interface OutboxItem {
  readonly xid: number
  readonly order: number
  readonly organizationId: string
  readonly type: string
  readonly messageId: string
  readonly eventId: number | null
  readonly decisionId: string | null
  readonly occurredAt: Date
  readonly payload: string
}

interface Endpoint {
  webhook_id: string
  organization_id: string
  event_types: string[]
  created_xid: number
  /** The types its subscriptions cover (a family or `*` expanded). */
  covers: ReadonlySet<string>
}

function parsed(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : value
}

/**
 * One fan-out pass, if no other process is running one: every event and denied decision of a
 * transaction with xid in [cursor, bound), bound being the oldest transaction still running, becomes
 * a delivery for each active endpoint of its organization that subscribes to it and was created in
 * an earlier transaction. Returns how many deliveries were queued (null: another pass held the lock).
 */
export async function fanOut(db: Kysely<Database>, now: Date, payloadOf: PayloadOf): Promise<number | null> {
  if (await movedWithoutEndpoints(db)) return 0
  return db.transaction().execute(async (trx) => {
    const locked = await sql<{ ok: boolean }>`select pg_try_advisory_xact_lock(${FANOUT_LOCK}) as ok`.execute(trx)
    if (!locked.rows[0]?.ok) return null
    const bound = Number((await sql<{ xid: string | number }>`select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as xid`.execute(trx)).rows[0]!.xid)
    const from = Number((await trx.selectFrom('webhook_fanout').select('xid_through').executeTakeFirstOrThrow()).xid_through)
    if (bound <= from) return 0
    const endpoints: Endpoint[] = (await trx.selectFrom('webhooks').select(['webhook_id', 'organization_id', 'event_types', 'created_xid']).where('status', '=', 'active').execute()).map((row) => {
      const eventTypes = parsed(row.event_types) as string[]
      return { ...row, event_types: eventTypes, created_xid: Number(row.created_xid), covers: new Set(coveredTypes(eventTypes)) }
    })
    let queued = 0
    if (endpoints.length > 0) {
      const items = await readOutbox(trx, from, bound, endpoints, payloadOf)
      for (let i = 0; i < items.length; i += FANOUT_CHUNK) queued += await insertDeliveries(trx, items.slice(i, i + FANOUT_CHUNK), endpoints, now)
    }
    await trx.updateTable('webhook_fanout').set({ xid_through: bound }).execute()
    return queued
  })
}

/**
 * With no active endpoint anywhere (a server without webhooks), a pass has nothing to deliver and
 * only moves the cursor: one statement, no transaction, no lock. On PGlite, where the database runs
 * on the server's thread, the locked transaction of five statements held every request each time.
 * Safe without the lock: the check and the move share one snapshot, so an endpoint this snapshot
 * does not see was created by a transaction at or above its xmin, the new cursor, and it only ever
 * receives items above its own transaction. Returns false when endpoints exist.
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
async function insertDeliveries(trx: Transaction<Database>, items: readonly OutboxItem[], endpoints: readonly Endpoint[], now: Date): Promise<number> {
  const pairItem: number[] = []
  const pairWebhook: string[] = []
  items.forEach((item, index) => {
    for (const endpoint of endpoints) {
      if (endpoint.organization_id !== item.organizationId || item.xid <= endpoint.created_xid || !endpoint.covers.has(item.type)) continue
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

async function readOutbox(trx: Transaction<Database>, from: number, bound: number, endpoints: readonly Endpoint[], payloadOf: PayloadOf): Promise<OutboxItem[]> {
  const organizations = [...new Set(endpoints.map((endpoint) => endpoint.organization_id))]
  const types = [...new Set(endpoints.flatMap((endpoint) => [...endpoint.covers]))].filter((type) => type !== 'decision.denied')
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
    const approvals = await approvalsOf(trx, events)
    for (const event of events) {
      const row: OutboxEvent = {
        kind: 'event',
        event_id: Number(event.event_id),
        organization_id: event.organization_id,
        occurred_at: event.occurred_at,
        actor_type: event.actor_type,
        actor_id: event.actor_id,
        type: event.type,
        target_type: event.target_type,
        target_id: event.target_id,
        data: parsed(event.data) as Record<string, unknown>,
        approval: event.target_type === 'approval' && event.target_id ? (approvals.get(event.target_id) ?? null) : null,
      }
      items.push({
        xid: Number(event.xid),
        order: row.event_id,
        organizationId: row.organization_id,
        type: row.type,
        messageId: `evt_${row.event_id}`,
        eventId: row.event_id,
        decisionId: null,
        occurredAt: row.occurred_at,
        payload: payloadOf(row),
      })
    }
  }
  const deniedFor = [...new Set(endpoints.filter((endpoint) => endpoint.covers.has('decision.denied')).map((endpoint) => endpoint.organization_id))]
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
      const row: OutboxDecision = {
        kind: 'decision',
        decision_id: decision.decision_id,
        organization_id: decision.organization_id,
        agent_id: decision.agent_id,
        agent_handle: decision.agent_handle,
        action: decision.action,
        resource: decision.resource,
        reasons: parsed(decision.reasons),
        args_sha256: decision.args_sha256,
        requested_by: String(decision.requested_by),
        evaluated_at: decision.evaluated_at,
      }
      items.push({
        xid: Number(decision.xid),
        order: row.evaluated_at.getTime(),
        organizationId: row.organization_id,
        type: 'decision.denied',
        messageId: `dec_${row.decision_id}`,
        eventId: null,
        decisionId: row.decision_id,
        occurredAt: row.evaluated_at,
        payload: payloadOf(row),
      })
    }
  }
  // In the order of the writing transactions, then of the events within one.
  return items.sort((a, b) => a.xid - b.xid || a.order - b.order)
}

/** The approvals that approval.* events are about, by id (ids that are not UUIDs are skipped). */
async function approvalsOf(trx: Transaction<Database>, events: readonly { target_type: string; target_id: string | null }[]): Promise<Map<string, OutboxApproval>> {
  const approvalIds = events.filter((event) => event.target_type === 'approval' && event.target_id && /^[0-9a-f-]{36}$/i.test(event.target_id)).map((event) => event.target_id!)
  const approvals = new Map<string, OutboxApproval>()
  if (approvalIds.length === 0) return approvals
  const rows = await trx
    .selectFrom('approvals')
    .select(['approval_id', 'decision_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'expires_at', 'approvers_required', 'approver_roles'])
    .where('approval_id', 'in', [...new Set(approvalIds)])
    .execute()
  for (const row of rows) {
    approvals.set(row.approval_id, {
      approval_id: row.approval_id,
      decision_id: row.decision_id,
      agent_id: row.agent_id,
      agent_handle: row.agent_handle,
      action: row.action,
      resource: row.resource,
      args: parsed(row.args),
      context: parsed(row.context),
      expires_at: row.expires_at ?? null,
      approvers_required: row.approvers_required,
      approver_roles: parsed(row.approver_roles),
    })
  }
  return approvals
}
