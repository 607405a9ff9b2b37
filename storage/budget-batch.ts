// The common case of budgets in one statement (docs/budgets.md, "Cost"): a batch of plain
// decisions (no idempotency key, no approval) whose limits all have room to spare. One statement
// locks the batch's counters in key order, checks that every counter has room for the batch's
// whole amount without reaching its max, and only then adds the amounts and inserts the rows:
// all or nothing, atomic on its own like the unlimited batch's insert. When anything is not
// plain (a missing counter, a counter that would fill or a refusal, a monitor-mode or rolling
// limit, a stale guard, two windows of one counter in the batch) it writes nothing and answers
// false; the caller then takes the general path (storage/budgets.ts), which decides each one.
import { CompiledQuery, type Kysely } from 'kysely'
import { windowAt } from '../engine/index.ts'
import { preparedText } from '../database/prepared.ts'
import type { Database } from '../database/schema.ts'
import { decisionColumns, decisionRows, type PendingDecision } from './decisions.ts'

interface Sum {
  organization_id: string
  counter_key: string
  window_start: number
  amount: number
  max: number
}

/** The batch's amounts per counter, or null when the batch is not plain. */
function sumsOf(batch: readonly PendingDecision[]): Sum[] | null {
  const sums = new Map<string, Sum>()
  for (const item of batch) {
    for (const r of item.limits?.reservations ?? []) {
      const type = r.limit.window.type
      if (!r.enforce || type === 'rolling' || type === 'per_call') return null
      const start = windowAt(r.limit.window, item.limits!.now).start
      const id = `${r.organization_id}|${r.counter_key}`
      const sum = sums.get(id)
      if (sum === undefined) sums.set(id, { organization_id: r.organization_id, counter_key: r.counter_key, window_start: start, amount: r.amount, max: r.limit.max })
      else {
        if (sum.window_start !== start) return null
        sum.amount += r.amount
        sum.max = Math.min(sum.max, r.limit.max)
      }
    }
  }
  return [...sums.values()].sort((a, b) => (a.organization_id + a.counter_key < b.organization_id + b.counter_key ? -1 : 1))
}

// One text for every batch size (storage/decisions.ts, decisionRows): planned once per connection.
const rows = decisionRows(9)
const TEXT = preparedText(
  'with v as (select * from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::bigint[], $5::bigint[]) as v(o, k, ws, amount, mx)), ' +
    'gv as (select * from unnest($6::uuid[], $7::integer[]) as gv(o, rev)), ' +
    'gok as (select count(*) = (select count(*) from gv) and coalesce(bool_and(o.ruleset_revision = gv.rev), true) as ok from gv join organizations o on o.id = gv.o), ' +
    'c as (select t.organization_id, t.counter_key, case when t.window_start < v.ws then 0 else t.used end as used, greatest(t.window_start, v.ws) as ws, v.amount, v.mx ' +
    'from budget_counters t join v on t.organization_id = v.o and t.counter_key = v.k order by t.organization_id, t.counter_key for update of t), ' +
    'ok as (select (select ok from gok) and count(*) = (select count(*) from v) and coalesce(bool_and(c.used + c.amount < c.mx), true) as fits from c), ' +
    'u as (update budget_counters t set used = c.used + c.amount, window_start = c.ws, updated_at = $8::timestamptz from c ' +
    'where (select fits from ok) and t.organization_id = c.organization_id and t.counter_key = c.counter_key), ' +
    `d as (insert into "decisions" (${rows.columns}) select ${rows.select} from ${rows.from} where (select fits from ok)) ` +
    'select fits from ok',
)

/** Batches written here, and batches handed to the general path (for measurements). */
export const roomStats = { written: 0, declined: 0 }

/** Writes the batch and its counters in one statement when every limit has room to spare; false (nothing written) otherwise. */
export async function writeWithRoom(db: Kysely<Database>, batch: readonly PendingDecision[], now: Date): Promise<boolean> {
  if (!batch.some((item) => item.limits) || batch.some((item) => item.idempotency !== null || item.approval || item.consume)) return false
  const sums = sumsOf(batch)
  if (sums === null || sums.length === 0) {
    roomStats.declined++
    return false
  }
  const guards = new Map<string, number>()
  for (const item of batch) {
    if (!item.guard) continue
    const known = guards.get(item.record.organization_id)
    if (known !== undefined && known !== item.guard.revision) {
      roomStats.declined++
      return false
    }
    guards.set(item.record.organization_id, item.guard.revision)
  }
  const values: unknown[] = [
    sums.map((s) => s.organization_id),
    sums.map((s) => s.counter_key),
    sums.map((s) => new Date(s.window_start).toISOString()),
    sums.map((s) => String(s.amount)),
    sums.map((s) => String(s.max)),
    [...guards.keys()],
    [...guards.values()],
    now.toISOString(),
  ]
  values.push(...decisionColumns(batch.map((item) => item.record)))
  const { rows } = await db.executeQuery<{ fits: boolean }>(CompiledQuery.raw(TEXT, values))
  const fits = rows[0]?.fits === true
  if (fits) roomStats.written++
  else roomStats.declined++
  return fits
}
