// Budgets (docs/budgets.md): limits on policies, counted atomically inside the decision.
// Count and spend limits, windows in a stated zone with an injected clock, rolling windows,
// monitor mode, approval reservations, amount errors, usage, simulate and replay.
import { sql } from 'kysely'
import t from 'tap'
import { expireDue } from '../../storage/approvals.ts'
import { heldReservations } from '../../storage/budgets.ts'
import { disableAllPolicies } from '../support/governance-support.ts'
import { inviteAndAccept, jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
await disableAllPolicies(app.db, A)

async function makeAgent(handle: string) {
  const res = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle, status: 'active' } })
  if (res.status !== 201) throw new Error(`agent ${handle}: ${res.status} ${await res.text()}`)
  return jsonOf(res)
}
async function policy(body: Record<string, unknown>) {
  const res = await app.call('POST', '/policies', { token: vars.ADMIN_KEY_A, json: { organization_id: A, effect: 'allow', ...body } })
  const json = await jsonOf(res)
  if (res.status !== 201) throw new Error(`policy: ${res.status} ${JSON.stringify(json)}`)
  return json
}
async function decide(body: Record<string, unknown>, path = '/decisions') {
  const res = await app.call('POST', path, { token: vars.MEMBER_KEY_A, json: { resource: 'r', args: {}, context: {}, ...body } })
  return { status: res.status, body: await jsonOf(res) }
}
/** The agent's usage of the limits of one policy (every policy of the file governs every agent). */
async function usage(agentId: string, policyId: string) {
  const res = await app.call('GET', `/agents/${agentId}/usage`, { token: vars.VIEWER_KEY_A })
  if (res.status !== 200) throw new Error(`usage: ${res.status}`)
  return ((await jsonOf(res)).limits as any[]).filter((limit) => limit.policy_id === policyId)
}
async function countersUsed(policyId: string): Promise<number> {
  const rows = await app.db.selectFrom('budget_counters').select('used').where('policy_id', '=', policyId).execute()
  return rows.reduce((sum, row) => sum + Number(row.used), 0)
}
async function allowsOf(action: string): Promise<number> {
  const row = await app.db.selectFrom('decisions').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', A).where('action', '=', action).where('decision', '=', 'allow').executeTakeFirstOrThrow()
  return Number(row.n)
}
const countLimit = (name: string, max: number, window: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ name, kind: 'count', max, window, ...extra })

t.test('a spend limit stops the third refund of a day, with the reason', async (t) => {
  app.clock.now = Date.parse('2026-12-06T09:00:00Z')
  const agent = await makeAgent('refunder')
  const p = await policy({
    name: 'Refunds',
    actions: ['refunds.issue'],
    limits: [{ name: 'daily refunds', kind: 'spend', max: 25000, amount: 'int(args.amount_cents)', currency: 'EUR', window: { type: 'day', tz: 'Europe/Paris' } }],
  })
  t.same(p.limits[0], { name: 'daily refunds', kind: 'spend', max: 25000, amount: 'int(args.amount_cents)', currency: 'EUR', scope: 'agent', window: { type: 'day', tz: 'Europe/Paris' }, mode: 'enforce' })
  const first = await decide({ agent: 'refunder', action: 'refunds.issue', args: { amount_cents: 10000 } })
  const second = await decide({ agent: 'refunder', action: 'refunds.issue', args: { amount_cents: 10000 } })
  const third = await decide({ agent: 'refunder', action: 'refunds.issue', args: { amount_cents: 10000 } })
  t.same([first.status, first.body.decision, second.body.decision, third.body.decision], [200, 'allow', 'allow', 'deny'])
  t.same(third.body.reasons, [
    {
      rule: 'limit_exceeded', policy_id: p.policy_id, version: 1, limit: 'daily refunds', policy_name: 'Refunds', kind: 'spend', mode: 'enforce', window: 'day (Europe/Paris)',
      max: 25000, used: 20000, remaining: 5000, requested: 10000, currency: 'EUR', resets_at: '2026-12-06T23:00:00.000Z',
      message: 'Limit "daily refunds" of policy "Refunds" (spend, day (Europe/Paris)): 20000 EUR used of 25000 EUR, 5000 EUR remaining; this request needs 10000 EUR; the window resets at 2026-12-06T23:00:00.000Z',
    },
  ])
  const usage = await app.call('GET', `/agents/${agent.agent_id}/usage`, { token: vars.MEMBER_KEY_A })
  t.equal(usage.status, 200)
  t.same((await jsonOf(usage)).limits.map((l: any) => [l.limit, l.used, l.remaining, l.resets_at]), [['daily refunds', 20000, 5000, '2026-12-06T23:00:00.000Z']])
})

t.test('200 concurrent decisions against a count limit of 37: exactly 37 allows', async (t) => {
  await makeAgent('racer')
  const p = await policy({ name: 'Race', actions: ['race.go'], limits: [countLimit('per day', 37, { type: 'day' })] })
  const answers = await Promise.all(Array.from({ length: 200 }, () => decide({ agent: 'racer', action: 'race.go' })))
  t.same([...new Set(answers.map((a) => a.status))], [200])
  const allows = answers.filter((a) => a.body.decision === 'allow').length
  t.equal(allows, 37, 'exactly the limit is allowed')
  t.equal(answers.filter((a) => a.body.decision === 'deny' && a.body.reasons[0].rule === 'limit_exceeded').length, 163, 'every other one is refused by the limit')
  t.equal(await countersUsed(p.policy_id), 37, 'the counter holds 37')
  t.equal(await allowsOf('race.go'), 37, 'and the log holds 37 allows')
})

t.test('a spend limit with random amounts: the allowed sum never passes max, no allow refused while room remains', async (t) => {
  await makeAgent('spender')
  const MAX = 50_000
  const p = await policy({ name: 'Spend race', actions: ['spend.go'], limits: [{ name: 'spend', kind: 'spend', max: MAX, amount: 'int(args.cents)', currency: 'EUR', window: { type: 'all_time' } }] })
  const amounts = Array.from({ length: 120 }, (_, i) => 1 + ((i * 7919 + 13) % 1500))
  const answers = await Promise.all(amounts.map((cents) => decide({ agent: 'spender', action: 'spend.go', args: { cents } })))
  const allowed = amounts.filter((_, i) => answers[i]!.body.decision === 'allow')
  const sum = allowed.reduce((a, b) => a + b, 0)
  t.ok(sum <= MAX, `allowed sum ${sum} ≤ ${MAX}`)
  const refused = amounts.filter((_, i) => answers[i]!.body.decision === 'deny')
  t.ok(refused.length > 0, 'some were refused')
  t.same(refused.filter((cents) => cents <= MAX - sum), [], 'every refused amount is larger than what remained at the end')
  t.equal(await countersUsed(p.policy_id), sum, 'the counter holds the allowed sum')
})

t.test('window edges in a stated zone (injected clock), and a rolling window sliding', async (t) => {
  await makeAgent('edger')
  await policy({ name: 'Edges', actions: ['edge.day'], limits: [countLimit('one a day', 1, { type: 'day', tz: 'Europe/Paris' })] })
  // 2026-12-06 23:59:59.999 in Paris (UTC+1) is 22:59:59.999Z.
  app.clock.now = Date.parse('2026-12-06T22:59:59.999Z')
  const last = await decide({ agent: 'edger', action: 'edge.day' })
  const again = await decide({ agent: 'edger', action: 'edge.day' })
  app.clock.now = Date.parse('2026-12-06T23:00:00.000Z')
  const next = await decide({ agent: 'edger', action: 'edge.day' })
  t.same([last.body.decision, again.body.decision, next.body.decision], ['allow', 'deny', 'allow'], 'the next day in Paris starts at 23:00Z')
  t.equal(again.body.reasons[0].resets_at, '2026-12-06T23:00:00.000Z')

  await policy({ name: 'Rolling', actions: ['edge.roll'], limits: [countLimit('two an hour', 2, { type: 'rolling', seconds: 3600 })] })
  const t0 = Date.parse('2026-12-07T10:00:00.000Z')
  const at = async (seconds: number) => {
    app.clock.now = t0 + seconds * 1000
    return (await decide({ agent: 'edger', action: 'edge.roll' })).body
  }
  const seq = [await at(0), await at(1000), await at(2000), await at(3599), await at(3600 + 30), await at(3600 + 40), await at(4600 + 30)]
  t.same(seq.map((b) => b.decision), ['allow', 'allow', 'deny', 'deny', 'allow', 'deny', 'allow'], 'a use stops counting once it is an hour (and at most one 30 s bucket) old')
  t.equal(seq[2].reasons[0].resets_at, '2026-12-07T11:00:30.000Z', 'the rolling reason says when the oldest use stops counting')
})

t.test('monitor-mode limits record "would have exceeded" without denying', async (t) => {
  await makeAgent('watched')
  await policy({ name: 'Watch', actions: ['watch.go'], limits: [countLimit('soft', 1, { type: 'all_time' }, { mode: 'monitor' })] })
  const first = await decide({ agent: 'watched', action: 'watch.go' })
  const second = await decide({ agent: 'watched', action: 'watch.go' })
  t.same([first.body.decision, first.body.monitor.decision, second.body.decision, second.body.monitor.decision], ['allow', 'allow', 'allow', 'deny'])
  t.match(second.body.monitor.reasons[0], { rule: 'limit_exceeded', mode: 'monitor', limit: 'soft', used: 1, remaining: 0, message: /would have refused/ })
  const row = await app.db.selectFrom('decisions').select('monitor').where('decision_id', '=', second.body.decision_id).executeTakeFirstOrThrow()
  const stored = typeof row.monitor === 'string' ? JSON.parse(row.monitor) : row.monitor
  t.equal(stored.decision, 'deny', 'the logged row records it too')
})

t.test('amount expressions that error, are not whole, negative or huge fail closed with a clear reason', async (t) => {
  await makeAgent('amounts')
  await policy({ name: 'Amounts', actions: ['amount.go'], limits: [{ name: 'cap', kind: 'spend', max: 1000, amount: 'args.cents', currency: 'USD', window: { type: 'day' } }] })
  const cases: [unknown, string][] = [
    [undefined, 'amount could not be evaluated: No such key: cents'],
    [12.5, 'amount 12.5 is not a whole number of minor units'],
    [-5, 'amount is negative (-5)'],
    [1e18, 'amount 1000000000000000000 is larger than 1000000000000000'],
    ['100', 'amount returned a string, not a whole number'],
  ]
  for (const [cents, message] of cases) {
    const answer = await decide({ agent: 'amounts', action: 'amount.go', args: cents === undefined ? {} : { cents } })
    t.equal(answer.body.decision, 'deny', `${JSON.stringify(cents)} → deny`)
    t.match(answer.body.reasons[0], { rule: 'limit_error', limit: 'cap', requested: null, message: `Limit "cap" of policy "Amounts" (spend, day (UTC)): ${message}; the request is refused (fail closed)` })
  }
  t.equal((await decide({ agent: 'amounts', action: 'amount.go', args: { cents: 10 } })).body.decision, 'allow', 'a whole amount passes')
  const bad = await app.call('POST', '/policies', { token: vars.ADMIN_KEY_A, json: { organization_id: A, name: 'x', effect: 'allow', actions: ['x'], limits: [{ name: 'c', kind: 'spend', max: 1, currency: 'EUR', window: { type: 'day' } }] } })
  t.same([bad.status, (await jsonOf(bad)).error], [400, 'Limit "c": a spend limit needs amount, a CEL expression returning minor units (at limits.0)'])
})

t.test('simulate checks limits and consumes nothing; a draft with a lower limit shows the deny', async (t) => {
  const agent = await makeAgent('simmer')
  const p = await policy({ name: 'Sim', actions: ['sim.go'], limits: [countLimit('three', 3, { type: 'all_time' })] })
  await decide({ agent: 'simmer', action: 'sim.go' })
  await decide({ agent: 'simmer', action: 'sim.go' })
  const before = await countersUsed(p.policy_id)
  const simulated = await decide({ agent: 'simmer', action: 'sim.go' }, '/decisions/simulate')
  t.same([simulated.status, simulated.body.decision], [200, 'allow'])
  const draft = { policy_id: p.policy_id, name: 'Sim', effect: 'allow', actions: ['sim.go'], limits: [countLimit('three', 2, { type: 'all_time' })] }
  const lower = await decide({ agent: 'simmer', action: 'sim.go', policies: [draft] }, '/decisions/simulate')
  t.match(lower.body, { decision: 'deny', reasons: [{ rule: 'limit_exceeded', limit: 'three', max: 2, used: 2, remaining: 0 }] })
  t.equal(await countersUsed(p.policy_id), before, 'nothing was counted')
  t.same((await usage(agent.agent_id, p.policy_id)).map((l) => [l.limit, l.used, l.remaining]), [['three', 2, 1]])
})

t.test('approvals reserve when requested; deny, cancel and expiry release; an approved use never counts twice', async (t) => {
  const email = `approver-${crypto.randomUUID().slice(0, 8)}@example.com`
  await inviteAndAccept(app, vars.OWNER_KEY_A!, email, 'manager', 'a long enough password')
  app.clock.now = Date.parse('2026-12-08T08:00:00.000Z')
  const signIn = async () => (await jsonOf(await app.call('POST', '/auth/login', { json: { email, password: 'a long enough password' } }))).access_token as string
  let person = await signIn()
  const agent = await makeAgent('asker')
  const p = await policy({ name: 'Ask', effect: 'require_approval', actions: ['ask.go'], limits: [{ name: 'spend', kind: 'spend', max: 300, amount: 'int(args.cents)', currency: 'EUR', window: { type: 'day' } }] })
  const ask = (cents: number, extra: Record<string, unknown> = {}) => decide({ agent: 'asker', action: 'ask.go', args: { cents }, ...extra })
  const used = async () => (await usage(agent.agent_id, p.policy_id))[0].used
  const one = await ask(100)
  const two = await ask(100)
  const three = await ask(100)
  t.same([one.body.decision, two.body.decision, three.body.decision], ['require_approval', 'require_approval', 'require_approval'], JSON.stringify(one))
  t.equal(await used(), 300, 'each request reserved its amount')
  const four = await ask(100)
  t.match(four.body, { decision: 'deny', approval: null, reasons: [{ rule: 'limit_exceeded', used: 300, remaining: 0, requested: 100 }] })

  const vote = (id: string, kind: string) => app.call('POST', `/approvals/${id}/${kind}`, { token: person, json: {} })
  const denied = await vote(one.body.approval.approval_id, 'deny')
  t.equal(denied.status, 200, await denied.clone().text())
  t.equal(await used(), 200, 'a denied approval gives its reservation back')
  const cancelled = await app.call('POST', `/approvals/${two.body.approval.approval_id}/cancel`, { token: vars.ADMIN_KEY_A, json: {} })
  t.equal(cancelled.status, 200, await cancelled.clone().text())
  t.equal(await used(), 100, 'a cancelled approval gives it back')
  t.equal((await vote(three.body.approval.approval_id, 'approve')).status, 200)
  const use = await ask(100, { approval_id: three.body.approval.approval_id })
  t.same([use.body.decision, await used()], ['allow', 100], 'the approved use is the reservation: nothing counted twice')
  t.equal(await heldReservations(app.db, A), 0, 'no reservation is left held')

  const five = await ask(150)
  t.equal(await used(), 250)
  app.clock.now += 3600_000
  await expireDue(app.db, new Date(app.clock.now))
  t.equal(await used(), 100, 'an expired approval gives it back')
  person = await signIn()
  const again = await vote(one.body.approval.approval_id, 'deny')
  t.equal(again.status, 409, 'a second deny changes nothing')
  t.equal(await used(), 100, 'and releases nothing twice')
  t.equal(five.body.decision, 'require_approval')
  t.equal(await countersUsed(p.policy_id), 100)
})

t.test('limit.reached once per window and limit.changed are audited', async (t) => {
  app.clock.now = Date.parse('2026-12-09T08:00:00.000Z')
  await makeAgent('eventful')
  const p = await policy({ name: 'Events', actions: ['event.go'], limits: [countLimit('two', 2, { type: 'day' })] })
  for (let i = 0; i < 4; i++) await decide({ agent: 'eventful', action: 'event.go' })
  const events = async (type: string) => app.db.selectFrom('audit_events').select(['type', 'data']).where('organization_id', '=', A).where('type', '=', type).where('target_id', '=', p.policy_id).execute()
  const reached = await events('limit.reached')
  t.equal(reached.length, 1, 'reached once in the window')
  t.match(typeof reached[0]!.data === 'string' ? JSON.parse(reached[0]!.data) : reached[0]!.data, { limit: 'two', max: 2, used: 2, window_start: '2026-12-09T00:00:00.000Z' })
  app.clock.now += 86_400_000
  for (let i = 0; i < 3; i++) await decide({ agent: 'eventful', action: 'event.go' })
  t.equal((await events('limit.reached')).length, 2, 'and once more the next day')
  t.equal((await events('limit.changed')).length, 1, 'creating a policy with limits is a limit change')
  const patched = await app.call('PATCH', `/policies/${p.policy_id}`, { token: vars.ADMIN_KEY_A, json: { limits: [countLimit('two', 5, { type: 'day' })] } })
  t.equal(patched.status, 200)
  await app.call('PATCH', `/policies/${p.policy_id}`, { token: vars.ADMIN_KEY_A, json: { name: 'Events renamed' } })
  t.equal((await events('limit.changed')).length, 2, 'changing the limits is; renaming the policy is not')
  t.equal((await decide({ agent: 'eventful', action: 'event.go' })).body.decision, 'allow', 'the raised max applies to the same counter')
})

t.test('counters that cannot be written: 503, nothing allowed, counters consistent after', async (t) => {
  await makeAgent('outage')
  const p = await policy({ name: 'Outage', actions: ['outage.go'], limits: [countLimit('ten', 10, { type: 'all_time' })] })
  t.equal((await decide({ agent: 'outage', action: 'outage.go' })).body.decision, 'allow')
  await sql`create function refuse_counters() returns trigger language plpgsql as $$ begin raise exception 'disk full' using errcode = 'XX000'; end $$`.execute(app.db)
  await sql`create trigger refuse before update on budget_counters for each row execute function refuse_counters()`.execute(app.db)
  const refused = await decide({ agent: 'outage', action: 'outage.go' })
  t.same(refused, { status: 503, body: { status: 'Service Unavailable', error: 'The decision could not be recorded, so none is given; retry' } })
  await sql`drop trigger refuse on budget_counters`.execute(app.db)
  await sql`drop function refuse_counters()`.execute(app.db)
  t.equal(await allowsOf('outage.go'), 1, 'the refused decision was not logged')
  t.equal(await countersUsed(p.policy_id), 1, 'nor counted')
  t.equal((await decide({ agent: 'outage', action: 'outage.go' })).body.decision, 'allow', 'after recovery decisions count again')
  t.equal(await countersUsed(p.policy_id), await allowsOf('outage.go'))
})

t.test('usage: scopes, another organization, agent keys', async (t) => {
  const agent = await makeAgent('scoped')
  const p = await policy({
    name: 'Scopes',
    agents: ['scoped'],
    actions: ['scope.go'],
    limits: [countLimit('per resource', 1, { type: 'hour' }, { scope: 'agent_resource' }), countLimit('org', 100, { type: 'month', tz: 'America/New_York' }, { scope: 'organization' })],
  })
  app.clock.now = Date.parse('2026-12-10T15:10:00.000Z')
  const a1 = await decide({ agent: 'scoped', action: 'scope.go', resource: 'a' })
  const a2 = await decide({ agent: 'scoped', action: 'scope.go', resource: 'a' })
  const b1 = await decide({ agent: 'scoped', action: 'scope.go', resource: 'b' })
  t.same([a1.body.decision, a2.body.decision, b1.body.decision], ['allow', 'deny', 'allow'], 'agent_resource counts each resource apart')
  const rows = await usage(agent.agent_id, p.policy_id)
  t.same(
    rows.map((l) => [l.limit, l.resource, l.used, l.remaining, l.window_start, l.resets_at]).sort(),
    [
      ['org', null, 2, 98, '2026-12-01T05:00:00.000Z', '2027-01-01T05:00:00.000Z'],
      ['per resource', 'a', 1, 0, '2026-12-10T15:00:00.000Z', '2026-12-10T16:00:00.000Z'],
      ['per resource', 'b', 1, 0, '2026-12-10T15:00:00.000Z', '2026-12-10T16:00:00.000Z'],
    ].sort(),
  )
  const foreign = await app.call('GET', `/agents/${agent.agent_id}/usage`, { token: vars.ADMIN_KEY_B })
  t.same([foreign.status, (await jsonOf(foreign)).error], [404, 'Agent not found'])
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
  const own = await app.call('GET', '/agents/me/usage', { token: key.api_key })
  t.equal(own.status, 200)
  t.equal((await jsonOf(own)).limits.filter((l: any) => l.policy_id === p.policy_id).length, 3)
  t.equal((await app.call('GET', '/agents/me/usage', { token: vars.ADMIN_KEY_A })).status, 404)
})

t.test('replay counts a draft limit over the logged decisions, oldest first', async (t) => {
  app.clock.now = Date.parse('2026-12-11T08:00:00.000Z')
  await makeAgent('replayed')
  const p = await policy({ name: 'Replayed', actions: ['replay.go'], limits: [countLimit('five', 5, { type: 'day' })] })
  const ids: string[] = []
  for (let i = 0; i < 6; i++) {
    app.clock.now += 1000
    ids.push((await decide({ agent: 'replayed', action: 'replay.go' })).body.decision_id)
  }
  const replay = async (max: number) => {
    const res = await app.call('POST', `/policies/replay?organization_id=${A}`, {
      token: vars.ADMIN_KEY_A,
      json: { from: '2026-12-11T00:00:00.000Z', policies: [{ policy_id: p.policy_id, name: 'Replayed', effect: 'allow', actions: ['replay.go'], limits: [countLimit('five', max, { type: 'day' })] }] },
    })
    t.equal(res.status, 200, await res.clone().text())
    return jsonOf(res)
  }
  const same = await replay(5)
  t.same([same.evaluated, same.changed], [6, {}], 'the limit in force replays as it decided (the sixth was its deny)')
  const lower = await replay(3)
  t.same(lower.changed, { 'allow→deny': 2 })
  t.same(lower.sample.map((s: any) => [s.decision_id, s.to, s.reasons[0].rule, s.reasons[0].limit]), [[ids[3], 'deny', 'limit_exceeded', 'five'], [ids[4], 'deny', 'limit_exceeded', 'five']])
  const higher = await replay(10)
  t.same(higher.changed, { 'deny→allow': 1 }, 'a higher limit would have allowed the sixth')
})

t.test('capabilities mention the limits of the policies behind each entry', async (t) => {
  const agent = await makeAgent('capable')
  await policy({ name: 'Capable', agents: ['capable'], actions: ['cap.go'], limits: [{ name: 'weekly', kind: 'spend', max: 900, amount: 'int(args.cents)', currency: 'EUR', window: { type: 'week', tz: 'Asia/Tokyo' } }] })
  const res = await app.call('GET', `/agents/${agent.agent_id}/capabilities`, { token: vars.VIEWER_KEY_A })
  const entry = (await jsonOf(res)).capabilities.find((c: any) => c.action === 'cap.go')
  t.same(entry.policies[0].limits, [{ name: 'weekly', kind: 'spend', max: 900, currency: 'EUR', scope: 'agent', window: 'week (Asia/Tokyo)', mode: 'enforce' }])
})

t.test('idempotency keys: a repeat never counts twice, and a limit refusal is the answer kept', async (t) => {
  await makeAgent('keyed')
  const p = await policy({ name: 'Keyed', actions: ['keyed.go'], limits: [countLimit('one', 1, { type: 'all_time' })] })
  const ask = (key: string) => decide({ agent: 'keyed', action: 'keyed.go', idempotency_key: key })
  const [first, again] = await Promise.all([ask('k-1'), ask('k-1')])
  t.same([first.body.decision, again.body.decision, again.body.decision_id], ['allow', 'allow', first.body.decision_id], 'one decision for the key')
  t.equal(await countersUsed(p.policy_id), 1, 'counted once')
  const refused = await ask('k-2')
  t.match(refused.body, { decision: 'deny', reasons: [{ rule: 'limit_exceeded', limit: 'one' }] })
  t.same((await ask('k-2')).body, refused.body, 'the refusal is what the key answers again')
  t.equal(await countersUsed(p.policy_id), 1)
})
