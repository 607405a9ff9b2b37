// The leads report's SQL: leads received per bucket, source and list, and the submissions refused
// as duplicates (counted per UTC hour and list on the 409 path). Knows nothing of HTTP.
import { sql, type Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'

export type LeadListName = 'demo-requests' | 'newsletter'
const MAX_SOURCES = 50

/** Counts one submission refused as a duplicate: one upsert of this hour's counter of the list. */
export async function countDuplicateLead(db: Kysely<Database>, list: LeadListName, now: Date): Promise<void> {
  await sql`insert into lead_duplicate_counts (list, hour, count) values (${list}, date_trunc('hour', ${now}::timestamptz at time zone 'UTC') at time zone 'UTC', 1)
    on conflict (list, hour) do update set count = lead_duplicate_counts.count + 1`.execute(db)
}

export interface LeadCounts {
  perBucket: Map<number, number>
  perSource: { source: string | null; count: number }[]
  perList: Map<LeadListName, number>
  duplicates: number
}

/** Leads received in [from, to), placed in the buckets starting at `bounds`. */
export async function countLeads(db: Kysely<Database>, from: Date, to: Date, bounds: readonly Date[]): Promise<LeadCounts> {
  const received = sql`select received_at, source, 'demo-requests'::text as list from demo_requests where received_at >= ${from} and received_at < ${to}
    union all select received_at, source, 'newsletter'::text from newsletter_subscriptions where received_at >= ${from} and received_at < ${to}`
  const array = `{${bounds.map((start) => start.toISOString()).join(',')}}`
  const [buckets, sources, lists, duplicates] = await Promise.all([
    sql<{ b: number; n: string }>`select width_bucket(received_at, ${array}::timestamptz[]) - 1 as b, count(*)::text as n from (${received}) r group by 1`.execute(db),
    sql<{ source: string | null; n: string }>`select source, count(*)::text as n from (${received}) r group by 1 order by count(*) desc, source nulls last limit ${MAX_SOURCES}`.execute(db),
    sql<{ list: LeadListName; n: string }>`select list, count(*)::text as n from (${received}) r group by 1`.execute(db),
    // Counted per hour: every hour that overlaps the window counts wholly.
    sql<{ n: string | null }>`select sum(count)::text as n from lead_duplicate_counts
      where hour >= date_trunc('hour', ${from}::timestamptz at time zone 'UTC') at time zone 'UTC' and hour < ${to}`.execute(db),
  ])
  return {
    perBucket: new Map(buckets.rows.map((row) => [Number(row.b), Number(row.n)])),
    perSource: sources.rows.map((row) => ({ source: row.source, count: Number(row.n) })),
    perList: new Map(lists.rows.map((row) => [row.list, Number(row.n)])),
    duplicates: Number(duplicates.rows[0]?.n ?? 0),
  }
}
