// Approvals: created by a require_approval decision, voted on by signed-in people (roles, no
// self-approval, N distinct approvers, one deny decides), waited on, used once with the exact
// args, expired at read time and by the sweep, isolated per organization, durable across a
// handler restart, and (on PostgreSQL) woken across processes.
import t from 'tap'
import { expireDue } from '../../storage/approvals.ts'
import { decide } from '../support/governance-support.ts'
import { createApprovalHub } from '../../services/approvals.ts'
import type { Deps } from '../../services/deps.ts'
import { createTestApp, DATABASE_KIND, FakeClock, memoryLogger, testConfig } from '../support/helpers.ts'
import { inviteAndAccept, jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const PEOPLE_ONLY = 'Only a signed-in person (a session from a user login) may approve or deny; API keys, agent keys and tokens minted from keys may not'

async function login(target: ProductApp, email: string, password: string): Promise<string> {
  const res = await target.call('POST', '/auth/login', { json: { email, password } })
  if (res.status !== 200) throw new Error(`login ${email}: ${res.status}`)
  return (await jsonOf(res)).access_token
}

async function person(role: string, label: string): Promise<{ email: string; token: string; id: string }> {
  const email = `${label}-${crypto.randomUUID().slice(0, 8)}@example.com`
  await inviteAndAccept(app, vars.OWNER_KEY_A!, email, role, 'a long enough password')
  const user = await app.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()
  return { email, token: await login(app, email, 'a long enough password'), id: user.id }
}

const m1 = await person('manager', 'm1')
const m2 = await person('manager', 'm2')
const viewer = await person('viewer', 'viewer')
const agentRes = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'billing' } })
const billing = await jsonOf(agentRes)
const keyRes = await jsonOf(await app.call('POST', `/agents/${billing.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
const AGENT_KEY: string = keyRes.api_key
let foreignId = ''
const ARGS = { amount: 120, currency: 'EUR' }
const ASK = { agent: 'billing', action: 'payments.refund', resource: 'order/1', args: ARGS, context: {} }

async function ask(extra: Record<string, unknown> = {}, target: ProductApp = app): Promise<any> {
  const answer = await decide(target, vars.MEMBER_KEY_A!, { ...ASK, ...extra })
  if (answer.status !== 200) throw new Error(`decide: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body
}

async function vote(id: string, kind: 'approve' | 'deny', token: string, json: unknown = {}): Promise<{ status: number; body: any }> {
  const res = await app.call('POST', `/approvals/${id}/${kind}`, { token, json })
  return { status: res.status, body: await jsonOf(res) }
}

t.test('a require_approval decision creates a pending approval bound to the action', async (t) => {
  const answer = await ask()
  t.equal(answer.decision, 'require_approval')
  t.same(answer.approval, { approval_id: answer.approval.approval_id, status: 'pending', expires_at: new Date(app.clock.now + 900_000).toISOString() })
  const read = await app.call('GET', `/approvals/${answer.approval.approval_id}`, { token: vars.VIEWER_KEY_A })
  t.equal(read.status, 200)
  const body = await jsonOf(read)
  t.match(body, { approval_id: answer.approval.approval_id, status: 'pending', decision_id: answer.decision_id, agent: 'billing', action: 'payments.refund', resource: 'order/1', args: ARGS, args_sha256: answer.args_sha256, policies: [{ policy_id: vars.POLICY_A, version: 1 }], approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], votes: [], use_by: null })
  const logged = await jsonOf(await app.call('GET', `/decisions/${answer.decision_id}`, { token: vars.VIEWER_KEY_A }))
  t.equal(logged.approval_id, answer.approval.approval_id)
  const list = await jsonOf(await app.call('GET', '/approvals?status=pending', { token: vars.VIEWER_KEY_A }))
  t.ok(list.approvals.some((a: any) => a.approval_id === answer.approval.approval_id))
  t.equal(list.next_cursor, null)
})

t.test('only signed-in people with an approver role, never themselves, may vote', async (t) => {
  const { approval } = await ask({ context: { on_behalf_of: m1.email.toUpperCase() } })
  for (const token of [vars.ADMIN_KEY_A!, vars.OWNER_KEY_A!]) {
    t.same(await vote(approval.approval_id, 'approve', token), { status: 403, body: { status: 'Forbidden', error: PEOPLE_ONLY } })
  }
  t.equal((await vote(approval.approval_id, 'approve', AGENT_KEY)).status, 403, 'an agent key never votes')
  const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: vars.ADMIN_KEY_A } }))
  if (minted.access_token) t.equal((await vote(approval.approval_id, 'approve', minted.access_token)).status, 403, 'a session minted from a key is not a person')
  t.same(await vote(approval.approval_id, 'approve', viewer.token), { status: 403, body: { status: 'Forbidden', error: 'Your role (viewer) may not decide this approval; it needs one of: owner, admin, manager' } })
  t.same(await vote(approval.approval_id, 'approve', m1.token), { status: 403, body: { status: 'Forbidden', error: 'No self-approval: the action is on your behalf' } })
  await app.db.updateTable('agents').set({ owner_user_id: m2.id }).where('agent_id', '=', billing.agent_id).execute()
  t.same(await vote(approval.approval_id, 'deny', m2.token), { status: 403, body: { status: 'Forbidden', error: 'No self-approval: you own the agent that asks' } })
  await app.db.updateTable('agents').set({ owner_user_id: null }).where('agent_id', '=', billing.agent_id).execute()
  const still = await jsonOf(await app.call('GET', `/approvals/${approval.approval_id}`, { token: vars.VIEWER_KEY_A }))
  t.same([still.status, still.votes], ['pending', []], 'refused votes leave nothing behind')
})

t.test('N distinct approvers: a repeated approver counts once; then use once with the exact args', async (t) => {
  const { approval } = await ask()
  await app.db.updateTable('approvals').set({ approvers_required: 2 }).where('approval_id', '=', approval.approval_id).execute()
  const first = await vote(approval.approval_id, 'approve', m1.token, { note: 'ok by me' })
  t.equal(first.status, 200)
  t.match(first.body, { status: 'pending', votes: [{ user_id: m1.id, vote: 'approve', note: 'ok by me' }] })
  t.same(await vote(approval.approval_id, 'approve', m1.token), { status: 409, body: { status: 'Conflict', error: 'You have already voted on this approval; each person counts once' } })
  const pendingUse = await ask({ approval_id: approval.approval_id })
  t.same([pendingUse.decision, pendingUse.approval.approval_id, pendingUse.approval.status], ['require_approval', approval.approval_id, 'pending'], 'still pending: the same approval, no new one')
  t.equal(await app.db.selectFrom('approvals').select('approval_id').where('decision_id', '=', pendingUse.decision_id).executeTakeFirst(), undefined)
  const second = await vote(approval.approval_id, 'approve', m2.token)
  t.match(second.body, { status: 'approved', use_by: new Date(app.clock.now + 300_000).toISOString() })
  const late = await app.call('POST', `/approvals/${approval.approval_id}/deny`, { token: await login(app, vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!), json: {} })
  t.same([late.status, await jsonOf(late)], [409, { status: 'Conflict', error: 'This approval is no longer pending: it is approved' }])

  const mismatch = await ask({ approval_id: approval.approval_id, args: { amount: 9999, currency: 'EUR' } })
  t.same([mismatch.decision, mismatch.reasons], ['deny', [{ rule: 'approval_mismatch' }]])
  const used = await ask({ approval_id: approval.approval_id, args: { currency: 'EUR', amount: 120 } })
  t.same([used.decision, used.reasons, used.approval.status], ['allow', [{ rule: 'approval' }], 'consumed'])
  const logged = await jsonOf(await app.call('GET', `/decisions/${used.decision_id}`, { token: vars.VIEWER_KEY_A }))
  t.same([logged.decision, logged.policy_decision, logged.approval_id], ['allow', 'require_approval', approval.approval_id])
  const again = await ask({ approval_id: approval.approval_id })
  t.same([again.decision, again.reasons], ['deny', [{ rule: 'approval_unusable' }]])
})

t.test('two concurrent uses: exactly one allow', async (t) => {
  const { approval } = await ask()
  t.equal((await vote(approval.approval_id, 'approve', m1.token)).body.status, 'approved')
  const answers = await Promise.all(Array.from({ length: 8 }, () => ask({ approval_id: approval.approval_id })))
  t.equal(answers.filter((a) => a.decision === 'allow').length, 1)
  t.equal(answers.filter((a) => a.decision === 'deny' && a.reasons[0].rule === 'approval_unusable').length, 7)
  const allow = answers.find((a) => a.decision === 'allow')
  const row = await app.db.selectFrom('approvals').select(['status', 'consumed_decision_id']).where('approval_id', '=', approval.approval_id).executeTakeFirstOrThrow()
  t.same(row, { status: 'consumed', consumed_decision_id: allow.decision_id }, 'consumed by the logged allow, in its transaction')
  const logged = await app.db.selectFrom('decisions').select(['decision_id', 'decision']).where('approval_id', '=', approval.approval_id).where('decision', '=', 'allow').execute()
  t.same(logged.map((r) => r.decision_id), [allow.decision_id], 'one allow logged')
  t.equal(new Set(answers.map((a) => a.decision_id)).size, 8, 'every answer is its own logged decision')
})

t.test('one deny decides; cancel by the agent key; unknown ids are unusable', async (t) => {
  const { approval } = await ask()
  t.match((await vote(approval.approval_id, 'deny', m1.token)).body, { status: 'denied' })
  t.same((await ask({ approval_id: approval.approval_id })).reasons, [{ rule: 'approval_unusable' }])
  const other = (await ask()).approval
  const refused = await app.call('POST', `/approvals/${other.approval_id}/cancel`, { token: vars.MEMBER_KEY_A })
  t.equal(refused.status, 403)
  const cancelled = await app.call('POST', `/approvals/${other.approval_id}/cancel`, { token: AGENT_KEY })
  t.match([cancelled.status, await jsonOf(cancelled)], [200, { status: 'cancelled', cancelled_by: `agent-key:${keyRes.key_id ?? keyRes.id}` }])
  t.same((await ask({ approval_id: crypto.randomUUID() })).reasons, [{ rule: 'approval_unusable' }])
})

t.test('timeout: expired at read time, then written by the sweep; a late use is denied', async (t) => {
  const { approval } = await ask()
  app.clock.advance(900_000)
  m1.token = await login(app, m1.email, 'a long enough password')
  const read = await jsonOf(await app.call('GET', `/approvals/${approval.approval_id}`, { token: vars.VIEWER_KEY_A }))
  t.equal(read.status, 'expired', 'never served as pending once overdue')
  t.notOk((await jsonOf(await app.call('GET', '/approvals?status=pending', { token: vars.VIEWER_KEY_A }))).approvals.some((a: any) => a.approval_id === approval.approval_id))
  t.same(await vote(approval.approval_id, 'approve', m1.token), { status: 409, body: { status: 'Conflict', error: 'This approval is no longer pending: it is expired' } })
  t.same((await ask({ approval_id: approval.approval_id })).reasons, [{ rule: 'approval_unusable' }])
  t.ok((await expireDue(app.db, new Date(app.clock.now))).includes(approval.approval_id))
  const row = await app.db.selectFrom('approvals').select('status').where('approval_id', '=', approval.approval_id).executeTakeFirstOrThrow()
  t.equal(row.status, 'expired')
  // Approved but not used in time: expired too.
  const late = (await ask()).approval
  await vote(late.approval_id, 'approve', m1.token)
  app.clock.advance(300_000)
  m1.token = await login(app, m1.email, 'a long enough password')
  t.same((await ask({ approval_id: late.approval_id })).reasons, [{ rule: 'approval_unusable' }])
})

t.test('a waiter wakes when the approval is decided, and answers at once when it is not pending', async (t) => {
  const { approval } = await ask()
  const started = Date.now()
  const waiting = app.call('GET', `/approvals/${approval.approval_id}?wait=30`, { token: AGENT_KEY })
  await new Promise((resolve) => setTimeout(resolve, 200))
  await vote(approval.approval_id, 'approve', m1.token)
  const res = await waiting
  t.equal(res.status, 200)
  t.equal((await jsonOf(res)).status, 'approved')
  t.ok(Date.now() - started < 5_000, 'woken, not timed out')
  const quick = Date.now()
  t.equal((await jsonOf(await app.call('GET', `/approvals/${approval.approval_id}?wait=60`, { token: AGENT_KEY }))).status, 'approved')
  t.ok(Date.now() - quick < 2_000)
  for (const bad of ['61', '-1', 'x', '1.5']) {
    const res = await app.call('GET', `/approvals/${approval.approval_id}?wait=${bad}`, { token: AGENT_KEY })
    t.equal(res.status, 400, `wait=${bad}`)
  }
})

t.test('a client that goes away stops waiting; the sweeper started by start() writes expiry', async (t) => {
  const { approval } = await ask()
  const controller = new AbortController()
  const started = Date.now()
  const waiting = app.request(`/approvals/${approval.approval_id}?wait=30`, { headers: { authorization: `Bearer ${AGENT_KEY}` }, signal: controller.signal })
  await new Promise((resolve) => setTimeout(resolve, 200))
  controller.abort()
  await waiting.then((res) => res.arrayBuffer()).catch(() => null)
  t.ok(Date.now() - started < 3_000, 'the waiter is gone at once')
  app.clock.advance(900_000)
  m1.token = await login(app, m1.email, 'a long enough password')
  let status = 'pending'
  for (let i = 0; i < 40 && status !== 'expired'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    status = (await app.db.selectFrom('approvals').select('status').where('approval_id', '=', approval.approval_id).executeTakeFirstOrThrow()).status
  }
  t.equal(status, 'expired', 'written without anyone reading it')
})

t.test("another organization's approval answers like a random id", async (t) => {
  await app.call('POST', '/agents', { token: vars.ADMIN_KEY_B, json: { handle: 'payer' } })
  const b = await decide(app, vars.OWNER_KEY_B!, { agent: 'payer', action: 'payments.refund' })
  const foreign = b.body.approval.approval_id
  foreignId = foreign
  const random = crypto.randomUUID()
  for (const [method, suffix, token] of [['GET', '', vars.VIEWER_KEY_A], ['POST', '/approve', m1.token], ['POST', '/deny', m1.token], ['POST', '/cancel', vars.ADMIN_KEY_A], ['GET', '', AGENT_KEY]] as const) {
    const theirs = await app.call(method, `/approvals/${foreign}${suffix}`, { token, json: method === 'POST' ? {} : undefined })
    const none = await app.call(method, `/approvals/${random}${suffix}`, { token, json: method === 'POST' ? {} : undefined })
    t.equal(theirs.status, 404)
    t.equal(await theirs.text(), await none.text(), `${method} ${suffix}`)
  }
  t.same((await ask({ approval_id: foreign })).reasons, [{ rule: 'approval_unusable' }])
  t.same((await jsonOf(await app.call('GET', `/approvals/${foreign}`, { token: vars.VIEWER_KEY_B }))).status, 'pending')
})

t.test("an agent key sees its own agent's approvals only; lists page oldest first", async (t) => {
  await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'other' } })
  const theirs = (await ask({ agent: 'other' })).approval
  app.clock.advance(1)
  const mine = (await ask()).approval
  const hidden = await app.call('GET', `/approvals/${theirs.approval_id}`, { token: AGENT_KEY })
  t.same([hidden.status, await jsonOf(hidden)], [404, { status: 'Not Found', error: 'Approval not found' }])
  t.equal((await app.call('POST', `/approvals/${theirs.approval_id}/cancel`, { token: AGENT_KEY })).status, 404)
  const own = await jsonOf(await app.call('GET', '/approvals?status=pending&limit=100', { token: AGENT_KEY }))
  t.ok(own.approvals.every((a: any) => a.agent === 'billing'))
  t.ok(own.approvals.some((a: any) => a.approval_id === mine.approval_id))
  const all: string[] = []
  let cursor: string | null = ''
  while (cursor !== null) {
    const page: any = await jsonOf(await app.call('GET', `/approvals?status=pending&limit=1&cursor=${encodeURIComponent(cursor)}`, { token: vars.VIEWER_KEY_A }))
    all.push(...page.approvals.map((a: any) => a.approval_id))
    t.ok(page.approvals.length <= 1)
    cursor = page.next_cursor
  }
  t.equal(all.indexOf(theirs.approval_id) + 1, all.indexOf(mine.approval_id), 'oldest first, one page at a time')
  t.notOk(all.includes(foreignId), "never another organization's")
  t.equal((await app.call('GET', '/approvals?status=nope', { token: vars.VIEWER_KEY_A })).status, 400)
  t.equal((await app.call('GET', '/approvals?cursor=zzz', { token: vars.VIEWER_KEY_A })).status, 400)
})

t.test('bad vote bodies answer 400', async (t) => {
  const { approval } = await ask()
  for (const [body, error] of [
    [{ note: 5 }, 'Field note must be a string'],
    [{ status: 'approved' }, 'Field status is read-only'],
    [{ extra: 1 }, 'Unknown field: extra'],
    [{ note: 'a\u0000b' }, 'Request body contains a NUL character'],
  ] as const) {
    t.same(await vote(approval.approval_id, 'approve', m1.token, body), { status: 400, body: { status: 'Bad Request', error } }, JSON.stringify(body))
  }
  const malformed = await app.call('POST', `/approvals/${approval.approval_id}/approve`, { token: m1.token, body: '{', headers: { 'content-type': 'application/json' } })
  t.equal(malformed.status, 400)
})

t.test('approval state survives closing and reopening the handler on the same database', async (t) => {
  const { approval } = await ask()
  await vote(approval.approval_id, 'approve', m1.token)
  await app.app.close()
  const again = await createTestApp(t, { database: app.database, clock: app.clock })
  const res = await again.request(`/approvals/${approval.approval_id}`, { headers: { authorization: `Bearer ${vars.VIEWER_KEY_A}` } })
  t.equal((await jsonOf(res)).status, 'approved')
  app.app.start()
})

t.test('across processes: approving on one handler wakes a waiter on another', { skip: DATABASE_KIND !== 'postgres' && 'PostgreSQL only' }, async (t) => {
  const other = await createTestApp(t, { database: app.database, clock: new FakeClock(app.clock.now) })
  await new Promise((resolve) => setTimeout(resolve, 500))
  const { approval } = await ask()
  const started = Date.now()
  const waiting = other.request(`/approvals/${approval.approval_id}?wait=20`, { headers: { authorization: `Bearer ${AGENT_KEY}` } })
  await new Promise((resolve) => setTimeout(resolve, 300))
  await vote(approval.approval_id, 'approve', m1.token)
  t.equal((await jsonOf(await waiting)).status, 'approved')
  t.ok(Date.now() - started < 5_000, 'woken by NOTIFY')
})

void A

t.test('a wake between reading the approval and starting to wait is not lost', async (t) => {
  // The route subscribes before it reads the approval: an approve that commits after the read
  // and before the wait must end the wait at once, not after `wait` seconds.
  const hub = createApprovalHub(testConfig(), { db: app.db, clock: () => Date.now(), logger: memoryLogger(), listenUrl: null } as unknown as Deps)
  const id = crypto.randomUUID()
  const early = hub.subscribe(id, null)
  t.equal(hub.waiting(), 1, 'registered before the read')
  hub.wake(id) // the approve commits here, while the request is still reading
  t.equal(hub.waiting(), 0, 'a woken waiter leaves at once')
  const outcome = await Promise.race([early.wait(60_000).then(() => 'woken'), new Promise((done) => setTimeout(() => done('slept'), 3_000).unref())])
  t.equal(outcome, 'woken')

  const cancelled = hub.subscribe(id, null)
  t.equal(hub.waiting(), 1)
  cancelled.cancel()
  cancelled.cancel()
  t.equal(hub.waiting(), 0, 'cancel leaves, once')

  const aborted = new AbortController()
  aborted.abort()
  t.equal(await Promise.race([hub.subscribe(id, aborted.signal).wait(60_000).then(() => 'returned'), new Promise((done) => setTimeout(() => done('slept'), 3_000).unref())]), 'returned')
  t.equal(hub.waiting(), 0, 'an aborted request registers nothing')
})
