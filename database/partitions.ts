// Monthly partitions of the decision log, made ahead of time, and retention. Partitions are
// named decisions_yYYYYmMM and cover one UTC month. Creating one is idempotent and safe against
// other processes doing the same (an advisory lock serializes them; `if not exists` makes a
// repeat a no-op). Rows that landed in the default partition for a month that had none are moved
// into the new partition in the same transaction. Retention drops whole partitions older than the
// longest retention of any organization, and deletes older rows of organizations that keep less.
import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.ts'

const LOCK_KEY = 7_351_002_202 // any constant shared by every process of this application
const NAME = /^decisions_y(\d{4})m(\d{2})$/
const DEFAULT_RETENTION_DAYS = 400

export function monthStart(year: number, monthIndex: number): Date {
  return new Date(Date.UTC(year, monthIndex, 1))
}

export function partitionName(start: Date): string {
  return `decisions_y${start.getUTCFullYear()}m${String(start.getUTCMonth() + 1).padStart(2, '0')}`
}

/** Creates the partitions of this month and the next (idempotent). Returns the names created. */
export async function ensureDecisionPartitions(db: Kysely<Database>, now: Date, monthsAhead = 1): Promise<string[]> {
  const months: Date[] = []
  for (let offset = 0; offset <= monthsAhead; offset++) months.push(monthStart(now.getUTCFullYear(), now.getUTCMonth() + offset))
  // Almost always every one exists already (every restart in the month): one read, no lock. It
  // looks the names up the way the planner does (to_regclass, cached catalog lookups) instead of
  // joining pg_inherits, which a new embedded-database process would first read from disk: this
  // runs on every start, before the first request (about 20 ms less there). Only this module makes
  // tables with these names, so a partition of that name is one of the decision log's.
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_class
    where oid in (${sql.join(months.map((month) => sql`to_regclass(${partitionName(month)})`))}) and relispartition`.execute(db)
  if (Number(rows[0]?.n ?? 0) === months.length) return []
  const made: string[] = []
  for (const start of months) {
    const end = monthStart(start.getUTCFullYear(), start.getUTCMonth() + 1)
    if (await createPartition(db, start, end)) made.push(partitionName(start))
  }
  return made
}

async function createPartition(db: Kysely<Database>, start: Date, end: Date): Promise<boolean> {
  const name = partitionName(start)
  return db.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(${LOCK_KEY})`.execute(trx)
    const exists = await sql<{ n: number }>`select count(*)::int as n from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'decisions'::regclass and c.relname = ${name}`.execute(trx)
    if (Number(exists.rows[0]?.n ?? 0) > 0) return false
    const from = sql.lit(start.toISOString())
    const to = sql.lit(end.toISOString())
    const table = sql.id(name)
    const strays = await sql<{ n: number }>`select count(*)::int as n from decisions_default where evaluated_at >= ${start} and evaluated_at < ${end}`.execute(trx)
    if (Number(strays.rows[0]?.n ?? 0) === 0) {
      await sql`create table if not exists ${table} partition of decisions for values from (${from}) to (${to})`.execute(trx)
      return true
    }
    // Rows for this month already sit in the default partition: move them into the new one.
    await sql`create table ${table} (like decisions including defaults including constraints)`.execute(trx)
    await sql`insert into ${table} select * from decisions_default where evaluated_at >= ${start} and evaluated_at < ${end}`.execute(trx)
    await sql`delete from decisions_default where evaluated_at >= ${start} and evaluated_at < ${end}`.execute(trx)
    await sql`alter table decisions attach partition ${table} for values from (${from}) to (${to})`.execute(trx)
    return true
  })
}

/** Months of the log held in partitions of their own, oldest first. */
export async function listDecisionPartitions(db: Kysely<Database>): Promise<{ name: string; start: Date; end: Date }[]> {
  const { rows } = await sql<{ relname: string }>`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'decisions'::regclass`.execute(db)
  const out: { name: string; start: Date; end: Date }[] = []
  for (const { relname } of rows) {
    const match = NAME.exec(relname)
    if (!match) continue
    const start = monthStart(Number(match[1]), Number(match[2]) - 1)
    out.push({ name: relname, start, end: monthStart(start.getUTCFullYear(), start.getUTCMonth() + 1) })
  }
  return out.sort((a, b) => a.start.getTime() - b.start.getTime())
}

export interface RetentionResult {
  droppedPartitions: string[]
  deletedRows: number
  deletedIdempotencyKeys: number
}

/**
 * Applies retention at `now`: drops every partition whose whole month ended before the longest
 * retention of any organization, then deletes, per organization with a shorter retention, its
 * rows older than that; idempotency keys older than a day go too.
 */
export async function applyDecisionRetention(db: Kysely<Database>, now: Date): Promise<RetentionResult> {
  const settings = await db.selectFrom('organizations').select(['id', 'decision_retention_days']).execute()
  const longest = settings.reduce((max, org) => Math.max(max, org.decision_retention_days), settings.length > 0 ? 0 : DEFAULT_RETENTION_DAYS)
  const horizon = new Date(now.getTime() - longest * 86_400_000)
  const dropped: string[] = []
  for (const partition of await listDecisionPartitions(db)) {
    if (partition.end.getTime() > horizon.getTime()) continue
    await db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(${LOCK_KEY})`.execute(trx)
      await sql`drop table if exists ${sql.id(partition.name)}`.execute(trx)
    })
    dropped.push(partition.name)
  }
  // Rows that landed in the default partition are past every retention too.
  const strays = await sql`delete from decisions_default where evaluated_at < ${horizon}`.execute(db)
  let deletedRows = Number(strays.numAffectedRows ?? 0)
  for (const org of settings) {
    if (org.decision_retention_days >= longest) continue
    const before = new Date(now.getTime() - org.decision_retention_days * 86_400_000)
    const result = await db.deleteFrom('decisions').where('organization_id', '=', org.id).where('evaluated_at', '<', before).executeTakeFirst()
    deletedRows += Number(result.numDeletedRows)
  }
  const keys = await db.deleteFrom('decision_idempotency').where('created_at', '<', new Date(now.getTime() - 86_400_000)).executeTakeFirst()
  return { droppedPartitions: dropped, deletedRows, deletedIdempotencyKeys: Number(keys.numDeletedRows) }
}
