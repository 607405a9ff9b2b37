// The figures a metrics scrape reads from the database (services/metrics.ts): each one statement
// over an index, so a scrape every few seconds costs the database next to nothing.
import { sql, type Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'

export interface ScrapeFigures {
  /** Approvals pending and not yet past their expiry, every organization together. */
  readonly pendingApprovals: number
  /** Seconds since the oldest webhook delivery still pending was logged (0: none pending). */
  readonly oldestUndeliveredSeconds: number
  /** Seconds since the oldest audit event or decision not yet under a seal was written (0: all sealed). */
  readonly sealLagSeconds: number
}

/** The scrape's figures as of `now`, in one round trip. */
export async function scrapeFigures(db: Kysely<Database>, now: Date): Promise<ScrapeFigures> {
  // Per organization, the first row above its last seal (by xid, the seal's own order: the
  // audit_events_xid and decisions_xid indexes), and the oldest of those.
  const { rows } = await sql<{ pending: string | number; undelivered: Date | string | null; unsealed: Date | string | null }>`
    select
      (select count(*) from approvals where status = 'pending' and expires_at > ${now}) as pending,
      (select min(occurred_at) from webhook_deliveries where status = 'pending') as undelivered,
      (select min(least(e.at, d.at)) from organizations o
        cross join lateral (select coalesce((select xid_to from audit_seals s where s.organization_id = o.id order by seal_id desc limit 1), 0) as xid_to) l
        cross join lateral (select (select occurred_at from audit_events where organization_id = o.id and xid >= l.xid_to order by xid limit 1) as at) e
        cross join lateral (select (select evaluated_at from decisions where organization_id = o.id and xid >= l.xid_to order by xid limit 1) as at) d
      ) as unsealed`.execute(db)
  const row = rows[0]!
  const age = (at: Date | string | null) => (at === null ? 0 : Math.max(0, (now.getTime() - new Date(at).getTime()) / 1000))
  return { pendingApprovals: Number(row.pending), oldestUndeliveredSeconds: age(row.undelivered), sealLagSeconds: age(row.unsealed) }
}
