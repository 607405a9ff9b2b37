// The decision log's hourly rollup (storage/report-rollup.ts): chunks of whole transactions, the
// mark moved with the counts, concurrent passes never counting a row twice, organizations behind,
// and pruning past retention.
import { sql } from 'kysely'
import t from 'tap'
import { rollUpPass } from '../../jobs/report-rollup.ts'
import { organizationsBehind, pruneRollup, rollUpChunk } from '../../storage/report-rollup.ts'
import { openTestDatabase } from '../support/helpers.ts'
import { byPolicy, logDecisions, newOrganization } from '../support/report-support.ts'

const { db } = await openTestDatabase(t)
const at = new Date('2026-11-22T12:00:00Z')

const rollup = async (organizationId: string, dimension: string) => {
  const { rows } = await sql<{ hour: Date; key: string; decision: string; n: string }>`select hour, key, decision, count::text as n from decision_rollup
    where organization_id = ${organizationId} and dimension = ${dimension} order by hour, key, decision`.execute(db)
  return rows.map((row) => [new Date(row.hour).toISOString(), row.key, row.decision, Number(row.n)])
}

t.test('chunks of whole transactions; concurrent passes count each row once', async (t) => {
  const A = await newOrganization(db, 'Rollup A', at, [])
  const B = await newOrganization(db, 'Rollup B', at, [])
  // Five transactions of two rows each: a chunk of at most 3 rows holds the first transaction only
  // (the fourth row belongs to the second).
  for (let i = 0; i < 5; i++) {
    await logDecisions(db, A.id, [
      { at: `2026-11-20T10:0${i}:00Z`, agent: 'bot-a', decision: 'allow' },
      { at: `2026-11-20T11:0${i}:00Z`, agent: 'bot-b', decision: 'deny', reasons: [byPolicy('11111111-1111-4111-8111-111111111111', 2, 'deny')] },
    ])
  }
  await logDecisions(db, B.id, [{ at: '2026-11-20T10:00:00Z', decision: 'allow' }])
  t.same((await organizationsBehind(db)).filter((id) => id === A.id || id === B.id).sort(), [A.id, B.id].sort())
  t.equal(await rollUpChunk(db, A.id, 3), true, 'cut: more remain')
  t.same(await rollup(A.id, 'outcome'), [
    ['2026-11-20T10:00:00.000Z', 'allow', 'allow', 1],
    ['2026-11-20T11:00:00.000Z', 'deny', 'deny', 1],
  ])
  // Two passes at once: the mark's row lock serializes them.
  const results = await Promise.all([rollUpChunk(db, A.id, 3), rollUpChunk(db, A.id, 3), rollUpChunk(db, A.id, 3), rollUpChunk(db, A.id, 3)])
  t.equal(results.filter((cut) => !cut).length >= 1, true)
  while (await rollUpChunk(db, A.id, 3));
  t.same(await rollup(A.id, 'outcome'), [
    ['2026-11-20T10:00:00.000Z', 'allow', 'allow', 5],
    ['2026-11-20T11:00:00.000Z', 'deny', 'deny', 5],
  ])
  t.same(await rollup(A.id, 'agent'), [
    ['2026-11-20T10:00:00.000Z', 'bot-a', 'allow', 5],
    ['2026-11-20T11:00:00.000Z', 'bot-b', 'deny', 5],
  ])
  t.same(await rollup(A.id, 'policy'), [
    ['2026-11-20T10:00:00.000Z', 'rule:default_decision', 'allow', 5],
    ['2026-11-20T11:00:00.000Z', '11111111-1111-4111-8111-111111111111:2', 'deny', 5],
  ])
  t.same(await rollup(B.id, 'outcome'), [], 'B is rolled up only when its turn comes')
  await rollUpPass(db)
  t.same(await rollup(B.id, 'outcome'), [['2026-11-20T10:00:00.000Z', 'allow', 'allow', 1]])
  t.same((await organizationsBehind(db)).filter((id) => id === A.id || id === B.id), [])
  await rollUpPass(db)
  t.same(await rollup(A.id, 'outcome'), [
    ['2026-11-20T10:00:00.000Z', 'allow', 'allow', 5],
    ['2026-11-20T11:00:00.000Z', 'deny', 'deny', 5],
  ], 'a pass with nothing new changes nothing')
})

t.test('hours older than the retention of their organization are pruned', async (t) => {
  const C = await newOrganization(db, 'Rollup C', at, [])
  await sql`update organizations set decision_retention_days = 30 where id = ${C.id}`.execute(db)
  await logDecisions(db, C.id, [
    { at: '2026-10-01T10:00:00Z', decision: 'allow' },
    { at: '2026-11-20T10:00:00Z', decision: 'allow' },
  ])
  await rollUpPass(db)
  t.equal((await rollup(C.id, 'outcome')).length, 2)
  await pruneRollup(db, at)
  t.same(await rollup(C.id, 'outcome'), [['2026-11-20T10:00:00.000Z', 'allow', 'allow', 1]])
})
