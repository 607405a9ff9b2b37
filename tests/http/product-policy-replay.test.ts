// POST /policies/replay: logged decisions (seeded straight into the decisions table) decided again
// against drafts; exact counts and samples, the window and limit, paging past one read, errors,
// roles and tenant isolation.
import { sql } from 'kysely'
import t from 'tap'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const B = vars.ORG_B!

interface Logged {
  at: string
  agent?: string
  agentId?: string
  action: string
  resource?: string
  args?: Record<string, unknown>
  decision: 'allow' | 'deny' | 'require_approval'
  reasons?: unknown[]
}

let counter = 0
/** Inserts logged decisions for an organization; returns their ids in the given order. */
async function log(target: ProductApp, organizationId: string, rows: Logged[]): Promise<string[]> {
  const values = rows.map((row) => {
    counter++
    const id = `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`
    return {
      decision_id: id,
      organization_id: organizationId,
      agent_id: row.agentId ?? '11111111-1111-4111-8111-111111111111',
      agent_handle: row.agent ?? 'support-bot',
      action: row.action,
      resource: row.resource ?? '',
      args: JSON.stringify(row.args ?? {}),
      context: JSON.stringify({}),
      args_sha256: '0'.repeat(64),
      decision: row.decision,
      policy_decision: row.decision,
      reasons: JSON.stringify(row.reasons ?? [{ rule: 'default_decision' }]),
      monitor: JSON.stringify({}),
      errors: JSON.stringify([]),
      approval_id: null,
      ruleset_revision: 1,
      requested_by: 'key:test',
      evaluated_at: new Date(row.at),
    }
  })
  for (let i = 0; i < values.length; i += 1000) await target.db.insertInto('decisions').values(values.slice(i, i + 1000)).execute()
  return values.map((value) => value.decision_id)
}

const ids = await log(app, A, [
  { at: '2026-11-01T10:00:00Z', action: 'payments.refund', args: { amount: 10 }, decision: 'require_approval' },
  { at: '2026-11-01T11:00:00Z', action: 'payments.refund', args: { amount: 20 }, decision: 'require_approval' },
  { at: '2026-11-01T12:00:00Z', action: 'payments.refund', args: { amount: 30 }, decision: 'require_approval' },
  { at: '2026-11-02T10:00:00Z', action: 'email.send', resource: 'mail/1', args: { external: false }, decision: 'deny' },
  { at: '2026-11-02T11:00:00Z', action: 'email.send', resource: 'mail/2', args: { external: true }, decision: 'deny' },
  { at: '2026-11-02T12:00:00Z', action: 'email.send', args: { external: false }, decision: 'deny', agent: 'frozen-bot', reasons: [{ rule: 'agent_suspended' }] },
  { at: '2026-11-03T10:00:00Z', action: 'files.read', resource: 'doc/7', decision: 'allow' },
])
// Another organization's log, which no replay of A may count.
await log(app, B, [{ at: '2026-11-02T10:00:00Z', action: 'email.send', args: { external: false }, decision: 'deny' }])

const emailDraft = { name: 'Internal email allowed', effect: 'allow', actions: ['email.send'], condition: 'args.external == false' }

async function replay(body: unknown, token = vars.MANAGER_KEY_A): Promise<Response> {
  return app.call('POST', '/policies/replay', { token, json: body })
}

t.test('happy path', async (t) => {
  t.test('a new draft: exact counts, and a sample of the changed decisions, newest first', async (t) => {
    const res = await replay({ policies: [emailDraft] })
    t.equal(res.status, 200)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.same(await jsonOf(res), {
      evaluated: 7,
      changed: { 'allow→deny': 1, 'deny→allow': 1 },
      sample: [
        {
          decision_id: ids[6],
          evaluated_at: '2026-11-03T10:00:00.000Z',
          agent: 'support-bot',
          action: 'files.read',
          resource: 'doc/7',
          from: 'allow',
          to: 'deny',
          reasons: [{ rule: 'default_decision' }],
        },
        {
          decision_id: ids[3],
          evaluated_at: '2026-11-02T10:00:00.000Z',
          agent: 'support-bot',
          action: 'email.send',
          resource: 'mail/1',
          from: 'deny',
          to: 'allow',
          reasons: [{ policy_id: 'draft:0', version: 1, name: 'Internal email allowed', effect: 'allow', mode: 'enforce' }],
        },
      ],
    })
  })

  t.test('a draft with policy_id stands in for that stored policy, as its next version', async (t) => {
    const res = await replay({ policies: [{ policy_id: vars.POLICY_A, name: 'Payments denied', effect: 'deny', actions: ['payments.*'] }] })
    const body = await jsonOf(res)
    t.equal(body.evaluated, 7)
    t.same(body.changed, { 'require_approval→deny': 3, 'allow→deny': 1 })
    t.same(body.sample.map((s: any) => s.decision_id), [ids[6], ids[2], ids[1], ids[0]])
    t.same(body.sample[1].reasons, [{ policy_id: vars.POLICY_A, version: 2, name: 'Payments denied', effect: 'deny', mode: 'enforce' }])
    // Taking the stored policy out (enabled: false) leaves those to the default decision, deny.
    const off = await jsonOf(await replay({ policies: [{ policy_id: vars.POLICY_A, name: 'off', effect: 'require_approval', actions: ['payments.*'], enabled: false }] }))
    t.same(off.changed, { 'require_approval→deny': 3, 'allow→deny': 1 })
    t.same(off.sample[1].reasons, [{ rule: 'default_decision' }])
  })

  t.test('from (inclusive), to (exclusive) and limit choose the newest decisions in the window', async (t) => {
    const window = await jsonOf(await replay({ from: '2026-11-02T10:00:00Z', to: '2026-11-03T10:00:00Z', policies: [emailDraft] }))
    t.same(window, { evaluated: 3, changed: { 'deny→allow': 1 }, sample: [window.sample[0]] })
    t.equal(window.sample[0].decision_id, ids[3])
    const limited = await jsonOf(await replay({ limit: 2, policies: [emailDraft] }))
    t.same([limited.evaluated, limited.changed], [2, { 'allow→deny': 1 }], 'the two newest: files.read and the suspended agent')
    const empty = await jsonOf(await replay({ from: '2030-01-01T00:00:00Z', policies: [emailDraft] }))
    t.same(empty, { evaluated: 0, changed: {}, sample: [] })
  })

  t.test('a suspended agent stays denied; the agent labels are read for conditions', async (t) => {
    await app.db
      .insertInto('agents')
      .values({ agent_id: '11111111-1111-4111-8111-111111111111', organization_id: A, handle: 'support-bot', labels: JSON.stringify({ team: 'support' }), status: 'active', created_at: new Date(app.clock.now), updated_at: new Date(app.clock.now) })
      .execute()
    const body = await jsonOf(await replay({ policies: [{ name: 'Support may email', effect: 'allow', actions: ['email.send'], condition: 'agent.labels["team"] == "support"' }] }))
    // Both support-bot emails are now allowed; frozen-bot's (suspended when logged) stays denied.
    t.same(body.changed, { 'deny→allow': 2, 'allow→deny': 1 })
    t.notOk(body.sample.some((s: any) => s.agent === 'frozen-bot'))
  })

  t.test('nothing is written: the policies and the revision are as before', async (t) => {
    const before = await jsonOf(await app.call('GET', '/organization', { token: vars.VIEWER_KEY_A }))
    await replay({ policies: [emailDraft] })
    t.same(await jsonOf(await app.call('GET', '/organization', { token: vars.VIEWER_KEY_A })), before)
    const list = await jsonOf(await app.call('GET', `/policies?organization_id=${A}`, { token: vars.VIEWER_KEY_A }))
    t.same(list.policies.map((p: any) => p.policy_id), [vars.POLICY_A])
  })

  t.test('more decisions than one read: every one is evaluated once', async (t) => {
    const big = await productApp(t)
    const base = Date.parse('2026-10-01T00:00:00Z')
    // Many share an instant, so the keyset must order by id within one evaluated_at.
    await log(big, big.vars.ORG_A!, Array.from({ length: 5003 }, (_, i) => ({ at: new Date(base + Math.floor(i / 3) * 1000).toISOString(), action: i % 2 ? 'email.send' : 'files.read', args: { external: i % 4 === 1 }, decision: 'deny' as const })))
    const res = await big.call('POST', '/policies/replay', { token: big.vars.MANAGER_KEY_A, json: { limit: 100000, policies: [emailDraft] } })
    const body = await jsonOf(res)
    t.equal(body.evaluated, 5003)
    // Odd i send email; those with i % 4 === 3 (3, 7, …, 4999) are internal: 1250 of them.
    t.same(body.changed, { 'deny→allow': 1250 })
    t.equal(body.sample.length, 20)
    t.equal(new Set(body.sample.map((s: any) => s.decision_id)).size, 20)
    const limited = await jsonOf(await big.call('POST', '/policies/replay', { token: big.vars.MANAGER_KEY_A, json: { limit: 5001, policies: [emailDraft] } }))
    t.equal(limited.evaluated, 5001)
    // Microseconds apart, across a read boundary: the position is kept to the microsecond.
    await sql`
      insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256,
        decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
      select gen_random_uuid(), ${big.vars.ORG_B}, gen_random_uuid(), 'bot', 'email.send', '', jsonb_build_object('external', n % 2 = 0), '{}'::jsonb,
        repeat('0', 64), 'deny', 'deny', '[{"rule":"default_decision"}]'::jsonb, '{}'::jsonb, '[]'::jsonb, null, 1, 'key:test',
        timestamptz '2026-10-01 00:00:00+00' + n * interval '1 microsecond'
      from generate_series(1, 5003) as n`.execute(big.db)
    const micro = await jsonOf(await big.call('POST', '/policies/replay', { token: big.vars.OWNER_KEY_B, json: { policies: [emailDraft] } }))
    t.equal(micro.evaluated, 5003)
    // Odd n are internal: 2502 of them, each counted once.
    t.same(micro.changed, { 'deny→allow': 2502 })
  })
})

t.test('errors', async (t) => {
  const invalid: Array<[string, unknown, string]> = [
    ['no policies', {}, 'Field policies is required'],
    ['no drafts', { policies: [] }, 'Field policies must hold at least one draft'],
    ['policies not a list', { policies: {} }, 'Field policies must be an array of draft policies'],
    ['a draft condition that does not compile', { policies: [emailDraft, { ...emailDraft, condition: 'args.x ==' }] }, 'Field condition does not compile (line 1, column 10): Unexpected token: EOF (at policies.1.condition)'],
    ['a draft without actions', { policies: [{ name: 'x', effect: 'deny' }] }, 'Field actions is required (at policies.0.actions)'],
    ['a draft with a read-only field', { policies: [{ ...emailDraft, version: 3 }] }, 'Field version is read-only (at policies.0.version)'],
    ['a draft that is a list', { policies: [[]] }, 'A draft must be a JSON object (at policies.0)'],
    ['a draft with an unknown field', { policies: [{ ...emailDraft, priority: 1 }] }, 'Unknown field: priority (at policies.0.priority)'],
    ['a draft with the retired conditions', { policies: [emailDraft, { ...emailDraft, conditions: {} }] }, 'Field conditions was replaced by condition: a CEL expression (string) or null (at policies.1.conditions)'],
    ['a draft approval on an allow policy', { policies: [{ ...emailDraft, approval: { approvers_required: 2 } }] }, 'Draft 0: Field approval is only for require_approval policies'],
    ['a draft approval as a list', { policies: [{ ...emailDraft, effect: 'require_approval', approval: [] }] }, 'Field approval must be a JSON object or null (at policies.0.approval)'],
    ['a draft policy_id that is not a UUID', { policies: [{ ...emailDraft, policy_id: 'p1' }] }, 'Field policy_id must be a UUID (at policies.0.policy_id)'],
    ['two drafts for one policy', { policies: [{ ...emailDraft, policy_id: vars.POLICY_A }, { ...emailDraft, policy_id: vars.POLICY_A!.toUpperCase() }] }, 'Draft 1: policy_id names a policy another draft already replaces'],
    ['limit 0', { limit: 0, policies: [emailDraft] }, 'Field limit must be a whole number from 1 to 100000'],
    ['limit 100001', { limit: 100001, policies: [emailDraft] }, 'Field limit must be a whole number from 1 to 100000'],
    ['limit as text', { limit: '10', policies: [emailDraft] }, 'Field limit must be a whole number from 1 to 100000'],
    ['a bad from', { from: 'yesterday', policies: [emailDraft] }, 'Field from must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z'],
    ['from after to', { from: '2026-11-03T00:00:00Z', to: '2026-11-02T00:00:00Z', policies: [emailDraft] }, 'Field from must be earlier than to'],
    ['an unknown field', { policies: [emailDraft], dry_run: true }, 'Unknown field: dry_run'],
  ]
  for (const [name, body, message] of invalid) {
    t.test(`POST /policies/replay with ${name}: 400 "${message}"`, async (t) => {
      const res = await replay(body)
      t.equal(res.status, 400)
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    })
  }

  t.test('malformed bodies are 4xx JSON, never 500', async (t) => {
    for (const [body, status] of [['{', 400], ['[]', 400], ['{"policies":[{"name":"\\u0000"}]}', 400], ['{"policies":"' + 'x'.repeat(20_000) + '"}', 413]] as const) {
      const res = await app.call('POST', '/policies/replay', { token: vars.MANAGER_KEY_A, body, headers: { 'content-type': 'application/json' } })
      t.equal(res.status, status, body.slice(0, 20))
      t.same(Object.keys(await jsonOf(res)), ['status', 'error'])
    }
  })

  t.test('Managers and above replay; Members and Viewers get 403', async (t) => {
    for (const role of ['OWNER', 'ADMIN', 'MANAGER']) t.equal((await replay({ policies: [emailDraft] }, vars[`${role}_KEY_A`])).status, 200, role)
    for (const role of ['member', 'viewer']) {
      const res = await replay({ policies: [emailDraft] }, vars[`${role.toUpperCase()}_KEY_A`])
      t.equal(res.status, 403)
      t.same(await jsonOf(res), { status: 'Forbidden', error: `This credential's role (${role}) lacks the policies:write permission` })
    }
  })
})

t.test('security: tenant isolation', async (t) => {
  t.test("a draft naming another organization's policy answers exactly like a random id", async (t) => {
    const answers = await Promise.all([vars.POLICY_B, crypto.randomUUID()].map((id) => replay({ policies: [{ ...emailDraft, policy_id: id }] })))
    const texts = await Promise.all(answers.map((r) => r.text()))
    t.same(answers.map((r) => r.status), [404, 404])
    t.equal(texts[0], texts[1])
    t.same(JSON.parse(texts[0]!), { status: 'Not Found', error: 'Policy not found' })
  })

  t.test("each organization replays only its own log", async (t) => {
    const b = await jsonOf(await replay({ policies: [emailDraft] }, vars.OWNER_KEY_B))
    t.same(b.evaluated, 1)
    t.same(b.changed, { 'deny→allow': 1 })
  })
})
