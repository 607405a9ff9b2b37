// docs/api.md: a key's role never exceeds its creator's — continuously, not only at creation. The
// effective role of a key, and of tokens minted from it, is the lower of the key's role and its
// creator's current role; a key whose creator left the organization stops working; an operator's
// key keeps its own role. Changes apply on the next request, in this process and in another one.
import t from 'tap'
import { HttpError } from '../../http/errors.ts'
import { createCredentials } from '../../services/credentials.ts'
import { silentLogger } from '../../log.ts'
import { TEST_DATABASE_URL, testConfig } from '../support/helpers.ts'
import { inviteAndAccept, jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const PASSWORD = 'a long enough password'

/** A new Admin of org A, signed in, with an Admin key of their own and a token minted from it. */
async function adminWithKey(app: ProductApp, email: string) {
  const { vars } = app
  const member = await inviteAndAccept(app, vars.OWNER_KEY_A!, email, 'admin', PASSWORD)
  const session = await jsonOf(await app.call('POST', '/auth/login', { json: { email, password: PASSWORD } }))
  const res = await app.call('POST', '/keys', { token: session.access_token, json: { role: 'admin', name: 'made by a user' } })
  if (res.status !== 201) throw new Error(`POST /keys answered ${res.status}: ${await res.text()}`)
  const key = await jsonOf(res)
  const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
  return { userId: member.user_id as string, session, key, minted }
}

async function statusOf(app: ProductApp, method: string, path: string, token: string, json?: unknown): Promise<number> {
  const res = await app.call(method, path, { token, json })
  await res.body?.cancel()
  return res.status
}

async function setRole(app: ProductApp, userId: string, role: string): Promise<void> {
  const res = await app.call('PATCH', `/members/${userId}`, { token: app.vars.OWNER_KEY_A, json: { role } })
  if (res.status !== 200) throw new Error(`PATCH /members answered ${res.status}: ${await res.text()}`)
  await res.body?.cancel()
}

t.test("a demotion of the creator lowers the key and its tokens on the next request", async (t) => {
  const app = await productApp(t)
  const { key, minted, userId } = await adminWithKey(app, 'demoted@example.com')
  t.equal(key.created_by, `user:${userId}`)
  t.equal(minted.role, 'admin')
  t.equal(await statusOf(app, 'GET', '/keys', key.api_key), 200, 'key warm in the cache')
  t.equal(await statusOf(app, 'GET', '/keys', minted.access_token), 200, 'token warm in the cache')

  await setRole(app, userId, 'manager')
  const refused = await app.call('GET', '/keys', { token: key.api_key })
  t.equal(refused.status, 403)
  t.same(await jsonOf(refused), { status: 'Forbidden', error: "This credential's role (manager) lacks the keys:manage permission" })
  t.equal(await statusOf(app, 'GET', '/keys', minted.access_token), 403, 'the minted token too')
  t.equal(await statusOf(app, 'POST', `/policies?organization_id=${app.vars.ORG_A}`, key.api_key, { name: 'n', effect: 'deny', actions: ['a'] }), 201, 'still a Manager')
  const login = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
  t.equal(login.role, 'manager', 'a new token carries the effective role')
  t.equal(login.scope, 'policies:read policies:write agents:read agents:write decisions:read decisions:check mcp:read')

  await setRole(app, userId, 'owner')
  t.equal(await statusOf(app, 'GET', '/keys', key.api_key), 200, 'restored with the creator')
  const above = await app.call('POST', '/keys', { token: key.api_key, json: { role: 'owner' } })
  t.equal(above.status, 403, "a promotion of the creator never lifts the key above its own role")
  t.same(await jsonOf(above), { status: 'Forbidden', error: 'Cannot create a key whose role (owner) is above your own (admin)' })
})

t.test('a key whose creator left the organization answers 401, as do its tokens', async (t) => {
  const app = await productApp(t)
  const { key, minted, userId } = await adminWithKey(app, 'leaver@example.com')
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, key.api_key), 200, 'key warm in the cache')
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, minted.access_token), 200, 'token warm in the cache')
  const del = await app.call('DELETE', `/members/${userId}`, { token: app.vars.OWNER_KEY_A })
  t.equal(del.status, 204)
  const res = await app.call('GET', `/policies/${app.vars.POLICY_A}`, { token: key.api_key })
  t.equal(res.status, 401)
  t.same(await jsonOf(res), { status: 'Unauthorized', error: 'Invalid or expired token' })
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, minted.access_token), 401)
  const login = await app.call('POST', '/auth/login', { json: { api_key: key.api_key } })
  t.equal(login.status, 401)
  t.same(await jsonOf(login), { status: 'Unauthorized', error: 'invalid_client', error_description: 'Invalid API key' })
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, app.vars.ADMIN_KEY_A!), 200, "an operator's key keeps its own role")
})

t.test('a key created by a key answers to the same user', async (t) => {
  const app = await productApp(t)
  const { key, userId } = await adminWithKey(app, 'chain@example.com')
  const child = await jsonOf(await app.call('POST', '/keys', { token: key.api_key, json: { role: 'admin', name: 'made by a key' } }))
  t.equal(child.created_by, `key:${key.key_id}`)
  t.equal(await statusOf(app, 'GET', '/keys', child.api_key), 200)
  await setRole(app, userId, 'viewer')
  t.equal(await statusOf(app, 'GET', '/keys', child.api_key), 403, 'lowered with the user behind its creator')
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, child.api_key), 200, 'a Viewer still reads')
  await setRole(app, userId, 'admin')
  const rotated = await jsonOf(await app.call('POST', `/keys/${child.key_id}/rotate`, { token: key.api_key }))
  await app.call('DELETE', `/members/${userId}`, { token: app.vars.OWNER_KEY_A })
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, child.api_key), 401)
  t.equal(await statusOf(app, 'GET', `/policies/${app.vars.POLICY_A}`, rotated.api_key), 401, 'a successor rotated by such a key too')
})

t.test("an operator's key keeps its own role, and keys it creates too", async (t) => {
  const app = await productApp(t)
  const child = await jsonOf(await app.call('POST', '/keys', { token: app.vars.OWNER_KEY_A, json: { role: 'admin' } }))
  t.equal(child.created_by, `key:${app.vars.OWNER_KEY_ID_A}`)
  const login = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: child.api_key } }))
  t.equal(login.role, 'admin')
  t.equal(await statusOf(app, 'GET', '/keys', child.api_key), 200)
})

t.test('a demotion in another process sharing the database applies there on the next request (PostgreSQL LISTEN/NOTIFY)', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
  const app = await productApp(t)
  const { key, minted, userId } = await adminWithKey(app, 'remote@example.com')
  // The peer: another process's credential checks, with its own cache and its own LISTEN connection.
  const peer = createCredentials(testConfig(), { db: app.db, clock: app.clock.read, logger: silentLogger, listenUrl: TEST_DATABASE_URL })
  peer.start()
  t.teardown(() => peer.close())
  const roleIn = async (token: string): Promise<string | number> => {
    try {
      const principal = await peer.authenticate(`Bearer ${token}`, app.clock.now)
      return principal instanceof HttpError ? principal.status : principal.role
    } catch (error) {
      return (error as { status?: number }).status ?? -1
    }
  }
  const until = Date.now() + 15_000
  while (!peer.cacheEnabled() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
  t.ok(peer.cacheEnabled(), 'the peer is subscribed')
  t.equal(await roleIn(key.api_key), 'admin')
  t.equal(await roleIn(minted.access_token), 'admin')
  // Unannounced, a change is not seen while the entries are cached (up to 5 s)…
  await app.db.updateTable('memberships').set({ role: 'member' }).where('user_id', '=', userId).where('organization_id', '=', app.vars.ORG_A!).execute()
  t.equal(await roleIn(key.api_key), 'admin', 'served from the peer cache')
  // …announced by the other process (PATCH /members), it is.
  await setRole(app, userId, 'member')
  let seen: Array<string | number> = []
  for (const stop = Date.now() + 1000; Date.now() < stop; ) {
    seen = [await roleIn(key.api_key), await roleIn(minted.access_token)]
    if (seen[0] === 'member' && seen[1] === 'member') break
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  t.same(seen, ['member', 'member'], 'the peer lowered the key and its token within a second')
})
