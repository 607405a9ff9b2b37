// The audit log: every change writes its event in the same transaction (right type, actor and
// target), a failure after the change rolls both back, no secret ever lands in an event, and
// GET /audit (Admin+, isolated per organization, filters, cursor pages, strict query).
import t from 'tap'
import { sql } from 'kysely'
import { expireDue } from '../../storage/approvals.ts'
import { createTestApp } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const B = vars.ORG_B!

interface EventRow {
  event_id: number
  organization_id: string
  actor_type: string
  actor_id: string | null
  type: string
  target_type: string
  target_id: string | null
  data: Record<string, unknown>
  request_id: string | null
}

async function lastId(): Promise<number> {
  const row = await app.db.selectFrom('audit_events').select((eb) => eb.fn.max('event_id').as('n')).executeTakeFirst()
  return Number(row?.n ?? 0)
}

async function eventsAfter(id: number): Promise<EventRow[]> {
  const rows = await app.db.selectFrom('audit_events').selectAll().where('event_id', '>', id).orderBy('event_id').execute()
  return rows.map((row) => ({ ...(row as unknown as EventRow), event_id: Number(row.event_id), data: typeof row.data === 'string' ? JSON.parse(row.data) : (row.data as Record<string, unknown>) }))
}

async function call(method: string, path: string, token: string | undefined, json?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await app.call(method, path, { token, json, headers })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text) }
}

const PASSWORD = 'a long enough password'
/** Every secret this test sees: none may appear in any event's data. */
const secrets: string[] = [PASSWORD, vars.USER_PASSWORD_A!, vars.OWNER_KEY_A!, vars.ADMIN_KEY_A!, vars.MEMBER_KEY_A!]

async function login(email: string, password: string): Promise<{ access_token: string; refresh_token: string }> {
  const answer = await call('POST', '/auth/login', undefined, { email, password })
  if (answer.status !== 200) throw new Error(`login ${email}: ${answer.status}`)
  secrets.push(answer.body.access_token, answer.body.refresh_token)
  return answer.body
}

const ownerUser = await app.db.selectFrom('users').select('id').where('email', '=', vars.USER_EMAIL_A!).executeTakeFirstOrThrow()
const ownerSession = await login(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)
const KEY = (role: string) => ({ type: 'key', id: vars[`${role}_KEY_ID_A`]! })
const USER = { type: 'user', id: ownerUser.id }
const SYSTEM = { type: 'system', id: null }

// State the cases share, filled in as they run (the table runs in order).
const s: Record<string, any> = {}

interface Case {
  name: string
  run: () => Promise<unknown>
  /** The events the change must write, in order. */
  expect: () => { type: string; actor: { type: string; id: string | null }; target: { type: string; id?: string | null }; organization?: string; data?: Record<string, unknown>; requestId?: null }[]
}

const cases: Case[] = [
  {
    name: 'create a policy',
    run: async () => {
      const answer = await call('POST', `/policies?organization_id=${A}`, vars.OWNER_KEY_A, { name: 'audit me', effect: 'deny', actions: ['files.delete'] })
      s.policy = answer.body
      return answer.status === 201
    },
    expect: () => [{ type: 'policy.created', actor: KEY('OWNER'), target: { type: 'policy', id: s.policy.policy_id }, data: { policy_id: s.policy.policy_id, version: 1, name: 'audit me', effect: 'deny' } }],
  },
  {
    name: 'change a policy',
    run: async () => (await call('PATCH', `/policies/${s.policy.policy_id}`, ownerSession.access_token, { description: 'now described' })).status === 200,
    expect: () => [{ type: 'policy.updated', actor: USER, target: { type: 'policy', id: s.policy.policy_id }, data: { version: 2, changed: ['description'] } }],
  },
  {
    name: 'roll a policy back',
    run: async () => (await call('POST', `/policies/${s.policy.policy_id}/rollback`, vars.MANAGER_KEY_A, { version: 1 })).status === 200,
    expect: () => [{ type: 'policy.rolled_back', actor: KEY('MANAGER'), target: { type: 'policy', id: s.policy.policy_id }, data: { version: 3, from_version: 2, to_content_of_version: 1 } }],
  },
  {
    name: 'archive a policy',
    run: async () => (await call('DELETE', `/policies/${s.policy.policy_id}`, vars.MANAGER_KEY_A)).status === 204,
    expect: () => [{ type: 'policy.archived', actor: KEY('MANAGER'), target: { type: 'policy', id: s.policy.policy_id }, data: { version: 4 } }],
  },
  {
    name: 'create an agent',
    run: async () => {
      const answer = await call('POST', '/agents', vars.MANAGER_KEY_A, { handle: 'audited-bot', display_name: 'Audited' })
      s.agent = answer.body
      return answer.status === 201
    },
    expect: () => [{ type: 'agent.created', actor: KEY('MANAGER'), target: { type: 'agent', id: s.agent.agent_id }, data: { handle: 'audited-bot', status: 'active' } }],
  },
  {
    name: 'change an agent',
    run: async () => (await call('PATCH', `/agents/${s.agent.agent_id}`, vars.MANAGER_KEY_A, { display_name: 'Renamed' })).status === 200,
    expect: () => [{ type: 'agent.updated', actor: KEY('MANAGER'), target: { type: 'agent', id: s.agent.agent_id }, data: { changed: ['display_name'], changes: { display_name: 'Renamed' } } }],
  },
  {
    name: 'suspend an agent',
    run: async () => (await call('PATCH', `/agents/${s.agent.agent_id}`, vars.MANAGER_KEY_A, { status: 'suspended' })).status === 200,
    expect: () => [{ type: 'agent.suspended', actor: KEY('MANAGER'), target: { type: 'agent', id: s.agent.agent_id }, data: { status: 'suspended' } }],
  },
  {
    name: 'a decision discovers an agent',
    run: async () => {
      const answer = await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'never-seen', action: 'files.read' }, { 'x-request-id': 'discover-1' })
      s.discovered = await app.db.selectFrom('agents').select('agent_id').where('organization_id', '=', A).where('handle', '=', 'never-seen').executeTakeFirstOrThrow()
      return answer.status === 200
    },
    expect: () => [{ type: 'agent.discovered', actor: SYSTEM, target: { type: 'agent', id: s.discovered.agent_id }, data: { handle: 'never-seen', status: 'discovered' } }],
  },
  {
    name: 'delete an agent',
    run: async () => (await call('DELETE', `/agents/${s.agent.agent_id}`, vars.MANAGER_KEY_A)).status === 204,
    expect: () => [{ type: 'agent.deleted', actor: KEY('MANAGER'), target: { type: 'agent', id: s.agent.agent_id }, data: { handle: 'audited-bot' } }],
  },
  {
    name: 'create a key',
    run: async () => {
      const answer = await call('POST', '/keys', vars.ADMIN_KEY_A, { name: 'audited key', role: 'viewer' })
      s.key = answer.body
      secrets.push(answer.body.api_key)
      return answer.status === 201
    },
    expect: () => [{ type: 'key.created', actor: KEY('ADMIN'), target: { type: 'key', id: s.key.key_id ?? s.key.id }, data: { name: 'audited key', role: 'viewer', scopes: ['policies:read', 'agents:read', 'decisions:read'] } }],
  },
  {
    name: 'rotate a key',
    run: async () => {
      const answer = await call('POST', `/keys/${s.key.key_id ?? s.key.id}/rotate`, vars.ADMIN_KEY_A, {})
      s.rotated = answer.body
      secrets.push(answer.body.api_key)
      return answer.status === 201
    },
    expect: () => [{ type: 'key.rotated', actor: KEY('ADMIN'), target: { type: 'key', id: s.key.key_id ?? s.key.id }, data: { new_key_id: s.rotated.key_id ?? s.rotated.id } }],
  },
  {
    name: 'revoke a key',
    run: async () => (await call('DELETE', `/keys/${s.rotated.key_id ?? s.rotated.id}`, vars.ADMIN_KEY_A)).status === 204,
    expect: () => [{ type: 'key.revoked', actor: KEY('ADMIN'), target: { type: 'key', id: s.rotated.key_id ?? s.rotated.id }, data: { role: 'viewer' } }],
  },
  {
    name: 'invite someone',
    run: async () => {
      const answer = await call('POST', '/invitations', ownerSession.access_token, { email: 'joiner@example.com', role: 'member' })
      s.invitation = answer.body
      secrets.push(answer.body.token)
      return answer.status === 201
    },
    expect: () => [{ type: 'invitation.created', actor: USER, target: { type: 'invitation', id: s.invitation.invitation_id }, data: { email: 'joiner@example.com', role: 'member' } }],
  },
  {
    name: 'revoke an invitation',
    run: async () => (await call('DELETE', `/invitations/${s.invitation.invitation_id}`, vars.ADMIN_KEY_A)).status === 204,
    expect: () => [{ type: 'invitation.revoked', actor: KEY('ADMIN'), target: { type: 'invitation', id: s.invitation.invitation_id } }],
  },
  {
    name: 'accept an invitation',
    run: async () => {
      const invited = await call('POST', '/invitations', vars.ADMIN_KEY_A, { email: 'joiner@example.com', role: 'member' })
      secrets.push(invited.body.token)
      s.invitation2 = invited.body
      const accepted = await call('POST', '/invitations/accept', undefined, { token: invited.body.token, password: PASSWORD })
      s.joiner = accepted.body
      return accepted.status === 201
    },
    expect: () => [
      { type: 'invitation.created', actor: KEY('ADMIN'), target: { type: 'invitation', id: s.invitation2.invitation_id } },
      { type: 'member.added', actor: { type: 'user', id: s.joiner.user_id }, target: { type: 'user', id: s.joiner.user_id }, data: { role: 'member', invitation_id: s.invitation2.invitation_id } },
    ],
  },
  {
    name: "change a member's role",
    run: async () => (await call('PATCH', `/members/${s.joiner.user_id}`, ownerSession.access_token, { role: 'manager' })).status === 200,
    expect: () => [{ type: 'member.changed', actor: USER, target: { type: 'user', id: s.joiner.user_id }, data: { role_from: 'member', role: 'manager' } }],
  },
  {
    name: 'sign in',
    run: async () => Boolean(await login('joiner@example.com', PASSWORD)),
    expect: () => [{ type: 'login.succeeded', actor: { type: 'user', id: s.joiner.user_id }, target: { type: 'user', id: s.joiner.user_id }, data: { method: 'password', role: 'manager' } }],
  },
  {
    name: 'a wrong password',
    run: async () => (await call('POST', '/auth/login', undefined, { email: 'joiner@example.com', password: 'not the password at all' })).status === 400,
    expect: () => [{ type: 'login.failed', actor: { type: 'user', id: s.joiner.user_id }, target: { type: 'user', id: s.joiner.user_id }, data: { method: 'password', reason: 'password' } }],
  },
  {
    name: 'an unknown email records nothing',
    run: async () => (await call('POST', '/auth/login', undefined, { email: 'nobody-at-all@example.com', password: 'not the password at all' })).status === 400,
    expect: () => [],
  },
  {
    name: 'remove a member',
    run: async () => (await call('DELETE', `/members/${s.joiner.user_id}`, vars.ADMIN_KEY_A)).status === 204,
    expect: () => [{ type: 'member.removed', actor: KEY('ADMIN'), target: { type: 'user', id: s.joiner.user_id }, data: { role: 'manager' } }],
  },
  {
    name: 'a decision asks for approval',
    run: async () => {
      s.payer = (await call('POST', '/agents', vars.MANAGER_KEY_A, { handle: 'payer' })).body
      const answer = await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'payer', action: 'payments.refund', resource: 'order/9', args: { amount: 5 } })
      s.ask = answer.body
      return answer.status === 200 && answer.body.decision === 'require_approval'
    },
    expect: () => [
      { type: 'agent.created', actor: KEY('MANAGER'), target: { type: 'agent', id: s.payer.agent_id } },
      {
        type: 'approval.requested',
        actor: KEY('MEMBER'),
        target: { type: 'approval', id: s.ask.approval.approval_id },
        data: {
          approval_id: s.ask.approval.approval_id,
          agent_handle: 'payer',
          action: 'payments.refund',
          resource: 'order/9',
          args: { amount: 5 },
          args_sha256: s.ask.args_sha256,
          policies: [{ policy_id: vars.POLICY_A, version: 1 }],
          expires_at: s.ask.approval.expires_at,
        },
      },
    ],
  },
  {
    name: 'approve',
    run: async () => (await call('POST', `/approvals/${s.ask.approval.approval_id}/approve`, ownerSession.access_token, { note: 'fine' })).status === 200,
    expect: () => [{ type: 'approval.approved', actor: USER, target: { type: 'approval', id: s.ask.approval.approval_id }, data: { note: 'fine' } }],
  },
  {
    name: 'use the approval',
    run: async () => {
      const answer = await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'payer', action: 'payments.refund', resource: 'order/9', args: { amount: 5 }, approval_id: s.ask.approval.approval_id })
      s.used = answer.body
      return answer.body.decision === 'allow'
    },
    expect: () => [{ type: 'approval.consumed', actor: KEY('MEMBER'), target: { type: 'approval', id: s.ask.approval.approval_id }, data: { decision_id: s.used.decision_id } }],
  },
  {
    name: 'deny',
    run: async () => {
      s.ask2 = (await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'payer', action: 'payments.refund', resource: 'order/10' })).body
      return (await call('POST', `/approvals/${s.ask2.approval.approval_id}/deny`, ownerSession.access_token, {})).status === 200
    },
    expect: () => [
      { type: 'approval.requested', actor: KEY('MEMBER'), target: { type: 'approval', id: s.ask2.approval.approval_id } },
      { type: 'approval.denied', actor: USER, target: { type: 'approval', id: s.ask2.approval.approval_id } },
    ],
  },
  {
    name: 'cancel',
    run: async () => {
      s.ask3 = (await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'payer', action: 'payments.refund', resource: 'order/11' })).body
      return (await call('POST', `/approvals/${s.ask3.approval.approval_id}/cancel`, vars.ADMIN_KEY_A, {})).status === 200
    },
    expect: () => [
      { type: 'approval.requested', actor: KEY('MEMBER'), target: { type: 'approval', id: s.ask3.approval.approval_id } },
      { type: 'approval.cancelled', actor: KEY('ADMIN'), target: { type: 'approval', id: s.ask3.approval.approval_id } },
    ],
  },
  {
    name: 'expire',
    run: async () => {
      s.ask4 = (await call('POST', '/decisions', vars.MEMBER_KEY_A, { agent: 'payer', action: 'payments.refund', resource: 'order/12' })).body
      app.clock.advance(901_000)
      return (await expireDue(app.db, new Date(app.clock.now))).includes(s.ask4.approval.approval_id)
    },
    expect: () => [
      { type: 'approval.requested', actor: KEY('MEMBER'), target: { type: 'approval', id: s.ask4.approval.approval_id } },
      // The sweeper acts outside any request.
      { type: 'approval.expired', actor: SYSTEM, target: { type: 'approval', id: s.ask4.approval.approval_id }, data: { was: 'pending' }, requestId: null },
    ],
  },
  {
    name: 'change the settings',
    run: async () => (await call('PATCH', '/organization', vars.OWNER_KEY_A, { unknown_agents: 'evaluate', audit_retention_days: 30 })).status === 200,
    expect: () => [{ type: 'settings.changed', actor: KEY('OWNER'), target: { type: 'organization', id: A }, data: { changed: ['unknown_agents', 'audit_retention_days'], changes: { unknown_agents: 'evaluate', audit_retention_days: 30 } } }],
  },
]

t.test('every change writes its event, in its organization, with actor, target and request id', async (t) => {
  for (const c of cases) {
    const before = await lastId()
    t.ok(await c.run(), `${c.name}: the change succeeded`)
    const events = await eventsAfter(before)
    const expected = c.expect()
    t.equal(events.length, expected.length, `${c.name}: ${expected.length} event(s): ${events.map((e) => e.type).join(', ')}`)
    expected.forEach((want, index) => {
      const got = events[index]
      if (!got) return
      t.equal(got.type, want.type, `${c.name}: type`)
      t.equal(got.organization_id, want.organization ?? A, `${c.name}: organization`)
      t.same({ type: got.actor_type, id: got.actor_id }, want.actor, `${c.name}: actor`)
      t.equal(got.target_type, want.target.type, `${c.name}: target type`)
      if (want.target.id !== undefined) t.equal(got.target_id, want.target.id, `${c.name}: target id`)
      if (want.data) t.match(got.data, want.data, `${c.name}: data`)
      if (want.requestId === null) t.equal(got.request_id, null, `${c.name}: no request`)
      else t.type(got.request_id, 'string', `${c.name}: the request id`)
    })
  }
  // The request id is the one the client sent when it sent one.
  const discovered = await app.db.selectFrom('audit_events').select('request_id').where('type', '=', 'agent.discovered').where('target_id', '=', s.discovered.agent_id).executeTakeFirstOrThrow()
  t.equal(discovered.request_id, 'discover-1')
})

t.test('a lead is recorded in the organization that holds the leads, with the email domain only', async (t) => {
  const leads = await createTestApp(t, { database: app.database, clock: app.clock, env: { LEADS_ORGANIZATION_ID: A.toUpperCase() } })
  const before = await lastId()
  const res = await leads.request('/demo-request', { method: 'POST', json: { first_name: 'Ada', last_name: 'L', email: 'Ada@Example.ORG', company: 'C', linkedin: 'https://www.linkedin.com/in/ada' } })
  t.equal(res.status, 200)
  const lead = await app.db.selectFrom('demo_requests').select('id').where('email_normalized', '=', 'ada@example.org').executeTakeFirstOrThrow()
  const events = await eventsAfter(before)
  t.equal(events.length, 1)
  t.match(events[0], { organization_id: A, actor_type: 'system', actor_id: null, type: 'lead.created', target_type: 'lead', target_id: `demo:${lead.id}` })
  t.same(events[0]!.data, { lead_id: Number(lead.id), list: 'demo', form: '/demo-request', email_domain: 'example.org' })
  t.notOk(JSON.stringify(events[0]).includes('Ada'), 'no name and no local part')
  // A duplicate stores nothing and records nothing; without the setting nothing is recorded.
  t.equal((await leads.request('/demo-request', { method: 'POST', json: { first_name: 'Ada', last_name: 'L', email: 'ada@example.org', company: 'C', linkedin: 'https://www.linkedin.com/in/ada' } })).status, 409)
  t.equal((await app.request('/newsletter', { method: 'POST', json: { email: 'plain@example.net' } })).status, 200)
  t.equal((await eventsAfter(before)).length, 1)
  const news = await leads.request('/waitlist', { method: 'POST', json: { email: 'wait@example.net' } })
  t.equal(news.status, 200)
  t.match((await eventsAfter(before))[1], { type: 'lead.created', data: { list: 'newsletter', form: '/waitlist', email_domain: 'example.net' } })
})

t.test('a failure after the change rolls the change back with its event, and answers a JSON error', async (t) => {
  await sql`create or replace function audit_refuse() returns trigger language plpgsql as $$ begin if new.type = 'policy.created' or new.type = 'key.created' then raise exception 'refused by test'; end if; return new; end $$`.execute(app.db)
  await sql`create trigger audit_refuse before insert on audit_events for each row execute function audit_refuse()`.execute(app.db)
  t.teardown(async () => {
    await sql`drop trigger if exists audit_refuse on audit_events`.execute(app.db)
  })
  const policies = async () => Number((await app.db.selectFrom('policies').select((eb) => eb.fn.countAll().as('n')).where('organization_id', '=', A).executeTakeFirstOrThrow()).n)
  const keys = async () => Number((await app.db.selectFrom('api_keys').select((eb) => eb.fn.countAll().as('n')).where('organization_id', '=', A).executeTakeFirstOrThrow()).n)
  const versions = async () => Number((await app.db.selectFrom('policy_versions').select((eb) => eb.fn.countAll().as('n')).where('organization_id', '=', A).executeTakeFirstOrThrow()).n)
  const [p0, k0, v0, e0] = [await policies(), await keys(), await versions(), await lastId()]
  const policy = await app.call('POST', `/policies?organization_id=${A}`, { token: vars.OWNER_KEY_A, json: { name: 'never', effect: 'deny', actions: ['x'] } })
  t.equal(policy.status, 500)
  t.same(await jsonOf(policy), { status: 'Internal Server Error', error: 'Internal server error' })
  const key = await app.call('POST', '/keys', { token: vars.ADMIN_KEY_A, json: { name: 'never', role: 'viewer' } })
  t.equal(key.status, 500)
  t.equal(key.headers.get('content-type')?.startsWith('application/json'), true)
  await key.text()
  t.equal(await policies(), p0, 'no policy')
  t.equal(await versions(), v0, 'no version')
  t.equal(await keys(), k0, 'no key')
  t.equal(await lastId(), e0, 'no event')
  // Other changes still go through.
  t.equal((await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, json: { name: 'Still works' } })).status, 200)
})

t.test('no secret, password or token appears in any event', async (t) => {
  // An agent key too.
  const agent = await jsonOf(await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'secretive' } }))
  const agentKey = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
  secrets.push(agentKey.api_key)
  // A decision whose args carry a secret-looking field: dropped from approval.requested.
  const asked = await jsonOf(await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, json: { agent: 'payer', action: 'payments.refund', args: { amount: 1, password: 'hunter2-in-args', api_key: 'stw_key_in_args' } } }))
  t.equal(asked.decision, 'require_approval')
  secrets.push('hunter2-in-args', 'stw_key_in_args')
  await login(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)
  const { rows } = await sql<{ text: string }>`select data::text as text from audit_events`.execute(app.db)
  t.ok(rows.length > 40, `${rows.length} events scanned`)
  t.ok(secrets.length >= 12, `${secrets.length} secrets known`)
  for (const secret of secrets) {
    const found = rows.filter((row) => row.text.includes(secret))
    t.equal(found.length, 0, `secret ${secret.slice(0, 10)}… appears in no event`)
  }
  for (const row of rows) t.notMatch(row.text, /"(password|secret|secret_hash|token|api_key|refresh_token|access_token)"\s*:/, 'no secret-named field')
})

t.test('GET /audit', async (t) => {
  const adminB = await jsonOf(await app.call('GET', '/audit?limit=100', { token: vars.ADMIN_KEY_B }))
  const session = await login(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)

  t.test('roles: Admin and Owner read; Manager, Member, Viewer and agent keys get 403', async (t) => {
    for (const [token, role] of [
      [vars.OWNER_KEY_A, null],
      [vars.ADMIN_KEY_A, null],
      [session.access_token, null],
      [vars.MANAGER_KEY_A, 'manager'],
      [vars.MEMBER_KEY_A, 'member'],
      [vars.VIEWER_KEY_A, 'viewer'],
    ] as const) {
      const res = await app.call('GET', '/audit', { token })
      t.equal(res.status, role === null ? 200 : 403)
      const body = await jsonOf(res)
      if (role !== null) t.same(body, { status: 'Forbidden', error: `This credential's role (${role}) lacks the audit:read permission` })
    }
    const agent = await jsonOf(await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'reader-bot' } }))
    const agentKey = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
    const refused = await app.call('GET', '/audit', { token: agentKey.api_key })
    t.equal(refused.status, 403)
    t.match(await jsonOf(refused), { error: /bound to an agent/ })
    const anonymous = await app.call('GET', '/audit')
    t.equal(anonymous.status, 401)
    await anonymous.text()
  })

  t.test('the answer: newest first, the published shape', async (t) => {
    const body = await jsonOf(await app.call('GET', '/audit?limit=100', { token: vars.ADMIN_KEY_A }))
    t.same(Object.keys(body), ['events', 'next_cursor'])
    const ids = body.events.map((e: any) => e.event_id)
    t.same(ids, [...ids].sort((a: number, b: number) => b - a), 'newest first')
    const created = body.events.find((e: any) => e.type === 'policy.created' && e.target.id === s.policy.policy_id)
    t.same(Object.keys(created), ['event_id', 'organization_id', 'occurred_at', 'actor', 'type', 'target', 'data', 'request_id'])
    t.match(created, { organization_id: A, actor: { type: 'key', id: vars.OWNER_KEY_ID_A }, target: { type: 'policy', id: s.policy.policy_id }, data: { name: 'audit me' } })
    t.type(created.event_id, 'number')
    t.equal(created.occurred_at, new Date(created.occurred_at).toISOString())
  })

  t.test("isolation: another organization's events are never visible", async (t) => {
    t.ok(adminB.events.length >= 1, 'B has its own events (its seeding)')
    t.ok(adminB.events.every((e: any) => e.organization_id === B))
    t.notOk(JSON.stringify(adminB).includes(s.policy.policy_id))
    const pageA = await jsonOf(await app.call('GET', '/audit?limit=1', { token: vars.ADMIN_KEY_A }))
    t.type(pageA.next_cursor, 'string')
    const foreign = await app.call('GET', `/audit?cursor=${pageA.next_cursor}`, { token: vars.ADMIN_KEY_B })
    const random = await app.call('GET', '/audit?cursor=WyIxMjMiLCIwMDAwMDAwMDAwMDAwMDAwIl0', { token: vars.ADMIN_KEY_B })
    t.equal(foreign.status, 400)
    t.equal(random.status, 400)
    const foreignBody = await jsonOf(foreign)
    t.same(foreignBody, { status: 'Bad Request', error: 'cursor is invalid; pass next_cursor from the previous page' })
    t.same(await jsonOf(random), foreignBody, "a foreign cursor answers like a made-up one")
  })

  t.test('cursor pages walk every event once', async (t) => {
    const all = await jsonOf(await app.call('GET', '/audit?limit=100', { token: vars.ADMIN_KEY_A }))
    t.ok(all.events.length > 20 && all.events.length < 100, `${all.events.length} events`)
    t.equal(all.next_cursor, null)
    const walked: number[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const page: any = await jsonOf(await app.call('GET', `/audit?limit=7${cursor ? `&cursor=${cursor}` : ''}`, { token: vars.ADMIN_KEY_A }))
      t.ok(page.events.length <= 7)
      walked.push(...page.events.map((e: any) => e.event_id))
      cursor = page.next_cursor
      pages++
    } while (cursor !== null && pages < 50)
    t.same(walked, all.events.map((e: any) => e.event_id))
    t.equal(pages, Math.ceil(all.events.length / 7))
    const defaults = await jsonOf(await app.call('GET', '/audit', { token: vars.ADMIN_KEY_A }))
    t.same(defaults.events.map((e: any) => e.event_id), all.events.slice(0, 50).map((e: any) => e.event_id), 'default page of 50')
  })

  t.test('filters: type (one, or a comma list), from and to', async (t) => {
    const one = await jsonOf(await app.call('GET', '/audit?type=policy.created&limit=100', { token: vars.ADMIN_KEY_A }))
    t.ok(one.events.length >= 2)
    t.ok(one.events.every((e: any) => e.type === 'policy.created'))
    const two = await jsonOf(await app.call('GET', '/audit?type=key.revoked,approval.expired&limit=100', { token: vars.ADMIN_KEY_A }))
    t.same([...new Set(two.events.map((e: any) => e.type))].sort(), ['approval.expired', 'key.revoked'])
    const all = (await jsonOf(await app.call('GET', '/audit?limit=100', { token: vars.ADMIN_KEY_A }))).events
    const at = all.map((e: any) => e.occurred_at).sort()
    const middle = at[Math.floor(at.length / 2)]
    const from = await jsonOf(await app.call('GET', `/audit?limit=100&from=${middle}`, { token: vars.ADMIN_KEY_A }))
    t.same(from.events.map((e: any) => e.event_id), all.filter((e: any) => e.occurred_at >= middle).map((e: any) => e.event_id))
    const to = await jsonOf(await app.call('GET', `/audit?limit=100&to=${middle}`, { token: vars.ADMIN_KEY_A }))
    t.same(to.events.map((e: any) => e.event_id), all.filter((e: any) => e.occurred_at < middle).map((e: any) => e.event_id))
    const offset = await jsonOf(await app.call('GET', `/audit?limit=100&from=${encodeURIComponent('2026-11-22T13:00:00+01:00')}`, { token: vars.ADMIN_KEY_A }))
    t.same(offset.events.length, all.length, 'an offset is understood')
  })

  const bad: [string, string, string][] = [
    ['an unknown type', 'type=policy.exploded', 'type must be one or more of'],
    ['an empty type', 'type=', 'type must be one or more of'],
    ['a type list with a blank', 'type=policy.created,,key.revoked', 'type must be one or more of'],
    ['type twice', 'type=policy.created&type=key.revoked', 'type may be given once; separate several types with commas'],
    ['a NUL in type', 'type=policy.created%00', 'type must be one or more of'],
    ['a date that is no date', 'from=yesterday', 'Field from must be an RFC 3339 date-time'],
    ['a month 13', 'from=2026-13-01T00:00:00Z', 'Field from'],
    ['February 30', 'to=2026-02-30T00:00:00Z', 'Field to names a date or time that does not exist'],
    ['a date without a zone', 'to=2026-01-01T00:00:00', 'Field to must be an RFC 3339 date-time'],
    ['from after to', 'from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', 'from must be before to'],
    ['limit 0', 'limit=0', 'limit must be a whole number from 1 to 100'],
    ['limit 101', 'limit=101', 'limit must be a whole number from 1 to 100'],
    ['limit as words', 'limit=ten', 'limit must be a whole number from 1 to 100'],
    ['a made-up cursor', 'cursor=abc', 'cursor is invalid; pass next_cursor from the previous page'],
    ['a huge cursor', `cursor=${'A'.repeat(5000)}`, 'cursor is invalid; pass next_cursor from the previous page'],
    ['a huge type', `type=${'policy.created,'.repeat(300)}policy.created`, 'type must be one or more of'],
  ]
  for (const [name, query, message] of bad) {
    t.test(`${name}: 400`, async (t) => {
      const res = await app.call('GET', `/audit?${query}`, { token: vars.ADMIN_KEY_A })
      t.equal(res.status, 400)
      const body = await jsonOf(res)
      t.equal(body.status, 'Bad Request')
      t.ok(body.error.startsWith(message), body.error)
    })
  }

  t.test('an edited cursor of its own organization is refused too', async (t) => {
    const page = await jsonOf(await app.call('GET', '/audit?limit=1', { token: vars.ADMIN_KEY_A }))
    const [id, tag] = JSON.parse(Buffer.from(page.next_cursor, 'base64url').toString())
    const edited = Buffer.from(JSON.stringify([id, tag.replace(/^./, (c: string) => (c === '0' ? '1' : '0'))])).toString('base64url')
    const res = await app.call('GET', `/audit?cursor=${edited}`, { token: vars.ADMIN_KEY_A })
    t.equal(res.status, 400)
    await res.text()
  })
})
