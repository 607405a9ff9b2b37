// Agents: GET/POST /agents, GET/PATCH/DELETE /agents/{agent_id}, agent keys, capabilities;
// roles, tenant isolation, bad input.
import t from 'tap'
import { disableAllPolicies, insertPolicy } from '../support/governance-support.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const NOW = '2026-11-22T12:00:00.000Z'

async function createAgent(token: string, body: unknown) {
  const res = await app.call('POST', '/agents', { token, json: body })
  return { res, body: await jsonOf(res) }
}

t.test('POST /agents creates an active agent: 201, Location, every field', async (t) => {
  const { res, body } = await createAgent(vars.MANAGER_KEY_A!, { handle: 'support-bot', display_name: 'Support', description: 'Answers tickets', labels: { team: 'care' } })
  t.equal(res.status, 201)
  t.equal(res.headers.get('location'), `https://api.example.com/agents/${body.agent_id}`)
  t.same(body, {
    agent_id: body.agent_id,
    organization_id: A,
    handle: 'support-bot',
    display_name: 'Support',
    description: 'Answers tickets',
    owner_user_id: null,
    labels: { team: 'care' },
    status: 'active',
    created_at: NOW,
    updated_at: NOW,
    last_seen_at: null,
  })
  const read = await app.call('GET', `/agents/${body.agent_id}`, { token: vars.VIEWER_KEY_A })
  t.equal(read.status, 200)
  t.same(await jsonOf(read), body)
  const again = await createAgent(vars.MANAGER_KEY_A!, { handle: 'support-bot' })
  t.equal(again.res.status, 409)
  t.same(again.body, { status: 'Conflict', error: 'An agent with handle support-bot already exists' })
})

t.test('roles: Viewer reads, Manager writes, Member cannot write', async (t) => {
  const member = await createAgent(vars.MEMBER_KEY_A!, { handle: 'nope' })
  t.equal(member.res.status, 403)
  t.same(member.body, { status: 'Forbidden', error: "This credential's role (member) lacks the agents:write permission" })
  const list = await app.call('GET', '/agents', { token: vars.VIEWER_KEY_A })
  t.equal(list.status, 200)
})

t.test('bad input answers 400 with a message', async (t) => {
  const cases: [unknown, string][] = [
    [{}, 'Field handle is required'],
    [{ handle: 'Upper' }, 'Field handle must be 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'],
    [{ handle: '-x' }, 'Field handle must be 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'],
    [{ handle: 'a'.repeat(65) }, 'Field handle must be 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'],
    [{ handle: 7 }, 'Field handle must be a string'],
    [{ handle: 'ok', labels: [] }, 'Field labels must be a JSON object of strings'],
    [{ handle: 'ok', labels: ['x'] }, 'Field labels must be a JSON object of strings'],
    [{ handle: 'ok', labels: [], extra: 1 }, 'Unknown field: extra'],
    [{ handle: 'ok', labels: { a: 1 } }, 'Field labels must map keys of 1 to 64 characters to strings of at most 256 characters'],
    [{ handle: 'ok', labels: Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v'])) }, 'Field labels holds more than 32 entries'],
    [{ handle: 'ok', status: 'gone' }, 'Field status must be active, suspended or discovered'],
    [{ handle: 'ok', agent_id: crypto.randomUUID() }, 'Field agent_id is read-only'],
    [{ handle: 'ok', extra: 1 }, 'Unknown field: extra'],
    [{ handle: 'ok', display_name: 'a\u0000b' }, 'Request body contains a NUL character'],
    [{ handle: 'ok', owner_user_id: 'x' }, 'Field owner_user_id must be a UUID or null'],
    [{ handle: 'ok', owner_user_id: crypto.randomUUID() }, 'Field owner_user_id is not a member of this organization'],
  ]
  for (const [body, error] of cases) {
    const res = await createAgent(vars.MANAGER_KEY_A!, body)
    t.equal(res.res.status, 400, JSON.stringify(body).slice(0, 60))
    t.same(res.body, { status: 'Bad Request', error })
  }
  const malformed = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, body: '{"handle":', headers: { 'content-type': 'application/json' } })
  t.equal(malformed.status, 400)
  t.same(await jsonOf(malformed), { status: 'Bad Request', error: 'Request body is not valid JSON' })
  const deep = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, body: '{"labels":' + '['.repeat(40) + ']'.repeat(40) + '}', headers: { 'content-type': 'application/json' } })
  t.equal(deep.status, 400)
  t.same(await jsonOf(deep), { status: 'Bad Request', error: 'Request body is nested more than 32 levels deep' })
})

t.test('list: newest first, status filter, cursor pages', async (t) => {
  for (const handle of ['p1', 'p2', 'p3']) {
    app.clock.advance(1000)
    t.equal((await createAgent(vars.MANAGER_KEY_A!, { handle, status: handle === 'p2' ? 'suspended' : 'active' })).res.status, 201)
  }
  const first = await jsonOf(await app.call('GET', '/agents?limit=2', { token: vars.VIEWER_KEY_A }))
  t.same(first.agents.map((a: any) => a.handle), ['p3', 'p2'])
  t.type(first.next_cursor, 'string')
  const second = await jsonOf(await app.call('GET', `/agents?limit=2&cursor=${first.next_cursor}`, { token: vars.VIEWER_KEY_A }))
  t.same(second.agents.map((a: any) => a.handle), ['p1', 'support-bot'])
  t.equal(second.next_cursor, null)
  const suspended = await jsonOf(await app.call('GET', '/agents?status=suspended', { token: vars.VIEWER_KEY_A }))
  t.same(suspended, { agents: [suspended.agents[0]], next_cursor: null })
  t.equal(suspended.agents[0].handle, 'p2')
  for (const [query, error] of [
    ['status=bad', 'status must be active, suspended or discovered'],
    ['limit=0', 'limit must be a whole number from 1 to 100'],
    ['cursor=%00', 'cursor is invalid; pass next_cursor from the previous page'],
  ] as const) {
    const res = await app.call('GET', `/agents?${query}`, { token: vars.VIEWER_KEY_A })
    t.equal(res.status, 400, query)
    t.same(await jsonOf(res), { status: 'Bad Request', error }, query)
  }
})

t.test('PATCH changes fields and bumps the ruleset revision; DELETE 204', async (t) => {
  const { body: agent } = await createAgent(vars.MANAGER_KEY_A!, { handle: 'patchme' })
  const before = await app.db.selectFrom('organizations').select('ruleset_revision').where('id', '=', A).executeTakeFirstOrThrow()
  app.clock.advance(5000)
  const res = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: { status: 'suspended', labels: { tier: 'gold' } } })
  t.equal(res.status, 200)
  const patched = await jsonOf(res)
  t.same(patched, { ...agent, status: 'suspended', labels: { tier: 'gold' }, updated_at: new Date(app.clock.now).toISOString() })
  const after = await app.db.selectFrom('organizations').select('ruleset_revision').where('id', '=', A).executeTakeFirstOrThrow()
  t.equal(after.ruleset_revision, before.ruleset_revision + 1)
  const empty = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: {} })
  t.same([empty.status, await jsonOf(empty)], [400, { status: 'Bad Request', error: 'Request body names no field to change' }])
  for (const [body, error] of [
    [{ labels: [] }, 'Field labels must be a JSON object of strings'],
    [{ agent_id: crypto.randomUUID() }, 'Field agent_id is read-only'],
    [{ status: 'active', extra: 1 }, 'Unknown field: extra'],
  ] as const) {
    const refused = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: body })
    t.same([refused.status, await jsonOf(refused)], [400, { status: 'Bad Request', error }], JSON.stringify(body))
  }
  const clash = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: { handle: 'support-bot' } })
  t.same([clash.status, await jsonOf(clash)], [409, { status: 'Conflict', error: 'An agent with handle support-bot already exists' }])
  const del = await app.call('DELETE', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A })
  t.equal(del.status, 204)
  t.equal(await del.text(), '')
  const gone = await app.call('GET', `/agents/${agent.agent_id}`, { token: vars.VIEWER_KEY_A })
  t.same([gone.status, await jsonOf(gone)], [404, { status: 'Not Found', error: 'Agent not found' }])
})

t.test("another organization's agent answers exactly like a random id", async (t) => {
  const { body: agent } = await createAgent(vars.MANAGER_KEY_A!, { handle: 'isolated' })
  const random = crypto.randomUUID()
  const calls: [string, string, unknown?][] = [
    ['GET', ''],
    ['PATCH', '', { status: 'suspended' }],
    ['DELETE', ''],
    ['GET', '/capabilities'],
  ]
  for (const [method, suffix, json] of calls) {
    const theirs = await app.call(method, `/agents/${agent.agent_id}${suffix}`, { token: vars.ADMIN_KEY_B, json })
    const none = await app.call(method, `/agents/${random}${suffix}`, { token: vars.ADMIN_KEY_B, json })
    const malformed = await app.call(method, `/agents/not-a-uuid${suffix}`, { token: vars.ADMIN_KEY_B, json })
    t.equal(theirs.status, 404, `${method} ${suffix}`)
    const text = await theirs.text()
    t.equal(text, await none.text())
    t.equal(text, await malformed.text())
  }
  const keyTheirs = await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_B, json: {} })
  const keyNone = await app.call('POST', `/agents/${random}/keys`, { token: vars.ADMIN_KEY_B, json: {} })
  t.equal(keyTheirs.status, 404)
  t.equal(await keyTheirs.text(), await keyNone.text())
  const listB = await jsonOf(await app.call('GET', '/agents', { token: vars.VIEWER_KEY_B }))
  t.same(listB, { agents: [], next_cursor: null })
  const still = await app.call('GET', `/agents/${agent.agent_id}`, { token: vars.VIEWER_KEY_A })
  t.equal((await jsonOf(still)).status, 'active', 'the PATCH from B changed nothing')
})

t.test('agent keys: Admin+ creates; the key may only decide for its agent and read its own', async (t) => {
  const { body: agent } = await createAgent(vars.MANAGER_KEY_A!, { handle: 'keyed' })
  const byManager = await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.MANAGER_KEY_A, json: {} })
  t.equal(byManager.status, 403)
  for (const [body, error] of [
    [{ role: 'owner' }, 'Field role is read-only'],
    [{ name: 'k', scope: 'all' }, 'Unknown field: scope'],
  ] as const) {
    const refused = await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: body })
    t.same([refused.status, await jsonOf(refused)], [400, { status: 'Bad Request', error }], JSON.stringify(body))
  }
  const res = await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: { name: 'bot key' } })
  t.equal(res.status, 201)
  const key = await jsonOf(res)
  t.match(key, { name: 'bot key', role: 'member', agent_id: agent.agent_id, api_key: /^stw_key_/, created_by: `key:${vars.ADMIN_KEY_ID_A}` })
  t.equal(res.headers.get('location'), `https://api.example.com/keys/${key.key_id}`)
  const stored = await app.db.selectFrom('api_keys').selectAll().where('id', '=', key.key_id).executeTakeFirstOrThrow()
  t.equal(stored.agent_id, agent.agent_id)
  t.not(stored.secret_hash, key.api_key)
  t.equal(stored.secret_hash.length, 64, 'only the SHA-256 is kept')

  const refused = { status: 'Forbidden', error: 'This key is bound to an agent: it may only ask decisions for its agent and read its own decisions and capabilities' }
  const others: [string, string, unknown?][] = [
    ['GET', `/policies?organization_id=${A}`],
    ['POST', `/policies?organization_id=${A}`, { name: 'x', effect: 'allow', actions: ['*'] }],
    ['GET', '/agents'],
    ['POST', '/agents', { handle: 'evil' }],
    ['GET', `/agents/${agent.agent_id}`],
    ['PATCH', `/agents/${agent.agent_id}`, { status: 'active' }],
    ['DELETE', `/agents/${agent.agent_id}`],
    ['POST', `/agents/${agent.agent_id}/keys`, {}],
    ['GET', `/agents/${agent.agent_id}/capabilities`],
    ['GET', '/keys'],
    ['POST', '/keys', { role: 'viewer' }],
    ['GET', '/members'],
    ['POST', '/invitations', { email: 'x@example.com', role: 'viewer' }],
    ['POST', '/decisions/simulate', { action: 'x' }],
  ]
  for (const [method, path, json] of others) {
    const answer = await app.call(method, path, { token: key.api_key, json })
    t.equal(answer.status, 403, `${method} ${path}`)
    t.same(await jsonOf(answer), refused, `${method} ${path}`)
  }
  const own = await app.call('GET', '/agents/me/capabilities', { token: key.api_key })
  t.equal(own.status, 200)
  const capabilities = await jsonOf(own)
  t.same(capabilities, {
    capabilities: [
      {
        action: 'payments.*',
        decision: 'require_approval',
        condition: null,
        otherwise: null,
        policies: [{ policy_id: vars.POLICY_A, version: 1, name: 'Payments need approval (A)', effect: 'require_approval', condition: null, resources: ['*'] }],
      },
    ],
  })
  // Revoking the key takes effect on the next request.
  const revoke = await app.call('DELETE', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A })
  t.equal(revoke.status, 204)
  const after = await app.call('GET', '/agents/me/capabilities', { token: key.api_key })
  t.same([after.status, await jsonOf(after)], [401, { status: 'Unauthorized', error: 'Invalid or expired token' }])
})

t.test('deleting the agent stops its keys on the next request', async (t) => {
  const { body: agent } = await createAgent(vars.MANAGER_KEY_A!, { handle: 'doomed' })
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A }))
  t.equal((await app.call('GET', '/agents/me/capabilities', { token: key.api_key })).status, 200, 'warm in the cache')
  t.equal((await app.call('DELETE', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A })).status, 204)
  const after = await app.call('GET', '/agents/me/capabilities', { token: key.api_key })
  t.same([after.status, await jsonOf(after)], [401, { status: 'Unauthorized', error: 'Invalid or expired token' }])
})

t.test('capabilities follow the policies and the agent status', async (t) => {
  const fresh = await productApp(t)
  const org = fresh.vars.ORG_A!
  await disableAllPolicies(fresh.db, org)
  const made = await fresh.call('POST', '/agents', { token: fresh.vars.MANAGER_KEY_A, json: { handle: 'cap-bot' } })
  const agent = await jsonOf(made)
  const { policy_id } = await insertPolicy(fresh.db, org, { name: 'Read tickets', effect: 'allow', actions: ['tickets.read'] }, new Date(fresh.clock.now))
  const res = await fresh.call('GET', `/agents/${agent.agent_id}/capabilities`, { token: fresh.vars.VIEWER_KEY_A })
  t.equal(res.status, 200)
  t.same(await jsonOf(res), {
    capabilities: [
      { action: 'tickets.read', decision: 'allow', condition: null, otherwise: null, policies: [{ policy_id, version: 1, name: 'Read tickets', effect: 'allow', condition: null, resources: ['*'] }] },
    ],
  })
  await fresh.call('PATCH', `/agents/${agent.agent_id}`, { token: fresh.vars.MANAGER_KEY_A, json: { status: 'suspended' } })
  const suspended = await jsonOf(await fresh.call('GET', `/agents/${agent.agent_id}/capabilities`, { token: fresh.vars.VIEWER_KEY_A }))
  t.same(suspended, { capabilities: [{ action: 'tickets.read', decision: 'deny', condition: null, otherwise: null, policies: [], rule: 'agent_suspended' }] })
  const me = await fresh.call('GET', '/agents/me/capabilities', { token: fresh.vars.VIEWER_KEY_A })
  t.same([me.status, await jsonOf(me)], [404, { status: 'Not Found', error: 'Only a key bound to an agent has /agents/me; name the agent: /agents/{agent_id}/capabilities' }])
})

t.test('the agent cap holds under parallel creations', async (t) => {
  const capped = await productApp(t, { env: { MAX_AGENTS_PER_ORG: '3' } })
  const results = await Promise.all(
    Array.from({ length: 8 }, (_, i) => capped.call('POST', '/agents', { token: capped.vars.MANAGER_KEY_A, json: { handle: `bot-${i}` } })),
  )
  t.equal(results.filter((r) => r.status === 201).length, 3)
  const refused = results.find((r) => r.status === 409)!
  t.same(await jsonOf(refused), { status: 'Conflict', error: 'This organization has reached its limit of 3 agents (MAX_AGENTS_PER_ORG)' })
})
