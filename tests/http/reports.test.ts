// Report routes (docs/reports.md): exact counts on a seeded log, the rollup giving the same answer
// as the log, tenant isolation, bucket edges in Europe/Paris (midnight, a daylight-saving day),
// bounded cost and bad parameters.
import t from 'tap'
import { rollUpPass } from '../../jobs/report-rollup.ts'
import { insertPolicy } from '../support/governance-support.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { byPolicy, logDecisions, newOrganization, rule } from '../support/report-support.ts'

const app = await productApp(t)
const at = new Date(app.clock.now)
const get = async (path: string, token: string) => {
  const res = await app.call('GET', path, { token })
  return { status: res.status, body: await jsonOf(res) }
}
const counts = (body: any) => Object.fromEntries(body.series.map((s: any) => [s.key, s.points.map((p: any) => p.count)]))
const starts = (body: any) => body.series[0].points.map((p: any) => p.t)

// One organization's log over three UTC days, and another organization's beside it.
const A = await newOrganization(app.db, 'Reports A', at, ['viewer', 'member'])
const B = await newOrganization(app.db, 'Reports B', at, ['viewer'])
const P_DENY = (await insertPolicy(app.db, A.id, { name: 'no refunds', effect: 'deny', actions: ['payments.refund'] }, at)).policy_id
const P_ALLOW = (await insertPolicy(app.db, A.id, { name: 'reads', effect: 'allow', actions: ['files.read'] }, at)).policy_id
const P_B = (await insertPolicy(app.db, B.id, { name: 'b policy', effect: 'deny', actions: ['*'] }, at)).policy_id
await logDecisions(app.db, A.id, [
  { at: '2026-11-10T12:00:00Z', decision: 'allow' },
  { at: '2026-11-20T10:00:00Z', agent: 'bot-a', action: 'files.read', decision: 'allow', reasons: [byPolicy(P_ALLOW, 1, 'allow')] },
  { at: '2026-11-20T11:00:00Z', agent: 'bot-b', action: 'payments.refund', decision: 'deny', reasons: [byPolicy(P_DENY, 1, 'deny')] },
  { at: '2026-11-21T09:30:00Z', agent: 'bot-b', action: 'payments.refund', decision: 'deny', reasons: [byPolicy(P_DENY, 2, 'deny')] },
  { at: '2026-11-21T23:59:59.999Z', agent: 'bot-a', action: 'payments.send', decision: 'require_approval', reasons: [rule('default_decision')] },
  { at: '2026-11-22T00:00:00Z', agent: 'bot-c', action: 'files.delete', decision: 'deny', reasons: [rule('default_decision')] },
])
await logDecisions(app.db, B.id, [
  { at: '2026-11-20T10:00:00Z', agent: 'bot-a', decision: 'deny', reasons: [byPolicy(P_B, 1, 'deny')] },
  { at: '2026-11-21T10:00:00Z', agent: 'bot-z', decision: 'deny', reasons: [byPolicy(P_B, 1, 'deny')] },
])
const WINDOW = 'from=2026-11-20T00:00:00Z&to=2026-11-22T12:00:00Z'
const BY_DAY = { allow: [1, 0, 0], deny: [1, 1, 1], require_approval: [0, 1, 0] }

t.test('decisions over time by outcome: exact counts per UTC day, other organizations never counted', async (t) => {
  const { status, body } = await get(`/reports/decisions?${WINDOW}&bucket=day`, A.keys.viewer!)
  t.equal(status, 200)
  t.match(body, { from: '2026-11-20T00:00:00.000Z', to: '2026-11-22T12:00:00.000Z', tz: 'UTC', bucket: 'day', group: 'outcome', total: 5, other: null })
  t.same(starts(body), ['2026-11-20T00:00:00.000Z', '2026-11-21T00:00:00.000Z', '2026-11-22T00:00:00.000Z'])
  t.same(counts(body), BY_DAY)
  t.same(body.series.map((s: any) => [s.key, s.label, s.total]), [['allow', 'allow', 1], ['deny', 'deny', 3], ['require_approval', 'require_approval', 1]])
  const other = await get(`/reports/decisions?${WINDOW}`, B.keys.viewer!)
  t.same(counts(other.body), { allow: [0, 0, 0], deny: [1, 1, 0], require_approval: [0, 0, 0] })
})

t.test('the rollup answers exactly as the log, and a decision after the pass counts once', async (t) => {
  await rollUpPass(app.db)
  const rolled = await get(`/reports/decisions?${WINDOW}&bucket=day`, A.keys.viewer!)
  t.same(counts(rolled.body), BY_DAY)
  const edges = await get('/reports/decisions?from=2026-11-20T10:30:00Z&to=2026-11-21T23:59:59.999Z&bucket=hour', A.keys.viewer!)
  t.equal(edges.body.total, 2, 'the 10:00 decision is before from, the 23:59:59.999 one is at to (excluded)')
  t.equal(edges.body.series[0].points[0].t, '2026-11-20T10:00:00.000Z')
  t.equal(edges.body.series[0].points.length, 38)
  await logDecisions(app.db, A.id, [{ at: '2026-11-21T12:00:00Z', decision: 'allow' }])
  const after = await get(`/reports/decisions?${WINDOW}`, A.keys.viewer!)
  t.same(counts(after.body).allow, [1, 1, 0])
  await rollUpPass(app.db)
  const again = await get(`/reports/decisions?${WINDOW}`, A.keys.viewer!)
  t.same(counts(again.body).allow, [1, 1, 0])
  t.equal(again.body.total, 6)
})

t.test('grouped by agent, action and policy, with the rest in other', async (t) => {
  const agents = await get(`/reports/decisions?${WINDOW}&group=agent&limit=2`, A.keys.viewer!)
  t.same(
    agents.body.series.map((s: any) => [s.key, s.total]),
    [['bot-a', 3], ['bot-b', 2]],
  )
  t.same(agents.body.other, { keys: 1, total: 1, points: [{ t: '2026-11-20T00:00:00.000Z', count: 0 }, { t: '2026-11-21T00:00:00.000Z', count: 0 }, { t: '2026-11-22T00:00:00.000Z', count: 1 }] })
  const actions = await get(`/reports/decisions?${WINDOW}&group=action`, A.keys.viewer!)
  t.same(actions.body.series.map((s: any) => [s.key, s.total]), [['files.read', 2], ['payments.refund', 2], ['files.delete', 1], ['payments.send', 1]])
  const policies = await get(`/reports/decisions?${WINDOW}&group=policy`, A.keys.viewer!)
  t.same(
    policies.body.series.map((s: any) => [s.key, s.label, s.total]),
    [['rule:default_decision', 'default decision', 3], [P_DENY, 'no refunds', 2], [P_ALLOW, 'reads', 1]],
  )
})

t.test('day buckets follow Europe/Paris: 23:59:59.999 and 00:00 local land in different days', async (t) => {
  const C = await newOrganization(app.db, 'Reports Paris', at)
  await logDecisions(app.db, C.id, [
    { at: '2026-11-21T22:59:59.999Z', decision: 'allow' },
    { at: '2026-11-21T23:00:00.000Z', decision: 'deny' },
  ])
  const { body } = await get('/reports/decisions?from=2026-11-20T23:00:00Z&to=2026-11-22T23:00:00Z&tz=Europe/Paris', C.keys.viewer!)
  t.same(starts(body), ['2026-11-20T23:00:00.000Z', '2026-11-21T23:00:00.000Z'])
  t.same(counts(body), { allow: [1, 0], deny: [0, 1], require_approval: [0, 0] })
  const utc = await get('/reports/decisions?from=2026-11-20T23:00:00Z&to=2026-11-22T23:00:00Z', C.keys.viewer!)
  t.same(counts(utc.body).allow, [0, 1, 0], 'the same instants in UTC both fall on 21 November')
  t.same(counts(utc.body).deny, [0, 1, 0])
})

t.test('a daylight-saving day in Europe/Paris lasts 25 hours: day and hour buckets', async (t) => {
  const D = await newOrganization(app.db, 'Reports DST', at)
  await logDecisions(app.db, D.id, [
    { at: '2026-10-25T00:30:00Z', decision: 'allow' }, // 02:30 CEST, before the change
    { at: '2026-10-25T01:30:00Z', decision: 'allow' }, // 02:30 CET, after it: the same local hour, another bucket
    { at: '2026-10-25T22:59:59.999Z', decision: 'deny' }, // 23:59:59.999 CET on the 25th
    { at: '2026-10-25T23:00:00Z', decision: 'deny' }, // 00:00 on the 26th
  ])
  const days = await get('/reports/decisions?from=2026-10-24T22:00:00Z&to=2026-10-26T23:00:00Z&tz=Europe/Paris', D.keys.viewer!)
  t.same(starts(days.body), ['2026-10-24T22:00:00.000Z', '2026-10-25T23:00:00.000Z'])
  t.same(counts(days.body), { allow: [2, 0], deny: [1, 1], require_approval: [0, 0] })
  const hours = await get('/reports/decisions?from=2026-10-24T22:00:00Z&to=2026-10-25T23:00:00Z&tz=Europe/Paris&bucket=hour', D.keys.viewer!)
  t.equal(hours.body.series[0].points.length, 25)
  const allow = counts(hours.body).allow
  t.equal(allow[2], 1)
  t.equal(allow[3], 1)
  t.equal(allow.reduce((a: number, b: number) => a + b, 0), 2)
  const spring = await get('/reports/decisions?from=2026-03-28T23:00:00Z&to=2026-03-29T22:00:00Z&tz=Europe/Paris&bucket=hour', D.keys.viewer!)
  t.equal(spring.body.series[0].points.length, 23)
})

t.test('a zone offset by half an hour (Asia/Kolkata) counts from the log, once, after a rollup pass too', async (t) => {
  const K = await newOrganization(app.db, 'Reports Kolkata', at)
  await logDecisions(app.db, K.id, [
    { at: '2026-11-20T18:29:59.999Z', decision: 'allow' }, // 23:59:59.999 on the 20th in Kolkata
    { at: '2026-11-20T18:30:00.000Z', decision: 'allow' }, // 00:00 on the 21st
    { at: '2026-11-21T12:00:00.000Z', decision: 'deny' },
  ])
  await rollUpPass(app.db)
  const { body } = await get('/reports/decisions?from=2026-11-19T18:30:00Z&to=2026-11-21T18:30:00Z&tz=Asia/Kolkata', K.keys.viewer!)
  t.same(starts(body), ['2026-11-19T18:30:00.000Z', '2026-11-20T18:30:00.000Z'])
  t.same(counts(body), { allow: [1, 1], deny: [0, 1], require_approval: [0, 0] })
  const hours = await get('/reports/decisions?from=2026-11-20T17:45:00Z&to=2026-11-20T19:00:00Z&tz=Asia/Kolkata&bucket=hour', K.keys.viewer!)
  t.same(starts(hours.body), ['2026-11-20T17:30:00.000Z', '2026-11-20T18:30:00.000Z'])
  t.same(counts(hours.body).allow, [1, 1])
})

t.test('top denials', async (t) => {
  const { status, body } = await get(`/reports/denials?${WINDOW}`, A.keys.viewer!)
  t.equal(status, 200)
  t.same(body, {
    from: '2026-11-20T00:00:00.000Z',
    to: '2026-11-22T12:00:00.000Z',
    total: 3,
    agents: [
      { agent: 'bot-b', agent_id: null, count: 2 },
      { agent: 'bot-c', agent_id: null, count: 1 },
    ],
    actions: [
      { action: 'payments.refund', count: 2 },
      { action: 'files.delete', count: 1 },
    ],
  })
  const one = await get(`/reports/denials?${WINDOW}&limit=1`, A.keys.viewer!)
  t.equal(one.body.agents.length, 1)
})

t.test("another organization's policy, an unknown id and a malformed id answer the same 404", async (t) => {
  for (const id of [P_B, crypto.randomUUID(), 'not-a-uuid']) {
    const { status, body } = await get(`/reports/policies/${id}?${WINDOW}`, A.keys.viewer!)
    t.equal(status, 404, id)
    t.same(body, { status: 'Not Found', error: 'Policy not found' })
  }
  const own = await get(`/reports/policies/${P_DENY}?${WINDOW}`, A.keys.viewer!)
  t.equal(own.status, 200)
  t.same(own.body.hits.map((p: any) => p.count), [1, 1, 0])
  t.same(own.body.policy, { policy_id: P_DENY, name: 'no refunds', mode: 'enforce', effect: 'deny', version: 1, in_force: true })
  t.equal(own.body.would_change, null)
})

t.test('bounded cost: a window over 400 days or too many hour buckets is refused', async (t) => {
  const cases: [string, string][] = [
    ['from=2020-01-01T00:00:00Z&to=2026-11-22T00:00:00Z', 'from and to span more than 400 days: ask for a shorter window'],
    ['from=2026-09-01T00:00:00Z&to=2026-11-22T00:00:00Z&bucket=hour', 'bucket=hour over this window makes more than 1000 buckets: use bucket=day or a shorter window'],
  ]
  for (const [query, error] of cases) {
    for (const path of ['/reports/decisions', '/reports/policies/' + P_DENY]) {
      const { status, body } = await get(`${path}?${query}`, A.keys.viewer!)
      t.equal(status, 400, `${path}?${query}`)
      t.same(body, { status: 'Bad Request', error })
    }
  }
  const longest = await get('/reports/decisions?from=2025-10-18T00:00:00Z&to=2026-11-22T00:00:00Z', A.keys.viewer!)
  t.equal(longest.status, 200, '400 days exactly is allowed')
  t.equal(longest.body.series[0].points.length, 400)
})

t.test('bad parameters answer 400 naming the field', async (t) => {
  const cases: [string, string][] = [
    ['tz=Mars/Olympus', 'tz is not an IANA time zone (such as UTC or Europe/Paris)'],
    ['tz=%2B05:00', 'tz is not an IANA time zone (such as UTC or Europe/Paris)'],
    ['bucket=week', 'bucket must be hour or day'],
    ['group=colour', 'group must be one of outcome, agent, action, policy'],
    ['limit=0', 'limit must be a whole number from 1 to 50'],
    ['limit=51', 'limit must be a whole number from 1 to 50'],
    ['from=yesterday', 'Field from must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z'],
    ['to=2026-02-30T00:00:00Z', 'Field to names a date or time that does not exist'],
    ['from=2026-11-22T00:00:00Z&to=2026-11-21T00:00:00Z', 'from must be before to'],
    ['from=2026-11-22T00:00:00Z&to=2026-11-22T00:00:00Z', 'from must be before to'],
  ]
  for (const [query, error] of cases) {
    const { status, body } = await get(`/reports/decisions?${query}`, A.keys.viewer!)
    t.equal(status, 400, query)
    t.same(body, { status: 'Bad Request', error }, query)
  }
})

t.test('Viewer and up read the reports; no credential is 401', async (t) => {
  for (const path of ['/reports/decisions', '/reports/denials', '/reports/approvals', '/reports/policies', '/reports/agents']) {
    t.equal((await get(path, A.keys.member!)).status, 200, path)
    const res = await app.call('GET', path)
    t.equal(res.status, 401, path)
  }
})
