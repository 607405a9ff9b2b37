// Caps: an organization's active keys, policies, and members plus open invitations are bounded
// (409 with the setting's name), exactly, under parallel creation; a user's live sessions are
// bounded by ending the oldest; dead session families are pruned; and the product API's rate
// limit also counts per organization, so minting keys does not multiply the budget.
import t from 'tap'
import { loadConfig } from '../../config.ts'
import { pruneTokenFamilies } from '../../storage/tokens.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

async function statuses(responses: Promise<Response>[]): Promise<{ codes: number[]; bodies: unknown[] }> {
  const all = await Promise.all(responses)
  const bodies = await Promise.all(all.map((res) => jsonOf(res)))
  return { codes: all.map((res) => res.status).sort(), bodies }
}

function conflict(error: string): { status: string; error: string } {
  return { status: 'Conflict', error }
}

async function count(app: ProductApp, table: 'api_keys' | 'policies' | 'token_families', where: (q: any) => any = (q) => q): Promise<number> {
  const row = await where(app.db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n'))).executeTakeFirstOrThrow()
  return Number(row.n)
}

t.test('the defaults', async (t) => {
  const config = loadConfig({})
  t.same(
    [config.maxKeysPerOrg, config.maxPoliciesPerOrg, config.maxMembersPerOrg, config.maxAgentsPerOrg, config.maxSessionsPerUser, config.invitationTtlSeconds],
    [100, 1000, 1000, 1000, 20, 604_800],
  )
  t.same(config.apiOrgRateLimit, { limit: 6000, windowSeconds: 60 })
  t.throws(() => loadConfig({ MAX_KEYS_PER_ORG: '0' }), /MAX_KEYS_PER_ORG must be between 1 and/)
})

t.test('active API keys: 20 parallel creations one below the cap, exactly one succeeds', async (t) => {
  // The seeded organization A holds 5 active keys.
  const app = await productApp(t, { env: { MAX_KEYS_PER_ORG: '8' } })
  const { vars } = app
  const make = () => app.call('POST', '/keys', { token: vars.OWNER_KEY_A, json: { role: 'viewer' } })
  for (let i = 0; i < 2; i++) t.equal((await make()).status, 201)
  const { codes, bodies } = await statuses(Array.from({ length: 20 }, make))
  t.same(codes, [201, ...Array(19).fill(409)])
  const message = 'This organization has reached its limit of 8 active API keys (MAX_KEYS_PER_ORG)'
  t.same(bodies.filter((body: any) => body.status === 'Conflict'), Array(19).fill(conflict(message)))
  t.equal(await count(app, 'api_keys', (q) => q.where('organization_id', '=', vars.ORG_A).where('revoked_at', 'is', null)), 8)
  // Another organization has its own count.
  t.equal((await app.call('POST', '/keys', { token: vars.OWNER_KEY_B, json: { role: 'viewer' } })).status, 201)

  t.test('at the cap a rotation with an overlap needs a slot; an immediate one does not', async (t) => {
    const overlap = await app.call('POST', `/keys/${vars.VIEWER_KEY_ID_A}/rotate`, { token: vars.OWNER_KEY_A, json: { expires_in: 60 } })
    t.same({ status: overlap.status, body: await jsonOf(overlap) }, { status: 409, body: conflict(message) })
    const immediate = await app.call('POST', `/keys/${vars.VIEWER_KEY_ID_A}/rotate`, { token: vars.OWNER_KEY_A })
    t.equal(immediate.status, 201)
    await immediate.body?.cancel()
  })

  t.test('revoking one frees a slot', async (t) => {
    t.equal((await app.call('DELETE', `/keys/${vars.MEMBER_KEY_ID_A}`, { token: vars.OWNER_KEY_A })).status, 204)
    t.equal((await make()).status, 201)
  })
})

t.test('policies: 10 parallel creations one below the cap, exactly one succeeds', async (t) => {
  // The seeded organization A holds 1 policy.
  const app = await productApp(t, { env: { MAX_POLICIES_PER_ORG: '3' } })
  const { vars } = app
  const make = () => app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.MANAGER_KEY_A, json: { name: 'p', effect: 'deny', actions: ['a'] } })
  t.equal((await make()).status, 201)
  const { codes, bodies } = await statuses(Array.from({ length: 10 }, make))
  t.same(codes, [201, ...Array(9).fill(409)])
  t.same(bodies.filter((body: any) => body.status === 'Conflict')[0], conflict('This organization has reached its limit of 3 policies (MAX_POLICIES_PER_ORG)'))
  t.equal(await count(app, 'policies', (q) => q.where('organization_id', '=', vars.ORG_A)), 3)
})

t.test('members plus open invitations: 10 parallel invitations one below the cap, exactly one succeeds', async (t) => {
  // The seeded organization A has 1 member (its Owner).
  const app = await productApp(t, { env: { MAX_MEMBERS_PER_ORG: '3' } })
  const { vars } = app
  const make = (i: number) => app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: `cap${i}@example.com`, role: 'viewer' } })
  const first = await jsonOf(await make(100))
  const { codes, bodies } = await statuses(Array.from({ length: 10 }, (_, i) => make(i)))
  t.same(codes, [201, ...Array(9).fill(409)])
  const message = 'This organization has reached its limit of 3 members and open invitations (MAX_MEMBERS_PER_ORG)'
  t.same(bodies.filter((body: any) => body.status === 'Conflict')[0], conflict(message))
  // Accepting does not take another seat; revoking an invitation frees one.
  const accepted = await app.call('POST', '/invitations/accept', { json: { token: first.token, password: 'a long enough password' } })
  t.equal(accepted.status, 201)
  await accepted.body?.cancel()
  const full = await make(200)
  t.same(await jsonOf(full), conflict(message))
  const open = (await jsonOf(await app.call('GET', '/invitations', { token: vars.ADMIN_KEY_A }))).invitations
  t.equal(open.length, 1)
  t.equal((await app.call('DELETE', `/invitations/${open[0].invitation_id}`, { token: vars.ADMIN_KEY_A })).status, 204)
  t.equal((await make(300)).status, 201)
})

t.test("a user's sessions: past the cap the oldest ends; dead families are pruned", async (t) => {
  const app = await productApp(t, { env: { MAX_SESSIONS_PER_USER: '3' } })
  const { vars } = app
  const login = async () => jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }))
  const sessions = []
  for (let i = 0; i < 4; i++) {
    sessions.push(await login())
    app.clock.advance(1000)
  }
  const works = async (token: string) => {
    const res = await app.call('GET', '/members', { token })
    await res.body?.cancel()
    return res.status
  }
  t.same(await Promise.all(sessions.map((s) => works(s.access_token))), [401, 200, 200, 200], 'the oldest session ended at once')
  const refresh = await app.call('POST', '/auth/refresh', { json: { refresh_token: sessions[0].refresh_token } })
  t.equal(refresh.status, 400, 'its refresh token too')
  await refresh.body?.cancel()
  const mine = (q: any) => q.where('user_id', 'is not', null)
  t.equal(await count(app, 'token_families', mine), 4, 'the ended one is kept for the record for now')

  t.test('the sweep deletes families a refresh lifetime after they ended or were revoked', async (t) => {
    const limits = { refreshSeconds: app.config.refreshTokenTtlSeconds, accessSeconds: app.config.accessTokenTtlSeconds }
    t.equal(await pruneTokenFamilies(app.db, limits, new Date(app.clock.now)), 0)
    app.clock.advance(app.config.refreshTokenTtlSeconds * 1000 + 1)
    // Revoked a refresh lifetime ago: gone. Live families are not yet past their end (+ access lifetime).
    t.equal(await pruneTokenFamilies(app.db, limits, new Date(app.clock.now)), 1)
    t.equal(await count(app, 'token_families', mine), 3)
    app.clock.advance(app.config.accessTokenTtlSeconds * 1000)
    t.equal(await pruneTokenFamilies(app.db, limits, new Date(app.clock.now)), 3 + (await count(app, 'token_families', (q) => q.where('user_id', 'is', null))))
    t.equal(await count(app, 'token_families'), 0)
  })

  t.test("a sign-in also prunes the user's dead families", async (t) => {
    await login()
    app.clock.advance((app.config.refreshTokenTtlSeconds + app.config.accessTokenTtlSeconds) * 1000 + 1)
    await login()
    t.equal(await count(app, 'token_families', mine), 1)
  })
})

t.test("the API rate limit also counts per organization: more keys do not buy more requests", async (t) => {
  const app = await productApp(t, { env: { API_ORG_RATE_LIMIT: '6/60' } })
  const { vars } = app
  const tokens = [vars.OWNER_KEY_A!, vars.ADMIN_KEY_A!, vars.VIEWER_KEY_A!]
  const codes: number[] = []
  for (let i = 0; i < 6; i++) {
    const res = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: tokens[i % 3] })
    codes.push(res.status)
    await res.body?.cancel()
  }
  t.same(codes, [200, 200, 200, 200, 200, 200])
  const over = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: vars.MEMBER_KEY_A })
  t.equal(over.status, 429)
  t.equal(over.headers.get('retry-after'), '60')
  t.equal(over.headers.get('ratelimit-policy'), '"api-org";q=6;w=60')
  t.same(await jsonOf(over), { status: 'Too Many Requests', error: "Too many requests for this organization's credentials together; retry later" })
  const other = await app.call('GET', `/policies/${vars.POLICY_B}`, { token: vars.VIEWER_KEY_B })
  t.equal(other.status, 200, 'another organization has its own budget')
  await other.body?.cancel()
})
