// Budget counters (docs/budgets.md): one row per limit and scope, locked by the decision's own
// transaction (storage/decisions.ts) so that concurrent decisions, in one process or in several,
// count one after another and no two can both take the last unit. A batch locks each counter it
// touches once, in key order (no deadlock between batches), decides in memory which of its
// decisions fit, and writes the counters back before it commits. Reservations of pending
// approvals are kept per approval and released exactly once. Knows nothing of HTTP.
import { CompiledQuery, sql, type Kysely, type Transaction } from 'kysely'
import { addTo, currentOf, releaseFrom, resetsAt, slotOf, type CounterState, type LimitInput, type LimitWindow } from '../engine/index.ts'
import { BY_SYSTEM, eventBy, recordEvents, type AuditEventInput } from './audit.ts'
import { preparedText } from '../database/prepared.ts'
import type { Database } from '../database/schema.ts'

type Db = Kysely<Database> | Transaction<Database>

/** What one decision takes of one counter. */
export interface Reservation {
  readonly organization_id: string
  readonly counter_key: string
  readonly policy_id: string
  readonly policy_version: number
  readonly policy_name: string
  readonly limit: LimitInput
  readonly agent_id: string | null
  readonly resource: string | null
  readonly amount: number
  /** False for a monitor-mode limit: counted, never refused. */
  readonly enforce: boolean
}

/** A limit a decision would take past its max: what was used before it, and when the window resets. */
export interface LimitHit {
  readonly reservation: Reservation
  readonly used: number
  readonly resets_at: number | null
}

/** The limits one decision of a batch takes from. */
export interface LimitRequest {
  readonly reservations: readonly Reservation[]
  readonly now: number
}

/** What the batch decided for one decision: refused by an enforce-mode limit, or allowed (with monitor-mode overruns). */
export interface LimitVerdict {
  readonly refused: LimitHit | null
  readonly monitor: readonly LimitHit[]
}

interface Locked {
  readonly organization_id: string
  readonly counter_key: string
  readonly window: LimitWindow
  readonly stored: CounterState
  readonly reached_at: number | null
}

/** The batch's counters as locked, and what it decided; commit writes what the logged decisions took. */
export interface LimitPlan {
  readonly verdicts: readonly (LimitVerdict | null)[]
  commit(trx: Transaction<Database>, logged: ReadonlySet<number>, approvals: ReadonlyMap<number, string>, now: Date): Promise<void>
}

const idOf = (organizationId: string, key: string) => `${organizationId}|${key}`
const parse = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value)
const ms = (value: unknown): number => (value instanceof Date ? value.getTime() : new Date(value as string).getTime())

/**
 * Locks every counter the batch touches (creating the missing ones), in key order: one
 * statement. The upsert's do-update takes the row lock even when nothing changes, so the lock
 * holds until the batch's transaction ends.
 */
async function lockCounters(trx: Transaction<Database>, reservations: readonly Reservation[], now: Date): Promise<Map<string, Locked>> {
  const unique = new Map<string, Reservation>()
  for (const r of reservations) unique.set(idOf(r.organization_id, r.counter_key), r)
  const sorted = [...unique.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r)
  // Counters that exist (the usual case): locked by a plain select … for update, which writes no
  // new row version; the missing ones are created by the upsert below, which locks them too.
  const out = new Map<string, Locked>()
  for (const [organizationId, keys] of byOrganization(sorted)) {
    const existing = await trx.executeQuery<Record<string, unknown>>(CompiledQuery.raw(SELECT_TEXT, [organizationId, keys]))
    for (const row of existing.rows) keep(out, unique, row)
  }
  const missing = sorted.filter((r) => !out.has(idOf(r.organization_id, r.counter_key)))
  if (missing.length === 0) return out
  for (const row of (await upsertCounters(trx, missing, now)).rows) keep(out, unique, row)
  return out
}

/** Counter keys by organization (a batch is nearly always one organization's). */
function byOrganization(items: readonly { organization_id: string; counter_key: string }[]): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const item of items) {
    const keys = out.get(item.organization_id)
    if (keys) keys.push(item.counter_key)
    else out.set(item.organization_id, [item.counter_key])
  }
  return out
}

// One text whatever the number of counters (arrays, not a list of values): planned once.
const SELECT_TEXT = preparedText(
  'select organization_id, counter_key, window_start, used, buckets, reached_at from budget_counters ' +
    'where organization_id = $1::uuid and counter_key = any($2::text[]) order by counter_key for update',
)

function keep(out: Map<string, Locked>, unique: ReadonlyMap<string, Reservation>, row: Record<string, unknown>): void {
  const id = idOf(row.organization_id as string, row.counter_key as string)
  out.set(id, {
    organization_id: row.organization_id as string,
    counter_key: row.counter_key as string,
    window: unique.get(id)!.limit.window,
    stored: { window_start: ms(row.window_start), used: Number(row.used), buckets: (parse(row.buckets) as Record<string, number> | null) ?? null },
    reached_at: row.reached_at === null || row.reached_at === undefined ? null : ms(row.reached_at),
  })
}

async function upsertCounters(trx: Transaction<Database>, sorted: readonly Reservation[], now: Date) {
  const values: unknown[] = []
  const tuples = sorted.map((r, row) => {
    values.push(r.organization_id, r.counter_key, r.policy_id, r.limit.name, r.agent_id, r.resource, JSON.stringify(r.limit.window), now.toISOString())
    const at = (column: number) => `$${row * 8 + column + 1}`
    return `(${at(0)}::uuid, ${at(1)}::text, ${at(2)}::uuid, ${at(3)}::text, ${at(4)}::uuid, ${at(5)}::text, ${at(6)}::jsonb, 'epoch'::timestamptz, 0, null, null, ${at(7)}::timestamptz)`
  })
  const text =
    'insert into budget_counters (organization_id, counter_key, policy_id, limit_name, agent_id, resource, limit_window, window_start, used, buckets, reached_at, updated_at) ' +
    `values ${tuples.join(', ')} on conflict (organization_id, counter_key) do update set updated_at = budget_counters.updated_at ` +
    'returning organization_id, counter_key, window_start, used, buckets, reached_at'
  return trx.executeQuery<Record<string, unknown>>(CompiledQuery.raw(text, values))
}

/**
 * Decides, under the counters' locks, which of the batch's decisions fit: in batch order, a
 * decision fits when every enforce-mode limit it takes has room for its amount; one that does
 * not takes nothing (refused). `requests[i]` null: decision i takes no limit.
 */
export async function planLimits(trx: Transaction<Database>, requests: readonly (LimitRequest | null)[], now: Date): Promise<LimitPlan> {
  const all = requests.flatMap((request) => request?.reservations ?? [])
  const locked = all.length > 0 ? await lockCounters(trx, all, now) : new Map<string, Locked>()
  const states = new Map<string, CounterState>()
  for (const [id, counter] of locked) states.set(id, counter.stored)
  const refusedBy = new Map<string, Reservation>()
  const verdicts = requests.map((request): LimitVerdict | null => {
    if (request === null || request.reservations.length === 0) return null
    const monitor: LimitHit[] = []
    const next = new Map<string, CounterState>()
    for (const r of request.reservations) {
      const id = idOf(r.organization_id, r.counter_key)
      const window = r.limit.window
      const current = next.get(id) ?? currentOf(window, states.get(id) ?? null, request.now)
      if (current.used + r.amount > r.limit.max) {
        const hit = { reservation: r, used: current.used, resets_at: resetsAt(window, current, request.now) }
        if (r.enforce) {
          refusedBy.set(id, r)
          return { refused: hit, monitor: [] }
        }
        monitor.push(hit)
      }
      next.set(id, addTo(window, current, r.amount, request.now))
    }
    for (const [id, state] of next) states.set(id, state)
    return { refused: null, monitor }
  })
  return {
    verdicts,
    async commit(trx, logged, approvals, at) {
      if (locked.size === 0) return
      // From the states as locked: only the decisions that were logged take anything.
      const final = new Map<string, CounterState>()
      const last = new Map<string, Reservation>()
      const held: { approval_id: string; organization_id: string; counter_key: string; slot: number; amount: number }[] = []
      requests.forEach((request, index) => {
        if (request === null || verdicts[index]?.refused || !logged.has(index)) return
        for (const r of request.reservations) {
          const id = idOf(r.organization_id, r.counter_key)
          const current = currentOf(r.limit.window, final.get(id) ?? locked.get(id)!.stored, request.now)
          final.set(id, addTo(r.limit.window, current, r.amount, request.now))
          last.set(id, r)
          const approvalId = approvals.get(index)
          if (approvalId !== undefined) held.push({ approval_id: approvalId, organization_id: r.organization_id, counter_key: r.counter_key, slot: slotOf(r.limit.window, current, request.now), amount: r.amount })
        }
      })
      const events: AuditEventInput[] = []
      const writes: { counter: Locked; state: CounterState; reached_at: number | null }[] = []
      for (const [id, counter] of locked) {
        const state = final.get(id) ?? currentOf(counter.window, counter.stored, at.getTime())
        const r = last.get(id) ?? refusedBy.get(id)
        let reached = counter.reached_at
        if (r) {
          const full = state.used >= r.limit.max || refusedBy.has(id)
          const rolling = counter.window.type === 'rolling'
          const marked = reached !== null && (rolling || reached >= state.window_start)
          if (full && !marked) {
            reached = at.getTime()
            events.push(reachedEvent(r, state, counter.window, at))
          } else if (!full && rolling) reached = null
        }
        if (final.has(id) || reached !== counter.reached_at) writes.push({ counter, state, reached_at: reached })
      }
      await writeCounters(trx, writes, at)
      if (held.length > 0) await trx.insertInto('budget_reservations').values(held.map((h) => ({ ...h, slot: new Date(h.slot) }))).execute()
      await recordEvents(trx, events)
    },
  }
}

function reachedEvent(r: Reservation, state: CounterState, window: LimitWindow, at: Date): AuditEventInput {
  return eventBy(
    BY_SYSTEM,
    r.organization_id,
    'limit.reached',
    { type: 'policy', id: r.policy_id },
    {
      policy_id: r.policy_id,
      policy_name: r.policy_name,
      limit: r.limit.name,
      kind: r.limit.kind,
      scope: r.limit.scope,
      agent_id: r.agent_id,
      resource: r.resource,
      window: window,
      window_start: window.type === 'rolling' || window.type === 'all_time' ? null : new Date(state.window_start).toISOString(),
      max: r.limit.max,
      used: state.used,
      currency: r.limit.currency ?? null,
    },
    at,
  )
}

const UPDATE_TEXT = preparedText(
  'update budget_counters c set window_start = v.ws::timestamptz, used = v.used::bigint, buckets = v.b::jsonb, reached_at = v.r::timestamptz, limit_window = v.w::jsonb, updated_at = $8::timestamptz ' +
    'from unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) as v(k, ws, used, b, r, w) where c.organization_id = $1::uuid and c.counter_key = v.k',
)

async function writeCounters(trx: Transaction<Database>, writes: readonly { counter: Locked; state: CounterState; reached_at: number | null }[], at: Date): Promise<void> {
  const groups = new Map<string, (typeof writes)[number][]>()
  for (const write of writes) {
    const group = groups.get(write.counter.organization_id)
    if (group) group.push(write)
    else groups.set(write.counter.organization_id, [write])
  }
  for (const [organizationId, group] of groups) {
    const column = (pick: (write: (typeof writes)[number]) => string | null) => group.map(pick)
    await trx.executeQuery(
      CompiledQuery.raw(UPDATE_TEXT, [
        organizationId,
        column((w) => w.counter.counter_key),
        column((w) => new Date(w.state.window_start).toISOString()),
        column((w) => String(w.state.used)),
        column((w) => (w.state.buckets === null ? null : JSON.stringify(w.state.buckets))),
        column((w) => (w.reached_at === null ? null : new Date(w.reached_at).toISOString())),
        column((w) => JSON.stringify(w.counter.window)),
        at.toISOString(),
      ]),
    )
  }
}

/**
 * Gives back what pending approvals held (denied, expired, cancelled): each reservation row is
 * deleted once (so a release never counts twice), and its amount leaves its window, or its
 * rolling bucket, if the counter still counts that one.
 */
export async function releaseReservations(trx: Db, approvalIds: readonly string[], at: Date): Promise<void> {
  if (approvalIds.length === 0) return
  const gone = await trx.deleteFrom('budget_reservations').where('approval_id', 'in', [...approvalIds]).returning(['organization_id', 'counter_key', 'slot', 'amount']).execute()
  if (gone.length === 0) return
  gone.sort((a, b) => (idOf(a.organization_id, a.counter_key) < idOf(b.organization_id, b.counter_key) ? -1 : 1))
  for (const row of gone) {
    const counter = await trx
      .selectFrom('budget_counters')
      .select(['window_start', 'used', 'buckets', 'limit_window', 'reached_at'])
      .where('organization_id', '=', row.organization_id)
      .where('counter_key', '=', row.counter_key)
      .forUpdate()
      .executeTakeFirst()
    if (!counter) continue
    const window = parse(counter.limit_window) as LimitWindow
    const state: CounterState = { window_start: ms(counter.window_start), used: Number(counter.used), buckets: (parse(counter.buckets) as Record<string, number> | null) ?? null }
    const released = releaseFrom(window, state, ms(row.slot), Number(row.amount))
    if (released === null) continue
    await trx
      .updateTable('budget_counters')
      .set({ used: released.used, buckets: released.buckets === null ? null : JSON.stringify(released.buckets), updated_at: at })
      .where('organization_id', '=', row.organization_id)
      .where('counter_key', '=', row.counter_key)
      .execute()
  }
}

/** An approval used by its allow: its reservation becomes that use (nothing is counted again). */
export async function settleReservations(trx: Db, approvalId: string): Promise<void> {
  await trx.deleteFrom('budget_reservations').where('approval_id', '=', approvalId).execute()
}

/** The stored counters of `keys` (no lock: for usage and simulations). */
export async function readCounters(db: Db, organizationId: string, keys: readonly string[]): Promise<Map<string, CounterState>> {
  const out = new Map<string, CounterState>()
  if (keys.length === 0) return out
  const rows = await db.selectFrom('budget_counters').select(['counter_key', 'window_start', 'used', 'buckets']).where('organization_id', '=', organizationId).where('counter_key', 'in', [...new Set(keys)]).execute()
  for (const row of rows) out.set(row.counter_key, { window_start: ms(row.window_start), used: Number(row.used), buckets: (parse(row.buckets) as Record<string, number> | null) ?? null })
  return out
}

/** Every counter of one limit of one agent (agent_resource limits have one per resource), for usage. */
export async function countersOfLimit(db: Db, organizationId: string, policyId: string, limitName: string, agentId: string | null): Promise<{ counter_key: string; resource: string | null; state: CounterState }[]> {
  let query = db
    .selectFrom('budget_counters')
    .select(['counter_key', 'resource', 'window_start', 'used', 'buckets'])
    .where('organization_id', '=', organizationId)
    .where('policy_id', '=', policyId)
    .where('limit_name', '=', limitName)
  if (agentId !== null) query = query.where('agent_id', '=', agentId)
  const rows = await query.orderBy('updated_at', 'desc').limit(100).execute()
  return rows.map((row) => ({ counter_key: row.counter_key, resource: row.resource, state: { window_start: ms(row.window_start), used: Number(row.used), buckets: (parse(row.buckets) as Record<string, number> | null) ?? null } }))
}

/** Reservations still held by pending approvals (for tests and usage). */
export async function heldReservations(db: Db, organizationId: string): Promise<number> {
  const row = await sql<{ n: string }>`select count(*) as n from budget_reservations where organization_id = ${organizationId}`.execute(db)
  return Number(row.rows[0]?.n ?? 0)
}
