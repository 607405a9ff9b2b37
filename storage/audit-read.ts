// Reading the audit log: pages for GET /audit (newest first) and the keyset walk that exports
// stream (oldest first). Every query is scoped by the organization. Knows nothing of HTTP.
import { sql, type Kysely } from 'kysely'
import type { ActorType, AuditEventType } from '../domain/audit.ts'
import type { Database } from '../database/schema.ts'

export interface AuditEventRow {
  event_id: number
  organization_id: string
  occurred_at: Date
  actor_type: ActorType
  actor_id: string | null
  type: string
  target_type: string
  target_id: string | null
  data: Record<string, unknown>
  request_id: string | null
}

export interface AuditFilter {
  /** Only these types; empty: every type. */
  types: readonly AuditEventType[]
  /** occurred_at ≥ from. */
  from: Date | null
  /** occurred_at < to. */
  to: Date | null
}

const COLUMNS = ['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'request_id'] as const

function toRow(row: Record<string, unknown>): AuditEventRow {
  return {
    event_id: Number(row.event_id),
    organization_id: row.organization_id as string,
    occurred_at: new Date(row.occurred_at as Date),
    actor_type: row.actor_type as ActorType,
    actor_id: (row.actor_id as string | null) ?? null,
    type: row.type as string,
    target_type: row.target_type as string,
    target_id: (row.target_id as string | null) ?? null,
    data: (typeof row.data === 'string' ? JSON.parse(row.data) : row.data) as Record<string, unknown>,
    request_id: (row.request_id as string | null) ?? null,
  }
}

function filtered(db: Kysely<Database>, organizationId: string, filter: AuditFilter) {
  let query = db.selectFrom('audit_events').select(COLUMNS).where('organization_id', '=', organizationId)
  if (filter.types.length > 0) query = query.where('type', 'in', [...filter.types])
  if (filter.from !== null) query = query.where('occurred_at', '>=', filter.from)
  if (filter.to !== null) query = query.where('occurred_at', '<', filter.to)
  return query
}

/** Newest first: events with event_id below `before` (all when null). */
export async function listAuditEvents(db: Kysely<Database>, organizationId: string, filter: AuditFilter, page: { before: number | null; limit: number }): Promise<AuditEventRow[]> {
  let query = filtered(db, organizationId, filter)
  if (page.before !== null) query = query.where('event_id', '<', page.before)
  const rows = await query.orderBy('event_id', 'desc').limit(page.limit).execute()
  return rows.map((row) => toRow(row as Record<string, unknown>))
}

/**
 * Oldest first, a keyset page at a time (event_id > the last one read): constant memory on both
 * drivers, and each page is its own short statement, so an export never holds a snapshot open.
 * Only events written by transactions below `belowXid` are read: every such transaction had ended
 * when the export began (see settledBelowXid), so the walk is finite and, for event ids up to the
 * last one it returns, complete (an event still being written cannot appear behind it later).
 */
export async function* streamAuditEvents(
  db: Kysely<Database>,
  organizationId: string,
  filter: AuditFilter,
  options: { belowXid: number; pageSize?: number },
): AsyncGenerator<AuditEventRow[]> {
  const pageSize = options.pageSize ?? 1000
  let after = 0
  for (;;) {
    const rows = await filtered(db, organizationId, filter)
      .where('event_id', '>', after)
      .where('xid', '<', options.belowXid)
      .orderBy('event_id', 'asc')
      .limit(pageSize)
      .execute()
    if (rows.length === 0) return
    const page = rows.map((row) => toRow(row as Record<string, unknown>))
    yield page
    if (page.length < pageSize) return
    after = page[page.length - 1]!.event_id
  }
}

/**
 * A transaction id below which every transaction has ended, so the events they wrote are final:
 * the snapshot's xmax once the transactions running at that moment (its xip list) have ended,
 * waited for up to `waitMs` (polled every 50 ms). Past the wait, the lowest of those still
 * running: everything below it has ended, and the export leaves the rest to the next one.
 */
export async function settledBelowXid(db: Kysely<Database>, waitMs = 5000): Promise<number> {
  const { rows } = await sql<{ xmax: string; xip: string[] | string }>`
    select pg_snapshot_xmax(s)::text as xmax, array(select x::text from pg_snapshot_xip(s) as x) as xip
    from (select pg_current_snapshot() as s) as q
  `.execute(db)
  const xmax = Number(rows[0]!.xmax)
  let running = textArray(rows[0]!.xip)
  const deadline = Date.now() + waitMs
  while (running.length > 0) {
    const still = await sql<{ x: string }>`select x from unnest(${running}::text[]) as x where pg_xact_status(x::xid8) = 'in progress'`.execute(db)
    running = still.rows.map((row) => row.x)
    if (running.length === 0 || Date.now() >= deadline) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return running.length === 0 ? xmax : Math.min(...running.map(Number))
}

/** A text[] as either driver returns it (an array, or PostgreSQL's {a,b} text). */
function textArray(value: string[] | string): string[] {
  if (Array.isArray(value)) return value.map(String)
  const inner = value.replace(/^\{|\}$/g, '')
  return inner === '' ? [] : inner.split(',')
}

/** The organization's newest event id (0 when it has none). */
export async function lastAuditEventId(db: Kysely<Database>, organizationId: string): Promise<number> {
  const row = await db
    .selectFrom('audit_events')
    .select((eb) => eb.fn.max('event_id').as('last'))
    .where('organization_id', '=', organizationId)
    .executeTakeFirst()
  return Number(row?.last ?? 0)
}
