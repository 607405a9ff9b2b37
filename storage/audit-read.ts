// Reading the audit log: pages for GET /audit (newest first) and the keyset walk that exports
// stream (oldest first). Every query is scoped by the organization. Knows nothing of HTTP.
import { sql, type Kysely, type Selectable } from 'kysely'
import type { AuditEventType } from '../domain/audit.ts'
import type { AuditEventTable, Database } from '../database/schema.ts'

const COLUMNS = ['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'request_id'] as const

/** An event as read back: every column but the writing transaction's id; its data is always an object. */
export type AuditEventRow = Omit<Pick<Selectable<AuditEventTable>, (typeof COLUMNS)[number]>, 'data'> & { data: Record<string, unknown> }

export interface AuditFilter {
  /** Only these types; empty: every type. */
  types: readonly AuditEventType[]
  /** occurred_at ≥ from. */
  from: Date | null
  /** occurred_at < to. */
  to: Date | null
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
  return (await query.orderBy('event_id', 'desc').limit(page.limit).execute()) as AuditEventRow[]
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
    const page = (await filtered(db, organizationId, filter)
      .where('event_id', '>', after)
      .where('xid', '<', options.belowXid)
      .orderBy('event_id', 'asc')
      .limit(pageSize)
      .execute()) as AuditEventRow[]
    if (page.length === 0) return
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
