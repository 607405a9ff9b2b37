// Upstream MCP servers: POST/GET/PATCH/DELETE /mcp/servers. Roles are in tests/security/product-roles.test.ts;
// here: the answers, validation, the SSRF guard, tenant isolation, the cap, the audit trail, and
// header values that are never returned, never logged, never in an event and sealed at rest.
import { sql } from 'kysely'
import t from 'tap'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const SECRET = 'Bearer upstream-credential-7f3a9c'

async function setup(t: Parameters<typeof productApp>[0], env: Record<string, string> = {}): Promise<ProductApp> {
  return productApp(t, { env })
}

async function register(app: ProductApp, json: Record<string, unknown>, token = app.vars.ADMIN_KEY_A!): Promise<{ status: number; body: any; location: string | null }> {
  const res = await app.call('POST', '/mcp/servers', { token, json })
  return { status: res.status, location: res.headers.get('location'), body: await jsonOf(res) }
}

t.test('register, read, list, change and delete a server', async (t) => {
  const app = await setup(t)
  const { vars } = app
  const made = await register(app, { name: 'billing', url: 'https://1.1.1.1/mcp', headers: { Authorization: SECRET, 'X-Tenant': 'acme' }, resource_argument: 'account' })
  t.equal(made.status, 201)
  const id = made.body.server_id
  t.equal(made.location, `https://api.example.com/mcp/servers/${id}`)
  t.same(made.body, {
    server_id: id,
    organization_id: vars.ORG_A,
    name: 'billing',
    url: 'https://1.1.1.1/mcp',
    header_names: ['authorization', 'x-tenant'],
    resource_argument: 'account',
    enabled: true,
    created_by: `key:${vars.ADMIN_KEY_ID_A}`,
    created_at: '2026-11-22T12:00:00.000Z',
    updated_at: '2026-11-22T12:00:00.000Z',
  })

  const read = await app.call('GET', `/mcp/servers/${id}`, { token: vars.VIEWER_KEY_A })
  t.equal(read.status, 200)
  t.same(await jsonOf(read), made.body)

  for (const name of ['alpha', 'crm', 'zeta']) t.equal((await register(app, { name, url: 'https://1.1.1.1/mcp' })).status, 201)
  const first = await jsonOf(await app.call('GET', '/mcp/servers?limit=2', { token: vars.VIEWER_KEY_A }))
  t.same(first.servers.map((s: any) => s.name), ['alpha', 'billing'], 'name order')
  t.type(first.next_cursor, 'string')
  const second = await jsonOf(await app.call('GET', `/mcp/servers?limit=2&cursor=${first.next_cursor}`, { token: vars.VIEWER_KEY_A }))
  t.same(second.servers.map((s: any) => s.name), ['crm', 'zeta'])
  t.equal(second.next_cursor, null)
  const badCursor = await app.call('GET', '/mcp/servers?cursor=bm9wZQ', { token: vars.VIEWER_KEY_A })
  t.equal(badCursor.status, 400)
  t.same(await jsonOf(badCursor), { status: 'Bad Request', error: 'cursor is invalid; pass next_cursor from the previous page' })

  app.clock.advance(1000)
  const patched = await app.call('PATCH', `/mcp/servers/${id}`, {
    token: vars.OWNER_KEY_A,
    json: { name: 'payments', headers: { 'x-tenant': null, 'X-Region': 'eu' }, enabled: false, resource_argument: null },
    headers: { 'content-type': 'application/merge-patch+json' },
  })
  t.equal(patched.status, 200)
  const after = await jsonOf(patched)
  t.same(
    { name: after.name, header_names: after.header_names, enabled: after.enabled, resource_argument: after.resource_argument, updated_at: after.updated_at, created_at: after.created_at },
    { name: 'payments', header_names: ['authorization', 'x-region'], enabled: false, resource_argument: null, updated_at: '2026-11-22T12:00:01.000Z', created_at: '2026-11-22T12:00:00.000Z' },
  )
  const cleared = await jsonOf(await app.call('PATCH', `/mcp/servers/${id}`, { token: vars.OWNER_KEY_A, json: { headers: null } }))
  t.same(cleared.header_names, [])
  const row = await app.db.selectFrom('mcp_servers').select(['headers_sealed', 'header_names']).where('id', '=', id).executeTakeFirstOrThrow()
  t.same(row, { headers_sealed: null, header_names: [] }, 'no sealed text is left behind')

  const deleted = await app.call('DELETE', `/mcp/servers/${id}`, { token: vars.ADMIN_KEY_A })
  t.equal(deleted.status, 204)
  for (const method of ['GET', 'DELETE']) {
    const gone = await app.call(method, `/mcp/servers/${id}`, { token: vars.ADMIN_KEY_A })
    t.equal(gone.status, 404)
    t.same(await jsonOf(gone), { status: 'Not Found', error: 'MCP server not found' })
  }
})

t.test('names are unique per organization; a taken name is 409', async (t) => {
  const app = await setup(t)
  t.equal((await register(app, { name: 'crm', url: 'https://1.1.1.1/mcp' })).status, 201)
  const again = await register(app, { name: 'crm', url: 'https://1.0.0.1/mcp' })
  t.equal(again.status, 409)
  t.same(again.body, { status: 'Conflict', error: 'An MCP server named crm already exists' })
  t.equal((await register(app, { name: 'crm', url: 'https://1.1.1.1/mcp' }, app.vars.ADMIN_KEY_B)).status, 201, 'another organization may use it')
  const other = await register(app, { name: 'docs', url: 'https://1.1.1.1/mcp' })
  const rename = await app.call('PATCH', `/mcp/servers/${other.body.server_id}`, { token: app.vars.ADMIN_KEY_A, json: { name: 'crm' } })
  t.equal(rename.status, 409)
  t.same(await jsonOf(rename), { status: 'Conflict', error: 'An MCP server named crm already exists' })
})

t.test("another organization's servers are not there", async (t) => {
  const app = await setup(t)
  const { vars } = app
  const mine = await register(app, { name: 'billing', url: 'https://1.1.1.1/mcp', headers: { authorization: SECRET } })
  const id = mine.body.server_id
  const unknown = crypto.randomUUID()
  for (const [method, json] of [['GET', undefined], ['PATCH', { enabled: false }], ['DELETE', undefined]] as const) {
    const theirs = await app.call(method, `/mcp/servers/${id}`, { token: vars.ADMIN_KEY_B, json })
    const none = await app.call(method, `/mcp/servers/${unknown}`, { token: vars.ADMIN_KEY_B, json })
    t.equal(theirs.status, 404, method)
    t.equal(await theirs.text(), await none.text(), `${method}: the same answer as an unknown id`)
  }
  const listed = await jsonOf(await app.call('GET', '/mcp/servers', { token: vars.VIEWER_KEY_B }))
  t.same(listed.servers, [])
  const still = await jsonOf(await app.call('GET', `/mcp/servers/${id}`, { token: vars.VIEWER_KEY_A }))
  t.equal(still.enabled, true, 'B changed nothing')
  const notAnId = await app.call('GET', '/mcp/servers/not-a-uuid', { token: vars.VIEWER_KEY_A })
  t.equal(notAnId.status, 404)
})

t.test('bad input is a 400 that says what is wrong, never a 500', async (t) => {
  const app = await setup(t)
  const ok = { name: 'crm', url: 'https://1.1.1.1/mcp' }
  const cases: Array<[unknown, string]> = [
    [{ url: ok.url }, 'Field name is required'],
    [{ ...ok, name: 'CRM' }, 'Field name must be 1 to 32 of a-z, 0-9 and -, starting with a letter'],
    [{ ...ok, name: 'my_crm' }, 'Field name must be 1 to 32 of a-z, 0-9 and -, starting with a letter'],
    [{ ...ok, name: '9crm' }, 'Field name must be 1 to 32 of a-z, 0-9 and -, starting with a letter'],
    [{ ...ok, name: 'a'.repeat(33) }, 'Field name must be 1 to 32 of a-z, 0-9 and -, starting with a letter'],
    [{ ...ok, name: 7 }, 'Field name must be a string'],
    [{ name: 'crm' }, 'Field url is required'],
    [{ ...ok, url: 'mcp.example.com/mcp' }, 'Field url must be an absolute URL'],
    [{ ...ok, url: 'ftp://1.1.1.1/mcp' }, 'Field url must be an https URL'],
    [{ ...ok, url: 'https://user:pw@1.1.1.1/mcp' }, 'Field url must not hold a user name or password (send credentials as headers)'],
    [{ ...ok, url: 'https://1.1.1.1/mcp#x' }, 'Field url must not hold a fragment'],
    [{ ...ok, url: `https://1.1.1.1/${'a'.repeat(2048)}` }, 'Field url is longer than 2048 characters'],
    [{ ...ok, headers: ['authorization'] }, 'Field headers must be a JSON object of header names to values'],
    [{ ...ok, headers: { authorization: 5 } }, 'Field headers must map header names to string values (at headers.authorization)'],
    [{ ...ok, headers: { host: 'evil.example.com' } }, 'Field headers: "host" is set by the gateway itself'],
    [{ ...ok, headers: { 'Mcp-Session-Id': 'x' } }, 'Field headers: "Mcp-Session-Id" is set by the gateway itself'],
    [{ ...ok, headers: { 'Content-Length': '1' } }, 'Field headers: "Content-Length" is set by the gateway itself'],
    [{ ...ok, headers: { 'bad name': 'x' } }, 'Field headers: "bad name" is not a header name (1 to 64 token characters)'],
    [{ ...ok, headers: { 'x-a': 'one\r\nx-b: two' } }, 'Field headers: "x-a" holds a character a header value may not hold (only visible ASCII, spaces and tabs)'],
    [{ ...ok, headers: { 'x-a': 'v'.repeat(4097) } }, 'Field headers: "x-a" is longer than 4096 characters'],
    [{ ...ok, headers: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`x-h${i}`, 'v'])) }, 'Field headers holds more than 16 headers'],
    [{ ...ok, headers: { 'X-Key': 'a', 'x-key': 'b' } }, 'Field headers names x-key twice'],
    [{ ...ok, headers: { authorization: null } }, 'Field headers must map header names to string values (at headers.authorization)'],
    [{ ...ok, resource_argument: '' }, 'Field resource_argument must not be empty'],
    [{ ...ok, resource_argument: 'a\u0007b' }, 'Field resource_argument holds a control character'],
    [{ ...ok, enabled: 'yes' }, 'Field enabled must be true or false'],
    [{ ...ok, header_names: ['x'] }, 'Field header_names is read-only'],
    [{ ...ok, colour: 'red' }, 'Unknown field: colour'],
  ]
  for (const [json, error] of cases) {
    const res = await app.call('POST', '/mcp/servers', { token: app.vars.ADMIN_KEY_A, json })
    t.equal(res.status, 400, error)
    t.same(await jsonOf(res), { status: 'Bad Request', error }, error)
  }
  const notJson = await app.call('POST', '/mcp/servers', { token: app.vars.ADMIN_KEY_A, body: '{"name":', headers: { 'content-type': 'application/json' } })
  t.equal(notJson.status, 400)
  const made = await register(app, ok)
  const empty = await app.call('PATCH', `/mcp/servers/${made.body.server_id}`, { token: app.vars.ADMIN_KEY_A, json: {} })
  t.same(await jsonOf(empty), { status: 'Bad Request', error: 'Request body names no field to change' })
  const nullName = await app.call('PATCH', `/mcp/servers/${made.body.server_id}`, { token: app.vars.ADMIN_KEY_A, json: { name: null } })
  t.equal(nullName.status, 400)
  t.same((await app.db.selectFrom('mcp_servers').select('name').execute()).map((row) => row.name), ['crm'], 'nothing refused was stored')
})

t.test('the SSRF guard: internal targets and plain http only with MCP_ALLOW_PRIVATE=true', async (t) => {
  const app = await setup(t)
  const refused: Array<[string, string]> = [
    ['http://1.1.1.1/mcp', 'Field url must be an https URL (plain http only with MCP_ALLOW_PRIVATE=true)'],
    ['https://127.0.0.1:8080/mcp', 'Field url is refused: 127.0.0.1 is a loopback address (allowed only with MCP_ALLOW_PRIVATE=true)'],
    ['https://10.1.2.3/mcp', 'Field url is refused: 10.1.2.3 is a private address (allowed only with MCP_ALLOW_PRIVATE=true)'],
    ['https://169.254.169.254/latest/meta-data', 'Field url is refused: 169.254.169.254 is a link-local address (allowed only with MCP_ALLOW_PRIVATE=true)'],
    ['https://[::1]/mcp', 'Field url is refused: [::1] is a loopback address (allowed only with MCP_ALLOW_PRIVATE=true)'],
    ['https://[::ffff:192.168.1.1]/mcp', 'Field url is refused: [::ffff:c0a8:101] is a private (IPv4 inside IPv6) address (allowed only with MCP_ALLOW_PRIVATE=true)'],
    ['https://localhost:9/mcp', 'Field url is refused: localhost resolves to 127.0.0.1, a loopback address (allowed only with MCP_ALLOW_PRIVATE=true)'],
  ]
  for (const [url, error] of refused) {
    const made = await register(app, { name: 'internal', url })
    t.equal(made.status, 400, url)
    t.same(made.body, { status: 'Bad Request', error }, url)
  }
  const ok = await register(app, { name: 'public', url: 'https://1.1.1.1/mcp' })
  const moved = await app.call('PATCH', `/mcp/servers/${ok.body.server_id}`, { token: app.vars.ADMIN_KEY_A, json: { url: 'https://192.168.0.10/mcp' } })
  t.equal(moved.status, 400, 'a PATCH is guarded too')
  t.same((await jsonOf(await app.call('GET', `/mcp/servers/${ok.body.server_id}`, { token: app.vars.ADMIN_KEY_A }))).url, 'https://1.1.1.1/mcp')

  const open = await setup(t, { MCP_ALLOW_PRIVATE: 'true' })
  for (const [i, url] of ['http://127.0.0.1:8080/mcp', 'https://10.1.2.3/mcp', 'http://localhost:9/mcp'].entries()) {
    t.equal((await register(open, { name: `private-${i}`, url })).status, 201, `allowed: ${url}`)
  }
})

t.test('header values: never returned, logged, audited, nor readable at rest', async (t) => {
  const app = await setup(t)
  const made = await register(app, { name: 'billing', url: 'https://1.1.1.1/mcp', headers: { Authorization: SECRET } })
  const id = made.body.server_id
  const patched = await app.call('PATCH', `/mcp/servers/${id}`, { token: app.vars.ADMIN_KEY_A, json: { headers: { 'x-api-key': `${SECRET}-2` } } })
  const bodies = [JSON.stringify(made.body), await patched.text()]
  bodies.push(await (await app.call('GET', `/mcp/servers/${id}`, { token: app.vars.ADMIN_KEY_A })).text())
  bodies.push(await (await app.call('GET', '/mcp/servers', { token: app.vars.ADMIN_KEY_A })).text())
  // A refused value is not echoed either.
  bodies.push(await (await app.call('POST', '/mcp/servers', { token: app.vars.ADMIN_KEY_A, json: { name: 'x', url: 'https://1.1.1.1', headers: { 'x-a': `${SECRET}\n` } } })).text())
  for (const body of bodies) t.notMatch(body, 'upstream-credential', 'not in an answer')
  t.notMatch(JSON.stringify(app.logs), 'upstream-credential', 'not in the log')

  const events = await app.db.selectFrom('audit_events').select(['type', 'data']).where('target_type', '=', 'mcp_server').orderBy('event_id').execute()
  t.same(events.map((e) => e.type), ['mcp_server.created', 'mcp_server.updated'])
  t.notMatch(JSON.stringify(events), 'upstream-credential', 'not in an audit event')
  t.match(events[1]!.data, { header_names: ['authorization', 'x-api-key'], changed: ['headers'] })

  // A dump of the row: neither the value nor any encoding of it, only the sealed text.
  const raw = await sql<Record<string, unknown>>`select * from mcp_servers where id = ${id}`.execute(app.db)
  const dump = JSON.stringify(raw.rows)
  for (const form of [SECRET, Buffer.from(SECRET).toString('base64'), Buffer.from(SECRET).toString('base64url'), Buffer.from(SECRET).toString('hex')]) t.notMatch(dump, form)
  t.match(raw.rows[0]!.headers_sealed, /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/)
  t.notMatch(raw.rows[0]!.headers_sealed, 'authorization', 'names are sealed too, beside the clear header_names')
})

t.test('the cap: MAX_MCP_SERVERS_PER_ORG, counted under the organization lock', async (t) => {
  const app = await setup(t, { MAX_MCP_SERVERS_PER_ORG: '3' })
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => register(app, { name: `s${i}`, url: 'https://1.1.1.1/mcp' })))
  t.same(answers.map((a) => a.status).sort(), [201, 201, 201, 409, 409, 409])
  t.same(answers.find((a) => a.status === 409)!.body, { status: 'Conflict', error: 'This organization has reached its limit of 3 MCP servers (MAX_MCP_SERVERS_PER_ORG)' })
  const count = await app.db.selectFrom('mcp_servers').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', app.vars.ORG_A!).executeTakeFirstOrThrow()
  t.equal(Number(count.n), 3)
  t.equal((await register(app, { name: 's0', url: 'https://1.1.1.1/mcp' }, app.vars.ADMIN_KEY_B)).status, 201, 'per organization')
})

t.test('agent keys may not read or write servers', async (t) => {
  const app = await setup(t)
  const agent = await jsonOf(await app.call('POST', '/agents', { token: app.vars.ADMIN_KEY_A, json: { handle: 'bot' } }))
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: app.vars.ADMIN_KEY_A, json: {} }))
  for (const [method, json] of [['GET', undefined], ['POST', { name: 'x', url: 'https://1.1.1.1/mcp' }]] as const) {
    const res = await app.call(method, '/mcp/servers', { token: key.api_key, json })
    t.equal(res.status, 403, method)
    t.match((await jsonOf(res)).error, /^This key is bound to an agent/)
  }
})

t.test('audit events and the webhook subscription that carries them', async (t) => {
  const app = await setup(t)
  const made = await register(app, { name: 'crm', url: 'https://1.1.1.1/mcp', resource_argument: 'id' }, app.vars.OWNER_KEY_A)
  await app.call('PATCH', `/mcp/servers/${made.body.server_id}`, { token: app.vars.OWNER_KEY_A, json: { enabled: false } })
  await app.call('DELETE', `/mcp/servers/${made.body.server_id}`, { token: app.vars.OWNER_KEY_A })
  const events = await jsonOf(await app.call('GET', '/audit?type=mcp_server.created,mcp_server.updated,mcp_server.deleted', { token: app.vars.OWNER_KEY_A }))
  const byType = Object.fromEntries(events.events.map((e: any) => [e.type, e]))
  const base = { name: 'crm', url: 'https://1.1.1.1/mcp', header_names: [], resource_argument: 'id' }
  t.match(byType['mcp_server.created'], { actor: { type: 'key', id: app.vars.OWNER_KEY_ID_A }, target: { type: 'mcp_server', id: made.body.server_id }, data: { ...base, enabled: true } })
  t.match(byType['mcp_server.updated'], { data: { ...base, enabled: false, changed: ['enabled'] } })
  t.match(byType['mcp_server.deleted'], { data: { ...base, enabled: false } })
  const hook = await app.call('POST', '/webhooks', { token: app.vars.ADMIN_KEY_A, json: { url: 'https://1.1.1.1/hook', event_types: ['mcp_server.changed'] } })
  t.equal(hook.status, 201, 'webhooks may subscribe to mcp_server.changed')
})
