// Function-level authorization (OWASP API5): every role against every protected route, with
// the exact status the docs/api.md role table implies; and the public health probe.
import { BY_OPERATOR } from '../../storage/audit.ts'
import t from 'tap'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app

type Role = 'OWNER' | 'ADMIN' | 'MANAGER' | 'MEMBER' | 'VIEWER'
const ROLES: Role[] = ['OWNER', 'ADMIN', 'MANAGER', 'MEMBER', 'VIEWER']

interface Case {
  name: string
  /** Built per role so each write touches its own row. */
  request: (role: Role) => Promise<{ method: string; path: string; json?: unknown }>
  allowed: readonly Role[]
  success: number
}

const read: Role[] = ['OWNER', 'ADMIN', 'MANAGER', 'MEMBER', 'VIEWER']
const write: Role[] = ['OWNER', 'ADMIN', 'MANAGER']
const admin: Role[] = ['OWNER', 'ADMIN']

async function scratchPolicy(): Promise<string> {
  const res = await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.OWNER_KEY_A, json: { name: 'scratch', effect: 'allow', actions: ['x'] } })
  return (await jsonOf(res)).policy_id
}

async function scratchKey(): Promise<string> {
  const res = await app.call('POST', '/keys', { token: vars.OWNER_KEY_A, json: { role: 'viewer' } })
  return (await jsonOf(res)).key_id
}

let servers = 0
async function scratchServer(): Promise<string> {
  const res = await app.call('POST', '/mcp/servers', { token: vars.OWNER_KEY_A, json: { name: `scratch-${++servers}`, url: 'https://1.1.1.1/mcp' } })
  return (await jsonOf(res)).server_id
}

const cases: Case[] = [
  { name: 'GET /policies', request: async () => ({ method: 'GET', path: `/policies?organization_id=${vars.ORG_A}` }), allowed: read, success: 200 },
  { name: 'GET /policies/{id}', request: async () => ({ method: 'GET', path: `/policies/${vars.POLICY_A}` }), allowed: read, success: 200 },
  { name: 'POST /policies', request: async () => ({ method: 'POST', path: `/policies?organization_id=${vars.ORG_A}`, json: { name: 'n', effect: 'deny', actions: ['a'] } }), allowed: write, success: 201 },
  { name: 'PATCH /policies/{id}', request: async () => ({ method: 'PATCH', path: `/policies/${await scratchPolicy()}`, json: { enabled: false } }), allowed: write, success: 200 },
  { name: 'DELETE /policies/{id}', request: async () => ({ method: 'DELETE', path: `/policies/${await scratchPolicy()}` }), allowed: write, success: 204 },
  { name: 'GET /policies/{id}/versions', request: async () => ({ method: 'GET', path: `/policies/${vars.POLICY_A}/versions` }), allowed: read, success: 200 },
  { name: 'GET /policies/{id}/versions/{n}', request: async () => ({ method: 'GET', path: `/policies/${vars.POLICY_A}/versions/1` }), allowed: read, success: 200 },
  { name: 'POST /policies/{id}/rollback', request: async () => ({ method: 'POST', path: `/policies/${await scratchPolicy()}/rollback`, json: { version: 1 } }), allowed: write, success: 200 },
  { name: 'POST /policies/replay', request: async () => ({ method: 'POST', path: '/policies/replay', json: { policies: [{ name: 'd', effect: 'deny', actions: ['a'] }] } }), allowed: write, success: 200 },
  { name: 'GET /organization', request: async () => ({ method: 'GET', path: '/organization' }), allowed: read, success: 200 },
  { name: 'PATCH /organization', request: async () => ({ method: 'PATCH', path: '/organization', json: { decision_retention_days: 400 } }), allowed: ['OWNER'], success: 200 },
  { name: 'GET /keys', request: async () => ({ method: 'GET', path: '/keys' }), allowed: admin, success: 200 },
  { name: 'GET /keys/{id}', request: async () => ({ method: 'GET', path: `/keys/${vars.VIEWER_KEY_ID_A}` }), allowed: admin, success: 200 },
  { name: 'POST /keys', request: async () => ({ method: 'POST', path: '/keys', json: { role: 'viewer' } }), allowed: admin, success: 201 },
  { name: 'POST /keys/{id}/rotate', request: async () => ({ method: 'POST', path: `/keys/${await scratchKey()}/rotate` }), allowed: admin, success: 201 },
  { name: 'DELETE /keys/{id}', request: async () => ({ method: 'DELETE', path: `/keys/${await scratchKey()}` }), allowed: admin, success: 204 },
  { name: 'GET /mcp/servers', request: async () => ({ method: 'GET', path: '/mcp/servers' }), allowed: read, success: 200 },
  { name: 'POST /mcp/servers', request: async (role) => ({ method: 'POST', path: '/mcp/servers', json: { name: `new-${role.toLowerCase()}-${++servers}`, url: 'https://1.1.1.1/mcp' } }), allowed: admin, success: 201 },
  { name: 'GET /mcp/servers/{id}', request: async () => ({ method: 'GET', path: `/mcp/servers/${await scratchServer()}` }), allowed: read, success: 200 },
  { name: 'PATCH /mcp/servers/{id}', request: async () => ({ method: 'PATCH', path: `/mcp/servers/${await scratchServer()}`, json: { enabled: false } }), allowed: admin, success: 200 },
  { name: 'DELETE /mcp/servers/{id}', request: async () => ({ method: 'DELETE', path: `/mcp/servers/${await scratchServer()}` }), allowed: admin, success: 204 },
]

for (const c of cases) {
  t.test(`${c.name}: ${ROLES.map((r) => `${r.toLowerCase()} ${c.allowed.includes(r) ? c.success : 403}`).join(', ')}`, async (t) => {
    for (const role of ROLES) {
      const { method, path, json } = await c.request(role)
      const res = await app.call(method, path, { token: vars[`${role}_KEY_A`], json })
      const expected = c.allowed.includes(role) ? c.success : 403
      t.equal(res.status, expected, role)
      if (expected === 403) {
        const body = await jsonOf(res)
        t.equal(body.status, 'Forbidden')
        // Organization settings are Owners' only, past the administrators' scope.
        t.match(body.error, c.name === 'PATCH /organization' && role === 'ADMIN' ? /^Only Owners change organization settings$/ : /^This credential's role \(\w+\) lacks the [a-z]+:[a-z]+ permission$/)
      } else await res.body?.cancel()
    }
  })
}

t.test('without a credential every protected route answers 401 and no WWW-Authenticate', async (t) => {
  for (const c of cases) {
    const { method, path, json } = await c.request('OWNER')
    const res = await app.call(method, path, { json })
    t.equal(res.status, 401, c.name)
    t.equal(res.headers.get('www-authenticate'), null)
    t.same(await jsonOf(res), { status: 'Unauthorized', error: 'Authentication required' })
  }
})

t.test('a user session carries the member\'s role', async (t) => {
  const { findUserByEmail, setMembership } = await import('../../storage/users.ts')
  const user = await findUserByEmail(app.db, vars.USER_EMAIL_A!)
  await setMembership(app.db, user!.id, vars.ORG_A!, 'viewer', new Date(app.clock.now), BY_OPERATOR)
  const login = await jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }))
  t.equal(login.role, 'viewer')
  t.equal(login.scope, 'policies:read agents:read decisions:read mcp:read')
  const res = await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: login.access_token, json: { name: 'n', effect: 'deny', actions: ['a'] } })
  t.equal(res.status, 403)
  await res.body?.cancel()
})

t.test('GET /health', async (t) => {
  t.test('is public and checks the database', async (t) => {
    const res = await app.call('GET', '/health', { conn: { remoteAddress: '203.0.113.9' } })
    t.equal(res.status, 200)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.same(await jsonOf(res), { status: 'ok', database: 'ok', time: '2026-11-22T12:00:00.000Z' })
  })

  t.test('answers 503 when the database is down', async (t) => {
    const fresh = await productApp(t)
    await fresh.database.close()
    const res = await fresh.call('GET', '/health')
    t.equal(res.status, 503)
    t.equal(res.headers.get('retry-after'), '5')
    t.same(await jsonOf(res), { status: 'Service Unavailable', error: 'Database unavailable' })
  })

  t.test('a data route answers 503, not 500, once the database driver is destroyed', async (t) => {
    const { isDatabaseUnavailable } = await import('../../http/errors.ts')
    t.ok(isDatabaseUnavailable(new Error('driver has already been destroyed')))
    const fresh = await productApp(t)
    await fresh.db.destroy()
    const res = await fresh.call('GET', `/policies?organization_id=${fresh.vars.ORG_A}`, { token: fresh.vars.VIEWER_KEY_A })
    t.equal(res.status, 503)
    t.equal(res.headers.get('retry-after'), '5')
    t.same(await jsonOf(res), { status: 'Service Unavailable', error: 'Service temporarily unavailable; try again shortly' })
  })
})
