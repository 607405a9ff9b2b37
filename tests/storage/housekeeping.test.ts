// Autovacuum's job on the embedded database (jobs/housekeeping.ts): every table of the schema
// analyzed, every table and catalog vacuumed, one statement each, and nothing after stop().
// Runs on both databases (the module is the same); a server starts it on PGlite only.
import { sql } from 'kysely'
import t from 'tap'
import { startHousekeeping } from '../../jobs/housekeeping.ts'
import { writeDecisions, type PendingDecision } from '../../storage/decisions.ts'
import { createOrganization } from '../../storage/organizations.ts'
import { openTestDatabase } from '../support/helpers.ts'

const { db } = await openTestDatabase(t)
const errors: unknown[] = []
const options = { onError: (error: unknown) => errors.push(error), firstDelayMs: 3_600_000, firstVacuumDelayMs: 3_600_000 }

async function schemaTables(): Promise<{ name: string; reltuples: number }[]> {
  const { rows } = await sql<{ name: string; reltuples: number }>`
    select format('%I.%I', n.nspname, c.relname) as name, c.reltuples
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'r' and n.nspname = current_schema() order by 1`.execute(db)
  return rows
}

const org = await createOrganization(db, 'Housekeeping', new Date())
const agentId = crypto.randomUUID()
const batch: PendingDecision[] = Array.from({ length: 500 }, () => ({
  record: {
    decision_id: crypto.randomUUID(), organization_id: org.id, agent_id: agentId, agent_handle: 'bot', action: 'a.b', resource: '', args: {}, context: {},
    args_sha256: '0'.repeat(64), decision: 'allow', policy_decision: 'allow', reasons: [], monitor: null, errors: [], approval_id: null, ruleset_revision: 0,
    requested_by: 'key:test', evaluated_at: new Date(),
  },
  idempotency: null,
}))
await writeDecisions(db, batch, new Date())

t.test('ANALYZE goes through every table of the schema, one statement each', async (t) => {
  const housekeeping = startHousekeeping(db, options)
  t.teardown(() => housekeeping.stop())
  const before = await schemaTables()
  t.ok(before.length > 10, `${before.length} tables`)
  const analyzed = await housekeeping.run('analyze')
  t.same(analyzed, before.map((table) => table.name), 'every table, in order')
  const after = await schemaTables()
  t.same(after.filter((table) => table.reltuples < 0).map((table) => table.name), [], 'none is left with no statistics (reltuples -1)')
  const partitions = after.filter((table) => /decisions_/.test(table.name) && table.reltuples > 0)
  t.same(partitions.reduce((sum, table) => sum + table.reltuples, 0), 500, 'the decision partitions hold the 500 rows the statistics counted')
  t.same(errors, [])
})

t.test('VACUUM goes through every table of the schema and the catalogs', async (t) => {
  const housekeeping = startHousekeeping(db, options)
  t.teardown(() => housekeeping.stop())
  await db.updateTable('organizations').set({ name: 'Renamed' }).where('id', '=', org.id).execute()
  const vacuumed = await housekeeping.run('vacuum')
  const tables = (await schemaTables()).map((table) => table.name)
  t.same(vacuumed.filter((name) => !name.startsWith('pg_catalog.')), tables, 'every table of the schema')
  t.ok(vacuumed.includes('pg_catalog.pg_class') && vacuumed.includes('pg_catalog.pg_attribute'), 'and the catalogs')
  const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_user_tables where schemaname = current_schema() and last_vacuum is null and relname = 'organizations'`.execute(db)
  t.equal(rows[0]!.n, 0, 'organizations was vacuumed')
  t.same(errors, [])
})

t.test('after stop() a pass runs nothing, and done settles', async (t) => {
  const housekeeping = startHousekeeping(db, options)
  housekeeping.stop()
  t.same(await housekeeping.run('analyze'), [])
  await housekeeping.done
})

t.test('a table that fails is reported and the pass goes on', async (t) => {
  const seen: string[] = []
  const housekeeping = startHousekeeping(db, { ...options, onError: (_error, table) => seen.push(table) })
  t.teardown(() => housekeeping.stop())
  // A table ANALYZE fails on: an expression index whose function (declared immutable, falsely)
  // divides by a value read from another table, which becomes 0 after the index was built.
  await sql`create table housekeeping_divisor (d int)`.execute(db)
  await sql`insert into housekeeping_divisor values (1)`.execute(db)
  await sql`create table housekeeping_broken (v int)`.execute(db)
  await sql`insert into housekeeping_broken values (0)`.execute(db)
  // Qualified: maintenance commands run functions with search_path = pg_catalog (PostgreSQL 17+).
  const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0]!.s
  await sql.raw(`create function housekeeping_boom(int) returns int language sql immutable as 'select $1 / (select d from "${schema}".housekeeping_divisor)'`).execute(db)
  await sql`create index housekeeping_broken_idx on housekeeping_broken (housekeeping_boom(v))`.execute(db)
  await sql`update housekeeping_divisor set d = 0`.execute(db)
  const analyzed = await housekeeping.run('analyze')
  t.same(seen.map((name) => name.split('.').pop()), ['housekeeping_broken'], 'reported by name')
  t.ok(analyzed.length > 10 && !analyzed.some((name) => name.endsWith('housekeeping_broken')), 'the other tables were analyzed')
  await sql`drop table housekeeping_broken, housekeeping_divisor`.execute(db)
  await sql`drop function housekeeping_boom(int)`.execute(db)
})

t.test('passes run on their own schedule, and stop() ends it', async (t) => {
  // 10 rows: under PostgreSQL's autovacuum threshold (50 changes), so only housekeeping analyzes them.
  const reltuples = async (table: string) =>
    Number((await sql<{ n: number }>`select reltuples as n from pg_class where oid = to_regclass(${table})`.execute(db)).rows[0]!.n)
  await sql`create table housekeeping_scheduled (v int)`.execute(db)
  await sql`insert into housekeeping_scheduled select generate_series(1, 10)`.execute(db)
  t.equal(await reltuples('housekeeping_scheduled'), -1, 'never analyzed yet')
  const housekeeping = startHousekeeping(db, { ...options, firstDelayMs: 20, analyzeEveryMs: 50 })
  for (let i = 0; i < 250 && (await reltuples('housekeeping_scheduled')) < 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(await reltuples('housekeeping_scheduled'), 10, 'the first scheduled ANALYZE ran')
  housekeeping.stop()
  await housekeeping.done
  await sql`create table housekeeping_after_stop (v int)`.execute(db)
  await sql`insert into housekeeping_after_stop select generate_series(1, 10)`.execute(db)
  await new Promise((resolve) => setTimeout(resolve, 300))
  await housekeeping.done
  t.equal(await reltuples('housekeeping_after_stop'), -1, 'no pass after stop()')
  await sql`drop table housekeeping_scheduled, housekeeping_after_stop`.execute(db)
})
