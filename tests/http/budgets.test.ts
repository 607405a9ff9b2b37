// Budgets (docs/budgets.md): limits on policies, counted atomically inside the decision.
// Count and spend limits, windows in a stated zone with an injected clock, rolling windows,
// monitor mode, approval reservations, amount errors, usage, simulate and replay.
import t from 'tap'
import { disableAllPolicies } from '../support/governance-support.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

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
async function decide(body: Record<string, unknown>) {
  const res = await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, json: { resource: 'r', args: {}, context: {}, ...body } })
  return { status: res.status, body: await jsonOf(res) }
}

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
