// The token endpoint and bearer authentication: happy paths, errors, and the security rules of
// docs/api.md and docs/security.md.
import { BY_OPERATOR } from '../../storage/audit.ts'
import { Kysely, PostgresDialect } from 'kysely'
import t from 'tap'
import { createHandler } from '../../server.ts'
import { createPostgresPool } from '../../database/connect.ts'
import type { Database } from '../../database/schema.ts'
import { generateSecret } from '../../auth/secrets.ts'
import { FakeClock, memoryLogger, testConfig } from '../support/helpers.ts'
import { form, jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app

t.test('happy path', async (t) => {
  t.test('an API key works directly as the bearer token', async (t) => {
    const res = await app.call('GET', `/policies?organization_id=${vars.ORG_A}`, { token: vars.VIEWER_KEY_A })
    t.equal(res.status, 200)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.match(res.headers.get('ratelimit-policy'), /^"api";q=\d+;w=60$/)
    const body = await jsonOf(res)
    t.equal(body.policies.length, 1)
    t.equal(body.policies[0].policy_id, vars.POLICY_A)
  })

  t.test('the Bearer scheme name is case-insensitive (RFC 6750)', async (t) => {
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      const res = await app.request(`/policies?organization_id=${vars.ORG_A}`, { headers: { authorization: `${scheme} ${vars.VIEWER_KEY_A}` } })
      t.equal(res.status, 200, scheme)
      await res.body?.cancel()
    }
  })

  t.test('POST /auth/login with {email,password} starts a user session', async (t) => {
    const res = await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } })
    t.equal(res.status, 200)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.equal(res.headers.get('pragma'), 'no-cache')
    const body = await jsonOf(res)
    t.same(Object.keys(body), ['access_token', 'token_type', 'expires_in', 'refresh_token', 'organization_id', 'role', 'scope', 'organizations'])
    t.same(body.organizations, [{ organization_id: vars.ORG_A, name: 'Fixture org A', role: 'owner' }])
    t.match(body.access_token, /^stw_at_[a-z2-7]{39}$/)
    t.match(body.refresh_token, /^stw_rt_[a-z2-7]{39}$/)
    t.equal(body.token_type, 'Bearer')
    t.equal(body.expires_in, 900)
    t.equal(body.organization_id, vars.ORG_A)
    t.equal(body.role, 'owner')
    t.equal(body.scope, 'policies:read policies:write keys:manage members:manage agents:read agents:write decisions:read decisions:check audit:read webhooks:manage mcp:read mcp:manage')
    const use = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: body.access_token })
    t.equal(use.status, 200)
    await use.body?.cancel()
  })

  t.test('the email is matched without regard to case or surrounding spaces', async (t) => {
    const res = await app.call('POST', '/auth/login', { json: { email: `  ${vars.USER_EMAIL_A!.toUpperCase()} `, password: vars.USER_PASSWORD_A } })
    t.equal(res.status, 200)
    await res.body?.cancel()
  })

  t.test('POST /auth/login with {api_key} returns a token acting as the key, without refresh token', async (t) => {
    const res = await app.call('POST', '/auth/login', { json: { api_key: vars.MANAGER_KEY_A } })
    t.equal(res.status, 200)
    const body = await jsonOf(res)
    t.same(Object.keys(body), ['access_token', 'token_type', 'expires_in', 'organization_id', 'role', 'scope'])
    t.equal(body.role, 'manager')
    t.equal(body.scope, 'policies:read policies:write agents:read agents:write decisions:read decisions:check mcp:read')
  })

  t.test('the OAuth form grant_type=client_credentials takes the key as client_secret in the body', async (t) => {
    const f = form({ grant_type: 'client_credentials', client_secret: vars.ADMIN_KEY_A! })
    const res = await app.call('POST', '/auth/login', f)
    t.equal(res.status, 200)
    const body = await jsonOf(res)
    t.equal(body.role, 'admin')
    t.notOk('refresh_token' in body)
  })

  t.test('… or in HTTP Basic', async (t) => {
    const basic = btoa(`any-client:${vars.ADMIN_KEY_A}`)
    const res = await app.call('POST', '/auth/login', { body: 'grant_type=client_credentials', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${basic}` } })
    t.equal(res.status, 200)
    await res.body?.cancel()
  })

  t.test('access tokens expire after 15 minutes', async (t) => {
    const login = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: vars.VIEWER_KEY_A } }))
    app.clock.advance(899_000)
    t.equal((await app.call('GET', `/policies/${vars.POLICY_A}`, { token: login.access_token })).status, 200)
    app.clock.advance(1_000)
    const res = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: login.access_token })
    t.equal(res.status, 401)
    t.same(await jsonOf(res), { status: 'Unauthorized', error: 'Invalid or expired token' })
  })
})

t.test('refresh tokens', async (t) => {
  async function session() {
    return jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_B, password: vars.USER_PASSWORD_B } }))
  }

  t.test('POST /auth/refresh returns a new pair and spends the old refresh token', async (t) => {
    const first = await session()
    const res = await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } })
    t.equal(res.status, 200)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.equal(res.headers.get('pragma'), 'no-cache')
    const second = await jsonOf(res)
    t.not(second.access_token, first.access_token)
    t.not(second.refresh_token, first.refresh_token)
    t.equal(second.organization_id, vars.ORG_B)
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: second.access_token })).status, 200)
  })

  t.test('the form grant_type=refresh_token works on /auth/refresh and on the token endpoint /auth/login', async (t) => {
    const first = await session()
    const a = await app.call('POST', '/auth/refresh', form({ grant_type: 'refresh_token', refresh_token: first.refresh_token }))
    t.equal(a.status, 200)
    const second = await jsonOf(a)
    const b = await app.call('POST', '/auth/login', form({ grant_type: 'refresh_token', refresh_token: second.refresh_token }))
    t.equal(b.status, 200)
    await b.body?.cancel()
  })

  async function familyOf(accessToken: string): Promise<string> {
    const { hashSecret } = await import('../../auth/secrets.ts')
    const row = await app.db.selectFrom('access_tokens').select('family_id').where('token_hash', '=', hashSecret(accessToken)).executeTakeFirstOrThrow()
    return row.family_id
  }

  t.test('replaying a spent refresh token 10 s or more after its use revokes the whole family', async (t) => {
    const first = await session()
    const second = await jsonOf(await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } }))
    app.clock.advance(10_000)
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: second.access_token })).status, 200, 'warm cache')
    const replay = await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } })
    t.equal(replay.status, 400)
    t.same(await jsonOf(replay), { status: 'Bad Request', error: 'invalid_grant', error_description: 'Refresh token is invalid, expired or already used' })
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: second.access_token })).status, 401, 'access token of the family is dead')
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: first.access_token })).status, 401, 'older access token too')
    const next = await app.call('POST', '/auth/refresh', { json: { refresh_token: second.refresh_token } })
    t.equal(next.status, 400, 'the newest refresh token is dead too')
    await next.body?.cancel()
  })

  t.test('a spent refresh token presented again within 10 s (a client retry) yields a fresh pair in the same family', async (t) => {
    const first = await session()
    const second = await jsonOf(await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } }))
    app.clock.advance(9_999)
    const res = await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } })
    t.equal(res.status, 200)
    const retry = await jsonOf(res)
    t.not(retry.access_token, second.access_token)
    t.not(retry.refresh_token, second.refresh_token)
    t.equal(retry.organization_id, vars.ORG_B)
    t.equal(await familyOf(retry.access_token), await familyOf(first.access_token), 'same family')
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: second.access_token })).status, 200, 'the first successor still works')
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: retry.access_token })).status, 200)
    // The grace counts from the first use, not from the retry.
    app.clock.advance(1)
    const late = await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } })
    t.equal(late.status, 400)
    await late.body?.cancel()
    for (const token of [first.access_token, second.access_token, retry.access_token]) {
      t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token })).status, 401, 'the whole family is revoked')
    }
    const next = await app.call('POST', '/auth/refresh', { json: { refresh_token: retry.refresh_token } })
    t.equal(next.status, 400)
    await next.body?.cancel()
  })

  t.test('concurrent refreshes of one token leave at most one usable family', async (t) => {
    const first = await session()
    const family = await familyOf(first.access_token)
    // From a client of its own: attempts in flight count against the client's failure budget,
    // which earlier tests in this file have partly spent.
    const conn = { remoteAddress: '127.0.0.3' }
    const results = await Promise.all(Array.from({ length: 8 }, () => app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token }, conn })))
    const pairs: Array<{ access_token: string; refresh_token: string }> = []
    for (const r of results) {
      if (r.status === 200) pairs.push(await jsonOf(r))
      else {
        t.equal(r.status, 400)
        await r.body?.cancel()
      }
    }
    t.ok(pairs.length >= 1, `${pairs.length} succeeded, within the retry grace`)
    const families = new Set(await Promise.all(pairs.map((pair) => familyOf(pair.access_token))))
    t.same([...families], [family], 'every successor is in the original family')
    // One family, revoked as a unit: a replay after the grace ends every successor.
    app.clock.advance(10_000)
    const replay = await app.call('POST', '/auth/refresh', { json: { refresh_token: first.refresh_token } })
    t.equal(replay.status, 400)
    await replay.body?.cancel()
    let usable = 0
    for (const pair of pairs) {
      const use = await app.call('GET', `/policies/${vars.POLICY_B}`, { token: pair.access_token })
      if (use.status === 200) usable++
      await use.body?.cancel()
      const refresh = await app.call('POST', '/auth/refresh', { json: { refresh_token: pair.refresh_token } })
      if (refresh.status === 200) usable++
      await refresh.body?.cancel()
    }
    t.equal(usable, 0)
  })

  t.test('a refresh token is not a bearer token', async (t) => {
    const first = await session()
    t.equal((await app.call('GET', `/policies/${vars.POLICY_B}`, { token: first.refresh_token })).status, 401)
  })
})

t.test('errors', async (t) => {
  const unauthorized = { status: 'Unauthorized', error: 'Authentication required' }
  const invalid = { status: 'Unauthorized', error: 'Invalid or expired token' }

  t.test('no credential: 401 without WWW-Authenticate (docs/api.md)', async (t) => {
    const res = await app.call('GET', `/policies?organization_id=${vars.ORG_A}`)
    t.equal(res.status, 401)
    t.equal(res.headers.get('www-authenticate'), null)
    t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.same(await jsonOf(res), unauthorized)
  })

  const bad: Array<[string, string]> = [
    ['another scheme', `Basic ${btoa('a:b')}`],
    ['a bearer without token', 'Bearer'],
    ['two tokens', `Bearer ${'x'} ${'y'}`],
    ['a made-up key', 'Bearer stw_key_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'],
    ['a key with a flipped character', `Bearer ${'will be replaced'}`],
    ['a random string', 'Bearer hello'],
  ]
  for (const [name, header] of bad) {
    t.test(`${name}: 401 "Invalid or expired token", no WWW-Authenticate`, async (t) => {
      let value = header
      if (name.startsWith('a key with')) {
        const key = vars.VIEWER_KEY_A!
        value = `Bearer ${key.slice(0, 12)}${key[12] === 'a' ? 'b' : 'a'}${key.slice(13)}`
      }
      const res = await app.request(`/policies?organization_id=${vars.ORG_A}`, { headers: { authorization: value } })
      t.equal(res.status, 401)
      t.equal(res.headers.get('www-authenticate'), null)
      t.same(await jsonOf(res), invalid)
    })
  }

  t.test('a well-formed but unknown key: 401, same body', async (t) => {
    const { generateSecret } = await import('../../auth/secrets.ts')
    const res = await app.call('GET', `/policies?organization_id=${vars.ORG_A}`, { token: generateSecret('key') })
    t.equal(res.status, 401)
    t.same(await jsonOf(res), invalid)
  })

  t.test('unknown email and wrong password answer the same status and body', async (t) => {
    const unknown = await app.call('POST', '/auth/login', { json: { email: 'nobody@example.com', password: 'whatever' } })
    const wrong = await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: 'wrong password' } })
    t.equal(unknown.status, 400)
    t.equal(wrong.status, 400)
    const a = await unknown.text()
    t.equal(a, await wrong.text())
    t.same(JSON.parse(a), { status: 'Bad Request', error: 'invalid_grant', error_description: 'Invalid email or password' })
    t.equal(unknown.headers.get('cache-control'), 'no-store')
  })

  t.test('a bad API key at the token endpoint: 401 invalid_client', async (t) => {
    const res = await app.call('POST', '/auth/login', form({ grant_type: 'client_credentials', client_secret: 'stw_key_nope' }))
    t.equal(res.status, 401)
    t.equal(res.headers.get('www-authenticate'), null)
    t.same(await jsonOf(res), { status: 'Unauthorized', error: 'invalid_client', error_description: 'Invalid API key' })
  })

  t.test('the password grant is never accepted in a form post', async (t) => {
    const res = await app.call('POST', '/auth/login', form({ grant_type: 'password', username: vars.USER_EMAIL_A!, password: vars.USER_PASSWORD_A! }))
    t.equal(res.status, 400)
    t.match(await jsonOf(res), { status: 'Bad Request', error: 'unsupported_grant_type' })
  })

  t.test('unknown and missing grant types', async (t) => {
    const unknown = await jsonOf(await app.call('POST', '/auth/login', form({ grant_type: 'authorization_code', code: 'x' })))
    t.match(unknown, { error: 'unsupported_grant_type' })
    const missing = await app.call('POST', '/auth/login', form({ client_secret: 'x' }))
    t.equal(missing.status, 400)
    t.same(await jsonOf(missing), { status: 'Bad Request', error: 'invalid_request', error_description: 'grant_type is required' })
  })

  t.test('malformed bodies are 4xx with the token error shape, never 500', async (t) => {
    const cases: Array<[string, Record<string, string>, number]> = [
      ['{not json', { 'content-type': 'application/json' }, 400],
      ['[]', { 'content-type': 'application/json' }, 400],
      ['{}', { 'content-type': 'application/json' }, 400],
      ['{"email": 1, "password": "x"}', { 'content-type': 'application/json' }, 400],
      ['{"api_key": 42}', { 'content-type': 'application/json' }, 401],
      ['hello', { 'content-type': 'text/plain' }, 415],
      ['x'.repeat(20_000), { 'content-type': 'application/json' }, 413],
    ]
    for (const [body, headers, status] of cases) {
      const res = await app.call('POST', '/auth/login', { body, headers })
      t.equal(res.status, status, body.slice(0, 30))
      const parsed = await jsonOf(res)
      t.same(Object.keys(parsed), ['status', 'error', 'error_description'])
    }
  })

  t.test('a user in several organizations signs in to the one joined first, or to the one named', async (t) => {
    const { findUserByEmail, setMembership } = await import('../../storage/users.ts')
    const user = await findUserByEmail(app.db, vars.USER_EMAIL_B!)
    await setMembership(app.db, user!.id, vars.ORG_A!, 'viewer', new Date(app.clock.now), BY_OPERATOR)
    const unnamed = await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_B, password: vars.USER_PASSWORD_B } })
    t.equal(unnamed.status, 200)
    t.match(await jsonOf(unnamed), {
      organization_id: vars.ORG_B,
      organizations: [{ organization_id: vars.ORG_B, name: 'Fixture org B' }, { organization_id: vars.ORG_A, name: 'Fixture org A', role: 'viewer' }],
    })
    const chosen = await jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_B, password: vars.USER_PASSWORD_B, organization_id: vars.ORG_A } }))
    t.equal(chosen.organization_id, vars.ORG_A)
    t.equal(chosen.role, 'viewer')
  })
})

t.test('security', async (t) => {
  t.test('a token in the query string is refused with 400 and never logged', async (t) => {
    const before = app.logs.length
    for (const query of [`access_token=${vars.VIEWER_KEY_A}`, `organization_id=${vars.ORG_A}&x=${vars.VIEWER_KEY_A}`, 'access_token=anything', 'acc%65ss_token=anything', `x=%73${vars.VIEWER_KEY_A!.slice(1)}`, `x=a+${vars.VIEWER_KEY_A}`, `x=${vars.VIEWER_KEY_A!.toUpperCase()}`,
      // An empty value, each other name, and an escaped name beside an escape no decoder accepts.
      'refresh_token=', 'api_key=x', 'client_secret=x', 'api%5Fkey=x&note=%ZZ']) {
      const res = await app.call('GET', `/policies?${query}`, { token: vars.VIEWER_KEY_A })
      t.equal(res.status, 400, query)
      t.same(await jsonOf(res), { status: 'Bad Request', error: 'Credentials must be sent in the Authorization header, never in the URL' })
    }
    const login = await app.call('POST', `/auth/login?api_key=${vars.VIEWER_KEY_A}`, { json: { api_key: vars.VIEWER_KEY_A } })
    t.equal(login.status, 400)
    await login.body?.cancel()
    t.notMatch(JSON.stringify(app.logs.slice(before)), /stw_/)
  })

  t.test('a credential parameter name as a value, or inside a longer name, is no credential', async (t) => {
    for (const query of [`organization_id=${vars.ORG_A}&note=access_token`, `organization_id=${vars.ORG_A}&my_api_key_note=1`, `organization_id=${vars.ORG_A}&note=%ZZ`]) {
      const res = await app.call('GET', `/policies?${query}`, { token: vars.VIEWER_KEY_A })
      t.equal(res.status, 200, query)
      await res.body?.cancel()
    }
  })

  t.test('plain HTTP from a non-loopback peer is refused', async (t) => {
    const res = await app.call('GET', `/policies?organization_id=${vars.ORG_A}`, { token: vars.VIEWER_KEY_A, conn: { remoteAddress: '203.0.113.9' } })
    t.equal(res.status, 403)
    t.match(await jsonOf(res), { status: 'Forbidden', error: /^HTTPS is required/ })
    const tls = await app.call('GET', `/policies?organization_id=${vars.ORG_A}`, { token: vars.VIEWER_KEY_A, conn: { remoteAddress: '203.0.113.9', tls: true } })
    t.equal(tls.status, 200)
    await tls.body?.cancel()
    const login = await app.call('POST', '/auth/login', { json: { api_key: vars.VIEWER_KEY_A }, conn: { remoteAddress: '203.0.113.9' } })
    t.equal(login.status, 403)
    await login.body?.cancel()
  })

  t.test('a trusted proxy that forwarded HTTPS is secure; one that forwarded HTTP is not', async (t) => {
    const proxied = await productApp(t, { env: { TRUST_PROXY: '10.0.0.1' } })
    const url = `/policies?organization_id=${proxied.vars.ORG_A}`
    const https = await proxied.call('GET', url, { token: proxied.vars.VIEWER_KEY_A, conn: { remoteAddress: '10.0.0.1' }, headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '198.51.100.7' } })
    t.equal(https.status, 200)
    await https.body?.cancel()
    const http = await proxied.call('GET', url, { token: proxied.vars.VIEWER_KEY_A, conn: { remoteAddress: '10.0.0.1' }, headers: { 'x-forwarded-proto': 'http', 'x-forwarded-for': '198.51.100.7' } })
    t.equal(http.status, 403)
    await http.body?.cancel()
  })

  t.test('repeated login failures per (email, client) answer 429 with Retry-After, the same for unknown emails', async (t) => {
    const limited = await productApp(t, { env: { LOGIN_RATE_LIMIT: '3/60' } })
    for (const email of [limited.vars.USER_EMAIL_A, 'ghost@example.com']) {
      const statuses: number[] = []
      let last: Response | undefined
      for (let i = 0; i < 5; i++) {
        last = await limited.call('POST', '/auth/login', { json: { email, password: 'nope' }, conn: { remoteAddress: email === 'ghost@example.com' ? '127.0.0.2' : '127.0.0.1' } })
        statuses.push(last.status)
        if (i < 4) await last.body?.cancel()
      }
      t.same(statuses, [400, 400, 400, 429, 429], String(email))
      t.equal(last!.headers.get('retry-after'), '60')
      t.same(await jsonOf(last!), { status: 'Too Many Requests', error: 'too_many_requests', error_description: 'Too many failed attempts; retry later' })
    }
    // Even the right password waits out the window: the throttle is checked first.
    const right = await limited.call('POST', '/auth/login', { json: { email: limited.vars.USER_EMAIL_A, password: limited.vars.USER_PASSWORD_A } })
    t.equal(right.status, 429)
    await right.body?.cancel()
    limited.clock.advance(60_000)
    const later = await limited.call('POST', '/auth/login', { json: { email: limited.vars.USER_EMAIL_A, password: limited.vars.USER_PASSWORD_A } })
    t.equal(later.status, 200)
    await later.body?.cancel()
  })

  t.test('repeated refresh failures from one client answer 429 with Retry-After', async (t) => {
    const { generateSecret } = await import('../../auth/secrets.ts')
    const limited = await productApp(t, { env: { LOGIN_RATE_LIMIT: '3/60' } })
    const login = await jsonOf(await limited.call('POST', '/auth/login', { json: { email: limited.vars.USER_EMAIL_A, password: limited.vars.USER_PASSWORD_A } }))
    const statuses: number[] = []
    let last: Response | undefined
    for (const token of ['stw_rt_nope', generateSecret('rt'), generateSecret('rt'), generateSecret('rt')]) {
      last = await limited.call('POST', '/auth/refresh', { json: { refresh_token: token } })
      statuses.push(last.status)
      if (statuses.length < 4) await last.body?.cancel()
    }
    t.same(statuses, [400, 400, 400, 429])
    t.equal(last!.headers.get('retry-after'), '60')
    t.equal(last!.headers.get('cache-control'), 'no-store')
    t.same(await jsonOf(last!), { status: 'Too Many Requests', error: 'too_many_requests', error_description: 'Too many failed attempts; retry later' })
    const viaForm = await limited.call('POST', '/auth/login', form({ grant_type: 'refresh_token', refresh_token: generateSecret('rt') }))
    t.equal(viaForm.status, 429, 'the same throttle on the token endpoint')
    await viaForm.body?.cancel()
    const valid = await limited.call('POST', '/auth/refresh', { json: { refresh_token: login.refresh_token } })
    t.equal(valid.status, 429, 'the throttle is checked before the token')
    await valid.body?.cancel()
    const elsewhere = await limited.call('POST', '/auth/refresh', { json: { refresh_token: generateSecret('rt') }, conn: { remoteAddress: '127.0.0.2' } })
    t.equal(elsewhere.status, 400, 'another client has its own budget')
    await elsewhere.body?.cancel()
    limited.clock.advance(60_000)
    const later = await limited.call('POST', '/auth/refresh', { json: { refresh_token: login.refresh_token } })
    t.equal(later.status, 200)
    await later.body?.cancel()
  })

  t.test('per-credential rate limit: 429 with Retry-After and RateLimit headers', async (t) => {
    const limited = await productApp(t, { env: { API_RATE_LIMIT: '2/60' } })
    const url = `/policies?organization_id=${limited.vars.ORG_A}`
    const first = await limited.call('GET', url, { token: limited.vars.VIEWER_KEY_A })
    t.equal(first.headers.get('ratelimit'), '"api";r=1;t=60')
    t.equal(first.headers.get('ratelimit-policy'), '"api";q=2;w=60')
    await first.body?.cancel()
    await (await limited.call('GET', url, { token: limited.vars.VIEWER_KEY_A })).body?.cancel()
    const third = await limited.call('GET', url, { token: limited.vars.VIEWER_KEY_A })
    t.equal(third.status, 429)
    t.equal(third.headers.get('retry-after'), '60')
    t.same(await jsonOf(third), { status: 'Too Many Requests', error: 'Too many requests for this credential; retry later' })
    const other = await limited.call('GET', url, { token: limited.vars.MEMBER_KEY_A })
    t.equal(other.status, 200, 'another credential has its own budget')
    await other.body?.cancel()
  })

  t.test('responses never contain hashes or secrets of stored credentials', async (t) => {
    const rows = await app.db.selectFrom('api_keys').select('secret_hash').execute()
    const list = await (await app.call('GET', '/keys', { token: vars.ADMIN_KEY_A })).text()
    for (const row of rows) t.notOk(list.includes(row.secret_hash))
    t.notMatch(list, /stw_key_[a-z2-7]{39}/)
    t.notMatch(list, /secret_hash|password/)
  })

  t.test('only hashes are stored', async (t) => {
    const keys = await app.db.selectFrom('api_keys').select(['secret_hash', 'display_prefix']).execute()
    for (const key of keys) {
      t.match(key.secret_hash, /^[0-9a-f]{64}$/)
      t.match(key.display_prefix, /^stw_key_[a-z2-7]{6}$/)
    }
    const users = await app.db.selectFrom('users').select('password_hash').execute()
    for (const user of users) t.match(user.password_hash, /^scrypt\$10\$8\$1\$/)
  })
})

t.test('a token with a bad checksum is refused before any database work (docs/security.md)', async (t) => {
  // On a database that cannot be reached, any lookup answers 503: a 401 proves none was made.
  const logger = memoryLogger()
  const pool = await createPostgresPool('postgres://postgres@127.0.0.1:1/test', logger, 1)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  t.teardown(() => db.destroy())
  const handler = createHandler(testConfig(), { db, clock: new FakeClock().read, logger })
  t.teardown(() => handler.close())
  const get = (token: string) =>
    handler.fetch(
      new Request('http://localhost/policies?organization_id=00000000-0000-4000-8000-000000000000', { headers: { Authorization: `Bearer ${token}` } }),
      { remoteAddress: '127.0.0.1' },
    )
  const wellFormed = generateSecret('key')
  const lookup = get(wellFormed)
  t.ok(lookup instanceof Promise, 'a lookup is waited for')
  const lookedUp = await lookup
  t.equal(lookedUp.status, 503, 'a well-formed unknown key is looked up')
  await lookedUp.body?.cancel()
  const last = wellFormed.at(-1) === 'a' ? 'b' : 'a'
  // Refused before any I/O, so answered at once: a Response, not a promise (docs/architecture.md).
  for (const token of [wellFormed.slice(0, -1) + last, 'stw_key_notavalidkeyatall']) {
    const refused = get(token)
    t.ok(refused instanceof Response, 'answered at once')
    t.equal((refused as Response).status, 401)
    t.same(await jsonOf(refused as Response), { status: 'Unauthorized', error: 'Invalid or expired token' })
    t.equal((refused as Response).headers.get('www-authenticate'), null)
  }
})

