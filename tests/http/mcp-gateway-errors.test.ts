// The MCP gateway refusing what it must: no credential (401 and the RFC 9728 metadata), a key that
// is not an agent's, a foreign Origin or Host, malformed JSON-RPC, unknown methods and tools,
// oversized arguments, another organization's tools (byte-identical to names that exist nowhere),
// a resource argument missing, and upstreams that hang, answer garbage or sit on a private address
// with MCP_ALLOW_PRIVATE off. Each is a clear JSON-RPC error or tool error, never a 5xx, and
// nothing reaches an upstream that should not.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { createTestApp } from '../support/helpers.ts'
import { appFetch, legacyClient, MCP_URL, mcpWorld, modernClient, textOf } from '../support/mcp-support.ts'
import { jsonOf, type ProductApp } from '../support/product-support.ts'

const world = await mcpWorld(t, { MCP_UPSTREAM_TIMEOUT_MS: '800', MCP_ALLOWED_ORIGINS: 'https://tools.example.com', MCP_APPROVAL_HOLD_SECONDS: '1' })
const { app, keys, upstream } = world
const { vars } = app
const calls = (tool: string) => upstream.calls.byTool[tool] ?? 0

/** A plain HTTP server standing in for a broken upstream. */
async function brokenUpstream(answer: ((res: import('node:http').ServerResponse) => void) | null): Promise<string> {
  const server: Server = createServer((_req, res) => answer?.(res))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
}

const hanging = await brokenUpstream(null)
const garbage = await brokenUpstream((res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not MCP</html>'))
for (const [name, url] of [['hang', hanging], ['junk', garbage]]) {
  const registered = await app.call('POST', '/mcp/servers', { token: vars.ADMIN_KEY_A, json: { name, url } })
  if (registered.status !== 201) throw new Error(`register ${name}: ${registered.status}`)
}
await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.ADMIN_KEY_A, json: { name: 'Broken servers', effect: 'allow', actions: ['mcp.hang.*', 'mcp.junk.*'] } })

/** One raw POST to /mcp: a 2025-era message unless headers say otherwise. */
async function post(body: unknown, headers: Record<string, string> = {}, target: ProductApp = app): Promise<{ status: number; headers: Headers; text: string }> {
  const response = await appFetch(target)(MCP_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  return { status: response.status, headers: response.headers, text: await response.text() }
}

/** The JSON-RPC message of an answer, whether JSON or one server-sent event. */
function message(text: string): any {
  const data = text.split('\n').find((line) => line.startsWith('data: '))
  return JSON.parse(data ? data.slice(6) : text)
}

const call = (name: string, args: Record<string, unknown>, id = 7) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } })
const bearer = (key: string) => ({ authorization: `Bearer ${key}` })

t.test('no credential: 401 pointing at the RFC 9728 metadata, which is served there', async (t) => {
  const none = await post(call('demo__echo', { text: 'x' }))
  t.equal(none.status, 401)
  t.equal(none.headers.get('www-authenticate'), 'Bearer resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"')
  t.same(JSON.parse(none.text), { jsonrpc: '2.0', error: { code: -32001, message: 'Authentication required' }, id: null })
  const wrong = await post(call('demo__echo', { text: 'x' }), bearer('stw_key_wrong'))
  t.equal(wrong.status, 401)
  t.match(wrong.headers.get('www-authenticate'), /^Bearer resource_metadata="[^"]+", error="invalid_token"$/)
  const metadata = await app.request('/.well-known/oauth-protected-resource/mcp')
  t.equal(metadata.status, 200)
  t.match(await jsonOf(metadata), { resource: 'https://api.example.com/mcp', authorization_servers: ['https://app.example.com'], bearer_methods_supported: ['header'] })
})

t.test('a key that is not an agent key is refused: a tool call is decided for a key\'s agent', async (t) => {
  const refused = await post(call('demo__echo', { text: 'x' }), bearer(vars.ADMIN_KEY_A!))
  t.equal(refused.status, 403)
  t.match(JSON.parse(refused.text), { jsonrpc: '2.0', error: { code: -32000, message: /agent key/ }, id: null })
})

t.test('Origin and Host: a foreign Origin or Host is refused with 403; the server\'s own and allowed origins pass', async (t) => {
  const before = calls('echo')
  const foreign = await post(call('demo__echo', { text: 'x' }), { ...bearer(keys.bot), origin: 'https://evil.example' })
  t.equal(foreign.status, 403)
  t.match(JSON.parse(foreign.text).error.message, /^Origin https:\/\/evil\.example may not call this MCP endpoint/)
  const nullOrigin = await post(call('demo__echo', { text: 'x' }), { ...bearer(keys.bot), origin: 'null' })
  t.equal(nullOrigin.status, 403, 'the opaque "null" origin too')
  for (const origin of ['https://tools.example.com', 'https://app.example.com']) {
    const allowed = await post(call('demo__echo', { text: 'x' }), { ...bearer(keys.bot), origin })
    t.equal(allowed.status, 200, `${origin} passes`)
  }
  const host = await post(call('demo__echo', { text: 'x' }), { ...bearer(keys.bot), host: 'rebound.attacker.example' })
  t.equal(host.status, 403)
  t.match(JSON.parse(host.text).error.message, /^Host rebound\.attacker\.example is not this server's/)
  t.equal(calls('echo'), before + 2, 'only the two allowed calls went upstream')
})

t.test('malformed JSON-RPC, unknown methods and unknown tools: JSON-RPC errors, never a 5xx', async (t) => {
  const auth = bearer(keys.bot)
  const notJson = await post('{"jsonrpc": "2.0", "id": 1, "method": ', auth)
  t.same([notJson.status, JSON.parse(notJson.text).error.code], [400, -32700])
  const notRpc = await post({ hello: 'world' }, auth)
  t.ok(notRpc.status >= 400 && notRpc.status < 500, `not JSON-RPC: ${notRpc.status}`)
  const unknownMethod = await post({ jsonrpc: '2.0', id: 2, method: 'tools/destroy', params: {} }, auth)
  t.ok(unknownMethod.status < 500)
  t.equal(message(unknownMethod.text).error.code, -32601, 'method not found')
  for (const name of ['demo__', 'no-separator', 'demo__bad name', '__echo', 'Demo__echo']) {
    const answer = await post(call(name, {}), auth)
    t.same([answer.status, message(answer.text).error], [200, { code: -32602, message: `Tool ${name} not found` }], `${JSON.stringify(name)}: unknown tool`)
  }
  const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} }
  const modern = await post({ jsonrpc: '2.0', id: 3, method: 'tools/destroy', params: { _meta: envelope } }, { ...auth, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/destroy' })
  t.same([modern.status, JSON.parse(modern.text)], [404, { jsonrpc: '2.0', id: 3, error: { code: -32601, message: 'Method not found' } }], '2026-07-28: method not found too')
})

t.test('oversized arguments: a tool error, nothing forwarded; an oversized body: 413', async (t) => {
  const before = calls('echo')
  const client = await legacyClient(t, app, keys.bot)
  const result = (await client.callTool({ name: 'demo__echo', arguments: { text: 'x'.repeat(20_000) } })) as { isError?: boolean; content: unknown }
  t.equal(result.isError, true)
  t.match(textOf(result), /^Steward refused the call: Fields args and context together are larger than 16384 bytes\. Nothing was sent upstream\.$/)
  const huge = await post(call('demo__echo', { text: 'x'.repeat(70_000) }), bearer(keys.bot))
  t.equal(huge.status, 413)
  t.match(JSON.parse(huge.text), { jsonrpc: '2.0', error: { code: -32000 }, id: null })
  t.equal(calls('echo'), before, 'nothing reached the upstream')
})

t.test("tenant isolation: org B's agent key never reaches org A's upstreams, and cannot tell they exist", async (t) => {
  const agent = await jsonOf(await app.call('POST', '/agents', { token: vars.ADMIN_KEY_B, json: { handle: 'bot' } }))
  const keyB = (await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_B, json: {} }))).api_key
  await app.call('POST', `/policies?organization_id=${vars.ORG_B}`, { token: vars.ADMIN_KEY_B, json: { name: 'Everything', effect: 'allow', actions: ['*'] } })
  t.same((await (await modernClient(t, app, keyB)).listTools()).tools, [], 'no tools listed')
  const before = upstream.calls.total
  const theirs = await post(call('demo__echo', { text: 'x' }), bearer(keyB))
  const nowhere = await post(call('nosuch__echo', { text: 'x' }), bearer(keyB))
  t.equal(theirs.status, nowhere.status)
  t.equal(theirs.text, nowhere.text.replace('nosuch__echo', 'demo__echo'), 'byte-identical but for the name asked')
  t.equal(upstream.calls.total, before, "org A's upstream saw nothing")
})

t.test('a resource argument: the decision acts on its value; missing or structured, the call is refused', async (t) => {
  const server = (await jsonOf(await app.call('GET', '/mcp/servers', { token: vars.VIEWER_KEY_A }))).servers.find((s: { name: string }) => s.name === 'demo')
  t.equal((await app.call('PATCH', `/mcp/servers/${server.server_id}`, { token: vars.ADMIN_KEY_A, json: { resource_argument: 'text' } })).status, 200)
  await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.ADMIN_KEY_A, json: { name: 'No secrets', effect: 'deny', actions: ['mcp.demo.echo'], resources: ['secret-*'] } })
  const client = await legacyClient(t, app, keys.bot)
  const before = calls('echo')
  t.same((await client.callTool({ name: 'demo__echo', arguments: { text: 'hello' } })).content, [{ type: 'text', text: 'hello' }])
  const denied = (await client.callTool({ name: 'demo__echo', arguments: { text: 'secret-plan' } })) as { isError?: boolean; content: unknown }
  t.match(textOf(denied), /policy "No secrets"/)
  const structured = (await client.callTool({ name: 'demo__echo', arguments: { text: ['secret-plan'] } })) as { isError?: boolean; content: unknown }
  t.match(textOf(structured), /argument "text" names the resource this call acts on and must be a string, number or boolean/)
  t.equal(calls('echo'), before + 1, 'only the allowed call went upstream')
  t.equal((await app.call('PATCH', `/mcp/servers/${server.server_id}`, { token: vars.ADMIN_KEY_A, json: { resource_argument: null } })).status, 200)
})

t.test('a 2025 call still pending when the hold ends: a tool error naming the approval; calling again waits on the same one', async (t) => {
  const client = await legacyClient(t, app, keys.bot)
  const ask = () => client.callTool({ name: 'demo__refund', arguments: { order: 'held-1', amount: 3 } }) as Promise<{ isError?: boolean; content: unknown }>
  const first = await ask()
  t.equal(first.isError, true)
  t.match(textOf(first), /^Steward holds this call until a person approves it: approval ([0-9a-f-]{36}) is still pending \(decide it at https:\/\/app\.example\.com\/console\/#\/approvals\/\1; it expires at [^)]+\)\. Call the tool again with the same arguments to keep waiting; nothing was sent upstream\.$/)
  const approvalId = /approval ([0-9a-f-]{36})/.exec(textOf(first))![1]
  t.match(textOf(await ask()), new RegExp(`approval ${approvalId} is still pending`), 'the same approval, not a second one')
  const asked = await app.db.selectFrom('approvals').select('approval_id').where('action', '=', 'mcp.demo.refund').where('organization_id', '=', vars.ORG_A!).execute()
  t.equal(asked.filter((row) => row.approval_id === approvalId).length, 1)
  t.equal(asked.length, 1, 'people were asked once')
  await app.call('POST', `/approvals/${approvalId}/approve`, { token: world.ownerToken, json: {} })
  const before = calls('refund')
  t.same((await ask()).content, [{ type: 'text', text: 'Refunded 3 EUR on order held-1' }], 'once approved, the next identical call goes through')
  t.equal(calls('refund'), before + 1)
  t.equal((await ask()).isError, true, 'and the approval is used up: the call after waits on a new one')
})

t.test('an upstream that hangs or answers garbage: a tool error, never a 5xx nor an allow', async (t) => {
  const client = await legacyClient(t, app, keys.bot)
  const started = Date.now()
  const hung = (await client.callTool({ name: 'hang__anything', arguments: {} })) as { isError?: boolean; content: unknown }
  t.equal(hung.isError, true)
  t.match(textOf(hung), /^Steward allowed the call \(decision [0-9a-f-]{36}\), but the upstream server hang (did not answer within 800 ms|failed)/)
  t.ok(Date.now() - started < 5000, 'within the timeout, not the client\'s')
  const junk = (await client.callTool({ name: 'junk__anything', arguments: {} })) as { isError?: boolean; content: unknown }
  t.equal(junk.isError, true)
  t.match(textOf(junk), /^Steward allowed the call \(decision [0-9a-f-]{36}\), but the upstream server junk failed/)
  const listed = await (await modernClient(t, app, keys.bot)).listTools()
  t.same(listed.tools.map((tool) => tool.name), ['demo__echo', 'demo__refund'], 'broken upstreams are left out of the list')
})

t.test('an upstream on a private address with MCP_ALLOW_PRIVATE off: refused, nothing forwarded', async (t) => {
  const strict = await createTestApp(t, { database: app.database, env: { MCP_ALLOW_PRIVATE: 'false', MCP_UPSTREAM_TIMEOUT_MS: '800' } })
  const before = upstream.calls.total
  const target = { ...app, app: strict.app } as ProductApp
  const client = await legacyClient(t, target, keys.bot)
  const result = (await client.callTool({ name: 'demo__echo', arguments: { text: 'x' } })) as { isError?: boolean; content: unknown }
  t.equal(result.isError, true)
  t.match(textOf(result), /the upstream server demo is refused: the URL must be an https URL \(plain http only with MCP_ALLOW_PRIVATE=true\)/)
  t.same((await client.listTools()).tools, [], 'and not listed')
  t.equal(upstream.calls.total, before, 'the upstream saw nothing')
})
