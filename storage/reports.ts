// The reports' SQL: decisions counted per bucket and dimension (from the hourly rollup plus the raw
// rows it has not counted yet), approvals, agents and leads. Knows nothing of HTTP.
//
// A bucket is a row of `bounds` (its start); rows are placed with width_bucket over that sorted
// array, so buckets may follow any time zone's days, daylight-saving changes included. The rollup
// counts whole UTC hours: it serves the whole hours inside the window when every bound falls on a
// UTC hour (every zone whose offset is whole hours); the partial hours at the edges, the rows the
// rollup has not reached (xid at or above its mark) and zones offset by a fraction of an hour read
// the log itself. All of it in one repeatable-read transaction, so the rollup, its mark and the
// log are seen at one instant and no row counts twice.
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'
import { factsOf, type Dimension } from './report-rollup.ts'

type Db = Kysely<Database> | Transaction<Database>
const HOUR = 3_600_000

export interface FactRow {
  /** Index into the window's bounds. */
  bucket: number
  dimension: Dimension
  key: string
  decision: string
  count: number
}

export interface CountWindow {
  from: Date
  to: Date
  /** Bucket starts, sorted; bounds[0] <= from. */
  bounds: readonly Date[]
}

/** Bucket starts of [from, to) in `tz`: local midnights (day) or local hour starts (hour). */
export async function bucketStarts(db: Db, from: Date, to: Date, tz: string, bucket: 'hour' | 'day'): Promise<Date[]> {
  const query =
    bucket === 'day'
      ? sql<{ s: Date }>`select (d at time zone ${tz}) as s
          from generate_series(date_trunc('day', ${from}::timestamptz at time zone ${tz}), ${to}::timestamptz at time zone ${tz}, interval '1 day') d`
      : sql<{ s: Date }>`select s from generate_series(date_trunc('hour', ${from}::timestamptz at time zone ${tz}) at time zone ${tz}, ${to}::timestamptz, interval '1 hour') s`
  const { rows } = await query.execute(db)
  return rows.map((row) => new Date(row.s)).filter((start) => start.getTime() < to.getTime())
}

/** Runs `work` in one repeatable-read transaction: one snapshot for the rollup, its mark and the log. */
export function inOneSnapshot<T>(db: Kysely<Database>, work: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').execute(work)
}

const arrayOf = (dates: readonly Date[]) => `{${dates.map((date) => date.toISOString()).join(',')}}`

/**
 * Decisions of [from, to) counted per bucket, dimension, key and outcome. `keyPrefix` keeps only
 * keys starting with it (one policy's rows). Call inside inOneSnapshot.
 */
export async function countDecisions(trx: Db, organizationId: string, window: CountWindow, dimensions: readonly Dimension[], keyPrefix: string | null = null): Promise<FactRow[]> {
  const { from, to, bounds } = window
  const aligned = bounds.every((start) => start.getTime() % HOUR === 0)
  const hourStart = new Date(Math.ceil(from.getTime() / HOUR) * HOUR)
  const hourEnd = new Date(Math.floor(to.getTime() / HOUR) * HOUR)
  const useRollup = aligned && hourStart.getTime() < hourEnd.getTime()
  const facts = factsOf(dimensions)
  const keyFilter = keyPrefix === null ? sql`true` : sql`starts_with(x.key, ${keyPrefix})`
  const raw = (range: RawBuilder<unknown>) => sql`select d.evaluated_at as t, x.dimension, x.key, x.decision, 1::bigint as n
    from decisions d cross join lateral (${facts}) x(dimension, key, decision)
    where d.organization_id = ${organizationId} and ${range} and ${keyFilter}`
  let parts: RawBuilder<unknown>[]
  if (!useRollup) {
    parts = [raw(sql`d.evaluated_at >= ${from} and d.evaluated_at < ${to}`)]
  } else {
    const mark = await rollupMark(trx, organizationId)
    const rollupKey = keyPrefix === null ? sql`true` : sql`starts_with(r.key, ${keyPrefix})`
    parts = [
      sql`select r.hour as t, r.dimension, r.key, r.decision, r.count as n from decision_rollup r
        where r.organization_id = ${organizationId} and r.dimension in (${sql.join(dimensions)})
          and r.hour >= ${hourStart} and r.hour < ${hourEnd} and ${rollupKey}`,
      raw(sql`d.xid >= ${mark} and d.evaluated_at >= ${hourStart} and d.evaluated_at < ${hourEnd}`),
    ]
    if (from.getTime() < hourStart.getTime()) parts.push(raw(sql`d.evaluated_at >= ${from} and d.evaluated_at < ${hourStart}`))
    if (hourEnd.getTime() < to.getTime()) parts.push(raw(sql`d.evaluated_at >= ${hourEnd} and d.evaluated_at < ${to}`))
  }
  const { rows } = await sql<{ b: number; dimension: Dimension; key: string; decision: string; n: string }>`
    select width_bucket(t, ${arrayOf(bounds)}::timestamptz[]) - 1 as b, dimension, key, decision, sum(n)::text as n
    from (${sql.join(parts, sql` union all `)}) facts
    group by 1, 2, 3, 4`.execute(trx)
  return rows.map((row) => ({ bucket: Number(row.b), dimension: row.dimension, key: row.key, decision: row.decision, count: Number(row.n) }))
}

/** Every decision with an xid below the mark is counted in decision_rollup (0: none yet). */
export async function rollupMark(db: Db, organizationId: string): Promise<string> {
  const row = await db.selectFrom('decision_rollup_state').select(sql<string>`xid_upto::text`.as('x')).where('organization_id', '=', organizationId).executeTakeFirst()
  return row?.x ?? '0'
}

/** Decisions in [from, to) (each once, whatever the dimension). */
export async function countAllDecisions(trx: Db, organizationId: string, window: CountWindow): Promise<number> {
  const rows = await countDecisions(trx, organizationId, { ...window, bounds: [window.bounds[0]!] }, ['outcome'])
  return rows.reduce((sum, row) => sum + row.count, 0)
}

export interface ApprovalCounts {
  requested: number
  approved: number
  denied: number
  expired: number
  cancelled: number
  consumed: number
  p50: number | null
  p90: number | null
}

/**
 * Approvals requested in [from, to), by what became of them as of `now`. An approval approved and
 * then left unused counts as approved (use_by is set only by an approval); one left to expire
 * undecided counts as expired, whether or not the sweeper has written it.
 */
export async function approvalCounts(db: Db, organizationId: string, from: Date, to: Date, now: Date): Promise<ApprovalCounts> {
  const decided = sql`(use_by is not null or status = 'denied')`
  const { rows } = await sql<Record<string, string | null>>`
    select count(*)::text as requested,
      count(*) filter (where use_by is not null)::text as approved,
      count(*) filter (where status = 'denied')::text as denied,
      count(*) filter (where use_by is null and (status = 'expired' or (status = 'pending' and expires_at <= ${now})))::text as expired,
      count(*) filter (where status = 'cancelled')::text as cancelled,
      count(*) filter (where status = 'consumed')::text as consumed,
      (percentile_cont(0.5) within group (order by extract(epoch from decided_at - created_at)) filter (where ${decided}))::text as p50,
      (percentile_cont(0.9) within group (order by extract(epoch from decided_at - created_at)) filter (where ${decided}))::text as p90
    from approvals where organization_id = ${organizationId} and created_at >= ${from} and created_at < ${to}`.execute(db)
  const row = rows[0]!
  const n = (name: string) => Number(row[name] ?? 0)
  const seconds = (value: string | null | undefined) => (value === null || value === undefined ? null : Math.round(Number(value) * 1000) / 1000)
  return { requested: n('requested'), approved: n('approved'), denied: n('denied'), expired: n('expired'), cancelled: n('cancelled'), consumed: n('consumed'), p50: seconds(row.p50), p90: seconds(row.p90) }
}

export interface WaitingApproval {
  approval_id: string
  action: string
  agent_handle: string
  agent_id: string
  created_at: Date
  expires_at: Date
}

/** Approvals waiting for a decision now, oldest first, and how many there are. */
export async function waitingApprovals(db: Db, organizationId: string, now: Date, limit: number): Promise<{ total: number; rows: WaitingApproval[] }> {
  const base = db.selectFrom('approvals').where('organization_id', '=', organizationId).where('status', '=', 'pending').where('expires_at', '>', now)
  const [count, rows] = await Promise.all([
    base.select(sql<string>`count(*)::text`.as('n')).executeTakeFirstOrThrow(),
    base.select(['approval_id', 'action', 'agent_handle', 'agent_id', 'created_at', 'expires_at']).orderBy('created_at').orderBy('approval_id').limit(limit).execute(),
  ])
  return { total: Number(count.n), rows }
}

export interface ReportPolicy {
  policy_id: string
  name: string
  mode: 'enforce' | 'monitor'
  effect: string
  version: number
  in_force: boolean
}

/** The organization's policies, archived ones included (their hits still count). */
export async function reportPolicies(db: Db, organizationId: string, policyId: string | null = null): Promise<ReportPolicy[]> {
  let query = db
    .selectFrom('policies')
    .select(['policy_id', 'name', 'mode', 'effect', 'version', sql<boolean>`(enabled and archived_at is null)`.as('in_force')])
    .where('organization_id', '=', organizationId)
  if (policyId !== null) query = query.where('policy_id', '=', policyId)
  const rows = await query.orderBy('name').orderBy('policy_id').execute()
  return rows.map((row) => ({ ...row, version: Number(row.version), in_force: Boolean(row.in_force) }) as ReportPolicy)
}

export interface ReportAgent {
  agent_id: string
  handle: string
  status: string
  created_at: Date
  last_seen_at: Date | null
}

/** The organization's agents with these handles. */
export async function agentsByHandle(db: Db, organizationId: string, handles: readonly string[]): Promise<ReportAgent[]> {
  if (handles.length === 0) return []
  return db
    .selectFrom('agents')
    .select(['agent_id', 'handle', 'status', 'created_at', 'last_seen_at'])
    .where('organization_id', '=', organizationId)
    .where('handle', 'in', handles)
    .execute()
}

/** Discovered agents that are not among `seen`, most recently seen first. */
export async function discoveredAgentsNotIn(db: Db, organizationId: string, seen: readonly string[], limit: number): Promise<ReportAgent[]> {
  let query = db
    .selectFrom('agents')
    .select(['agent_id', 'handle', 'status', 'created_at', 'last_seen_at'])
    .where('organization_id', '=', organizationId)
    .where('status', '=', 'discovered')
  // One array parameter, however many agents were active (handles hold no quote or backslash).
  if (seen.length > 0) query = query.where(sql<boolean>`not (handle = any(${`{${seen.map((handle) => `"${handle}"`).join(',')}}`}::text[]))`)
  return query.orderBy(sql`last_seen_at desc nulls last`).orderBy('handle').limit(limit).execute()
}
