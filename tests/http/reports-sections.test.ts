// Report routes, the other sections (docs/reports.md): approvals (outcomes, percentiles, what
// waits now), policy effectiveness (hits per version, unmatched, monitor-mode evidence), agents
// (active, gone) and leads (per day, source, list, duplicates refused; who may read them).
import { sql } from 'kysely'
import t from 'tap'
import { rollUpPass } from '../../jobs/report-rollup.ts'
import { findOldestOrganizationId } from '../../storage/organizations.ts'
import { insertPolicy } from '../support/governance-support.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { byPolicy, insertAgent, insertApproval, logDecisions, newOrganization, rule } from '../support/report-support.ts'

const app = await productApp(t)
const { vars } = app
const at = new Date(app.clock.now) // 2026-11-22T12:00:00Z
// Organizations made after the seeded ones: one of those holds the leads.
const later = new Date(app.clock.now + 1000)
const get = async (path: string, token: string) => {
  const res = await app.call('GET', path, { token })
  return { status: res.status, body: await jsonOf(res) }
}
const WINDOW = 'from=2026-11-20T00:00:00Z&to=2026-11-22T12:00:00Z'

t.test('approvals: what became of those requested in the window, time to decision, what waits now', async (t) => {
  const A = await newOrganization(app.db, 'Approvals A', later)
  const B = await newOrganization(app.db, 'Approvals B', later)
  const agent = await insertAgent(app.db, A.id, 'pay-bot', 'active', at, at)
  const other = await insertAgent(app.db, B.id, 'pay-bot', 'active', at, at)
  const base = { agentId: agent, agent: 'pay-bot' }
  await insertApproval(app.db, A.id, { ...base, status: 'approved', createdAt: '2026-11-21T10:00:00Z', expiresAt: '2026-11-21T10:15:00Z', decidedAt: '2026-11-21T10:01:00Z', useBy: '2026-11-21T10:06:00Z' })
  await insertApproval(app.db, A.id, { ...base, status: 'consumed', createdAt: '2026-11-21T11:00:00Z', expiresAt: '2026-11-21T11:15:00Z', decidedAt: '2026-11-21T11:02:00Z', useBy: '2026-11-21T11:07:00Z' })
  await insertApproval(app.db, A.id, { ...base, status: 'denied', createdAt: '2026-11-21T12:00:00Z', expiresAt: '2026-11-21T12:15:00Z', decidedAt: '2026-11-21T12:05:00Z' })
  await insertApproval(app.db, A.id, { ...base, status: 'expired', createdAt: '2026-11-20T12:00:00Z', expiresAt: '2026-11-20T12:15:00Z', decidedAt: '2026-11-20T12:15:00Z' })
  await insertApproval(app.db, A.id, { ...base, status: 'cancelled', createdAt: '2026-11-21T13:00:00Z', expiresAt: '2026-11-21T13:15:00Z', decidedAt: '2026-11-21T13:10:00Z' })
  const waiting = await insertApproval(app.db, A.id, { ...base, status: 'pending', createdAt: '2026-11-22T11:00:00Z', expiresAt: '2026-11-22T12:15:00Z' })
  await insertApproval(app.db, A.id, { ...base, status: 'pending', createdAt: '2026-11-22T10:00:00Z', expiresAt: '2026-11-22T10:15:00Z' })
  const old = await insertApproval(app.db, A.id, { ...base, action: 'payments.refund', status: 'pending', createdAt: '2026-11-10T12:00:00Z', expiresAt: '2026-11-22T13:00:00Z' })
  await insertApproval(app.db, B.id, { agentId: other, agent: 'pay-bot', status: 'denied', createdAt: '2026-11-21T12:00:00Z', expiresAt: '2026-11-21T12:15:00Z', decidedAt: '2026-11-21T12:00:01Z' })
  const { status, body } = await get(`/reports/approvals?${WINDOW}`, A.keys.viewer!)
  t.equal(status, 200)
  t.same(body, {
    from: '2026-11-20T00:00:00.000Z',
    to: '2026-11-22T12:00:00.000Z',
    requested: 7,
    approved: 2,
    denied: 1,
    expired: 2,
    cancelled: 1,
    consumed: 1,
    time_to_decision_seconds: { p50: 120, p90: 264 },
    pending_total: 2,
    pending: [
      { approval_id: old, action: 'payments.refund', agent: 'pay-bot', agent_id: agent, created_at: '2026-11-10T12:00:00.000Z', expires_at: '2026-11-22T13:00:00.000Z', waiting_seconds: 1_036_800 },
      { approval_id: waiting, action: 'payments.send', agent: 'pay-bot', agent_id: agent, created_at: '2026-11-22T11:00:00.000Z', expires_at: '2026-11-22T12:15:00.000Z', waiting_seconds: 3600 },
    ],
  })
  const one = await get(`/reports/approvals?${WINDOW}&limit=1`, A.keys.viewer!)
  t.equal(one.body.pending.length, 1)
  t.equal(one.body.pending_total, 2)
  const empty = await get(`/reports/approvals?${WINDOW}`, (await newOrganization(app.db, 'Approvals C', later)).keys.viewer!)
  t.same(empty.body.time_to_decision_seconds, { p50: null, p90: null })
  t.equal(empty.body.requested, 0)
})

t.test('policies: hits per version, unmatched policies, what monitor-mode policies would have changed', async (t) => {
  const P = await newOrganization(app.db, 'Policies', later)
  const E1 = (await insertPolicy(app.db, P.id, { name: 'no deletes', effect: 'deny', actions: ['files.delete'] }, at)).policy_id
  const M1 = (await insertPolicy(app.db, P.id, { name: 'after hours', effect: 'deny', actions: ['*'], mode: 'monitor' }, at)).policy_id
  const U1 = (await insertPolicy(app.db, P.id, { name: 'unused', effect: 'allow', actions: ['never.*'] }, at)).policy_id
  const X1 = (await insertPolicy(app.db, P.id, { name: 'retired', effect: 'allow', actions: ['old.*'] }, at)).policy_id
  await insertPolicy(app.db, P.id, { name: 'switched off', effect: 'deny', actions: ['*'], enabled: false }, at)
  await sql`update policies set archived_at = ${at} where policy_id = ${X1}`.execute(app.db)
  const shadow = (decision: string) => ({ decision, reasons: [byPolicy(M1, 1, 'deny', 'monitor')] })
  await logDecisions(app.db, P.id, [
    { at: '2026-11-20T08:00:00Z', decision: 'deny', reasons: [byPolicy(E1, 1, 'deny')] },
    { at: '2026-11-20T08:30:00Z', decision: 'deny', reasons: [byPolicy(E1, 1, 'deny')] },
    { at: '2026-11-21T08:00:00Z', decision: 'deny', reasons: [byPolicy(E1, 2, 'deny')] },
    { at: '2026-11-20T09:00:00Z', decision: 'allow', reasons: [rule('default_decision')], monitor: shadow('deny') },
    { at: '2026-11-21T09:00:00Z', decision: 'allow', reasons: [rule('default_decision')], monitor: shadow('deny') },
    { at: '2026-11-21T10:00:00Z', decision: 'deny', reasons: [rule('default_decision')], monitor: shadow('deny') },
    { at: '2026-11-21T11:00:00Z', decision: 'allow', reasons: [byPolicy(X1, 1, 'allow')] },
    { at: '2026-11-19T11:00:00Z', decision: 'allow', reasons: [byPolicy(U1, 1, 'allow')] },
  ])
  const expected = {
    from: '2026-11-20T00:00:00.000Z',
    to: '2026-11-22T12:00:00.000Z',
    policies: [
      { policy_id: M1, name: 'after hours', mode: 'monitor', effect: 'deny', in_force: true, hits: [{ version: 1, count: 3 }], total: 3, would_change: 2 },
      { policy_id: E1, name: 'no deletes', mode: 'enforce', effect: 'deny', in_force: true, hits: [{ version: 2, count: 1 }, { version: 1, count: 2 }], total: 3, would_change: null },
      { policy_id: X1, name: 'retired', mode: 'enforce', effect: 'allow', in_force: false, hits: [{ version: 1, count: 1 }], total: 1, would_change: null },
    ],
    unmatched: [{ policy_id: U1, name: 'unused', mode: 'enforce' }],
  }
  const fromLog = await get(`/reports/policies?${WINDOW}`, P.keys.viewer!)
  t.equal(fromLog.status, 200)
  t.same(fromLog.body, expected)
  await rollUpPass(app.db)
  t.same((await get(`/reports/policies?${WINDOW}`, P.keys.viewer!)).body, expected, 'the same from the rollup')
  const monitor = await get(`/reports/policies/${M1}?${WINDOW}`, P.keys.viewer!)
  t.same(monitor.body.policy, { policy_id: M1, name: 'after hours', mode: 'monitor', effect: 'deny', version: 1, in_force: true })
  t.same(monitor.body.hits.map((p: any) => p.count), [1, 2, 0])
  t.same(monitor.body.would_change.map((p: any) => p.count), [1, 1, 0])
  t.same(monitor.body.hits.map((p: any) => p.t), ['2026-11-20T00:00:00.000Z', '2026-11-21T00:00:00.000Z', '2026-11-22T00:00:00.000Z'])
})

t.test('agents: active in the window with their decisions, discovered agents gone quiet', async (t) => {
  const G = await newOrganization(app.db, 'Agents', later)
  const alpha = await insertAgent(app.db, G.id, 'alpha', 'active', at, new Date('2026-11-22T11:00:00Z'))
  const beta = await insertAgent(app.db, G.id, 'beta', 'discovered', at, new Date('2026-11-21T09:00:00Z'))
  const gamma = await insertAgent(app.db, G.id, 'gamma', 'discovered', new Date('2026-11-10T00:00:00Z'), new Date('2026-11-10T12:00:00Z'))
  const delta = await insertAgent(app.db, G.id, 'delta', 'discovered', at, null)
  await insertAgent(app.db, G.id, 'eps', 'active', at, null)
  await logDecisions(app.db, G.id, [
    { at: '2026-11-20T01:00:00Z', agent: 'alpha', agentId: alpha },
    { at: '2026-11-21T01:00:00Z', agent: 'alpha', agentId: alpha },
    { at: '2026-11-22T11:00:00Z', agent: 'alpha', agentId: alpha, decision: 'deny' },
    { at: '2026-11-21T09:00:00Z', agent: 'beta', agentId: beta },
    { at: '2026-11-10T12:00:00Z', agent: 'gamma', agentId: gamma },
  ])
  const { status, body } = await get(`/reports/agents?${WINDOW}`, G.keys.viewer!)
  t.equal(status, 200)
  t.same(body, {
    from: '2026-11-20T00:00:00.000Z',
    to: '2026-11-22T12:00:00.000Z',
    active: 2,
    agents: [
      { agent_id: alpha, handle: 'alpha', status: 'active', last_seen_at: '2026-11-22T11:00:00.000Z', decisions: 3 },
      { agent_id: beta, handle: 'beta', status: 'discovered', last_seen_at: '2026-11-21T09:00:00.000Z', decisions: 1 },
    ],
    gone: [
      { agent_id: gamma, handle: 'gamma', status: 'discovered', created_at: '2026-11-10T00:00:00.000Z', last_seen_at: '2026-11-10T12:00:00.000Z' },
      { agent_id: delta, handle: 'delta', status: 'discovered', created_at: '2026-11-22T12:00:00.000Z', last_seen_at: null },
    ],
  })
  const denials = await get(`/reports/denials?${WINDOW}`, G.keys.viewer!)
  t.same(denials.body.agents, [{ agent: 'alpha', agent_id: alpha, count: 1 }])
})

t.test('leads: per day, source and list, duplicates refused; only the leads organization reads them', async (t) => {
  const post = (path: string, json: unknown) => app.request(path, { method: 'POST', json })
  t.equal((await post('/newsletter', { email: 'one@example.com', source: 'spring' })).status, 200)
  t.equal((await post('/newsletter', { email: 'two@example.com', source: 'spring' })).status, 200)
  t.equal((await post('/newsletter', { email: 'ONE@example.com ' })).status, 409)
  t.equal((await post('/demo-request', { email: 'three@example.com', first_name: 'Ada', last_name: 'L', company: 'Co', linkedin: 'https://linkedin.com/in/ada' })).status, 200)
  app.clock.advance(60_000)
  // The seeded organizations share a creation instant: the leads belong to the first by id.
  const [holds, not] = (await findOldestOrganizationId(app.db)) === vars.ORG_A ? ['A', 'B'] : ['B', 'A']
  const { status, body } = await get('/reports/leads', vars[`OWNER_KEY_${holds}`]!)
  t.equal(status, 200)
  t.match(body, { from: '2026-11-15T12:01:00.000Z', to: '2026-11-22T12:01:00.000Z', tz: 'UTC', bucket: 'day', total: 3, duplicates_refused: 1 })
  t.equal(body.per_day.length, 8)
  t.same(body.per_day.at(-1), { t: '2026-11-22T00:00:00.000Z', count: 3 })
  t.same(body.per_source, [
    { source: 'spring', count: 2 },
    { source: null, count: 1 },
  ])
  t.same(body.per_list, [
    { list: 'demo-requests', count: 1 },
    { list: 'newsletter', count: 2 },
  ])
  const before = await get('/reports/leads?from=2026-11-01T00:00:00Z&to=2026-11-22T11:00:00Z', vars[`ADMIN_KEY_${holds}`]!)
  t.match(before.body, { total: 0, duplicates_refused: 0 })
  const refused: [string, string][] = [
    [vars[`VIEWER_KEY_${holds}`]!, "This credential's role (viewer) lacks the members:manage permission"],
    [vars[`OWNER_KEY_${not}`]!, 'Leads belong to the installation: only Owners and Admins of the organization that holds them (LEADS_ORGANIZATION_ID) may read them'],
  ]
  for (const [token, error] of refused) {
    const res = await get('/reports/leads', token)
    t.equal(res.status, 403)
    t.same(res.body, { status: 'Forbidden', error })
  }
})

t.test("a key bound to an agent reads no report (the organization's activity is not its to see)", async (t) => {
  const made = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'report-reader' } })
  const agent = await jsonOf(made)
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: { name: 'bot key' } }))
  for (const path of ['/reports/decisions', '/reports/agents', '/reports/leads']) {
    const res = await get(path, key.api_key)
    t.equal(res.status, 403, path)
    t.same(res.body, { status: 'Forbidden', error: 'This key is bound to an agent: it may only ask decisions for its agent and read its own decisions and capabilities' })
  }
})
