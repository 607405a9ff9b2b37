// The MCP gateway end to end with real parts only: the example upstream built with the official
// SDK (it counts the calls it serves), and the official clients of both protocol revisions (2.x
// speaking 2026-07-28, 1.x speaking 2025-11-25) connected through Steward with agent keys. Listing
// filtered per agent, allowed and denied calls, the approval round trip on both revisions (exactly
// one upstream call per approval, bound to the approved arguments), and list_changed.
import t from 'tap'
import { ProtocolError } from '@modelcontextprotocol/client'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { jsonOf } from '../support/product-support.ts'
import { eventually, gatewayDecisions, legacyClient, mcpWorld, modernClient, pendingApprovals, textOf, vote } from '../support/mcp-support.ts'

const world = await mcpWorld(t)
const { app, keys, upstream, agentIds, ownerToken } = world
const calls = (tool: string) => upstream.calls.byTool[tool] ?? 0
const APPROVAL_NOTE = 'Steward: each call waits until a person approves it.'

/** The approval id at the end of a console approval URL. */
const approvalIdOf = (url: string) => url.slice(url.lastIndexOf('/') + 1)

t.test('tools/list: the upstream tools this agent may call, namespaced, with a note where a person decides', async (t) => {
  for (const connect of [modernClient, legacyClient]) {
    const bot = await (await connect(t, app, keys.bot)).listTools()
    t.same(
      bot.tools.map((tool) => [tool.name, tool.description]),
      [
        ['demo__echo', 'Answers the text it is given.'],
        ['demo__refund', `Refunds an order (an example: nothing is paid back).\n\n${APPROVAL_NOTE}`],
      ],
      `${connect.name}: bot sees echo, and refund with the approval note`,
    )
    t.same(bot.tools[0]!.inputSchema, { type: 'object', properties: { text: { type: 'string', description: 'What to say back.' } }, required: ['text'], additionalProperties: false }, 'the upstream schema, unchanged')
    const reader = await (await connect(t, app, keys.reader)).listTools()
    t.same(reader.tools.map((tool) => tool.name), ['demo__echo'], `${connect.name}: a tool the reader may never call is not listed`)
  }
})

t.test('an allowed call returns the upstream result, once, logged as a decision via mcp', async (t) => {
  const before = calls('echo')
  const modern = await (await modernClient(t, app, keys.bot)).callTool({ name: 'demo__echo', arguments: { text: 'from 2026' } })
  t.same(modern.content, [{ type: 'text', text: 'from 2026' }])
  t.notOk(modern.isError)
  const legacy = await (await legacyClient(t, app, keys.bot)).callTool({ name: 'demo__echo', arguments: { text: 'from 2025' } })
  t.same(legacy.content, [{ type: 'text', text: 'from 2025' }])
  t.equal(calls('echo'), before + 2, 'each call reached the upstream once')
  const logged = (await gatewayDecisions(app, agentIds.bot)).filter((row) => row.action === 'mcp.demo.echo')
  const byText = (text: string) => logged.find((row) => row.args.text === text)
  t.match(byText('from 2026'), { decision: 'allow', via: 'mcp', resource: 'demo', context: { mcp: { tool: 'demo__echo', client: { name: 'modern-test-client', version: '2.0.0' }, protocol_version: '2026-07-28' } } })
  t.match(byText('from 2025'), { decision: 'allow', via: 'mcp', context: { mcp: { client: { name: 'legacy-test-client', version: '1.32.0' }, protocol_version: '2025-11-25' } } })
})

t.test('a denied call is a tool error naming the policy, and never reaches the upstream', async (t) => {
  const before = calls('refund')
  for (const connect of [modernClient, legacyClient]) {
    const result = (await (await connect(t, app, keys.reader)).callTool({ name: 'demo__refund', arguments: { order: 'o-1', amount: 5 } })) as { isError?: boolean; content: unknown; _meta?: any }
    t.equal(result.isError, true, `${connect.name}: isError`)
    t.match(textOf(result), /^Steward denied demo__refund \(action mcp\.demo\.refund\): policy "No refunds for readers" \(version 1, deny, enforce\)\. Decision [0-9a-f-]{36}; nothing was sent upstream\.$/)
    t.match(result._meta?.['steward/decision'], { decision: 'deny', reasons: [{ policy_id: world.policies.noRefunds, name: 'No refunds for readers' }] })
  }
  t.equal(calls('refund'), before, 'the upstream never saw a refund')
})

t.test('2026-07-28: input_required with the console approval page; approved over HTTP, one call goes through', async (t) => {
  const before = calls('refund')
  const client = await modernClient(t, app, keys.bot, { capabilities: { elicitation: { url: {} } } })
  const asked: { url: string; message: string }[] = []
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params as { mode?: string; url: string; message: string }
    asked.push({ url: params.url, message: params.message })
    t.equal(params.mode, 'url')
    // The person opens the page and approves; the client then retries with the request state.
    await vote(app, ownerToken, approvalIdOf(params.url))
    return { action: 'accept' }
  })
  const result = await client.callTool({ name: 'demo__refund', arguments: { order: 'o-2', amount: 12 } })
  t.same(result.content, [{ type: 'text', text: 'Refunded 12 EUR on order o-2' }])
  t.equal(asked.length, 1, 'asked once')
  t.match(asked[0]!.url, /^https:\/\/app\.example\.com\/console\/#\/approvals\/[0-9a-f-]{36}$/)
  t.equal(calls('refund'), before + 1, 'exactly one upstream call')
  const approval = (await app.db.selectFrom('approvals').selectAll().where('approval_id', '=', approvalIdOf(asked[0]!.url)).executeTakeFirstOrThrow()) as any
  t.equal(approval.status, 'consumed', 'the approval was used')
  t.same([approval.action, approval.args], ['mcp.demo.refund', { order: 'o-2', amount: 12 }], 'it named the tool and the arguments')
})

t.test('2025-11-25: the call is held with progress until a person approves it, then goes through once', async (t) => {
  const before = calls('refund')
  const client = await legacyClient(t, app, keys.bot)
  const progress: string[] = []
  let approving: Promise<unknown> | null = null
  const call = client.callTool({ name: 'demo__refund', arguments: { order: 'o-3', amount: 7 } }, CallToolResultSchema, {
    timeout: 20_000,
    onprogress: (p) => {
      progress.push(p.message ?? '')
      approving ??= pendingApprovals(app).then((pending) => vote(app, ownerToken, pending.find((a) => a.args.order === 'o-3').approval_id))
    },
  })
  const result = await call
  await approving
  t.same(result.content, [{ type: 'text', text: 'Refunded 7 EUR on order o-3' }])
  t.ok(progress.length >= 1, 'progress was reported while held')
  t.match(progress[0], /^Waiting for a person to decide approval [0-9a-f-]{36} \(\d+ s\)$/)
  t.equal(calls('refund'), before + 1, 'exactly one upstream call')
})

/** A 2026 call in manual mode: its input_required answer, or its result. */
async function manualCall(client: Awaited<ReturnType<typeof modernClient>>, args: Record<string, unknown>, requestState?: string): Promise<any> {
  return client.request({ method: 'tools/call', params: { name: 'demo__refund', arguments: args, ...(requestState ? { requestState } : {}) } }, { allowInputRequired: true })
}

t.test('changed arguments after approval are denied; the approval stays for the approved ones', async (t) => {
  const client = await modernClient(t, app, keys.bot, { inputRequired: { autoFulfill: false } })
  const first = await manualCall(client, { order: 'o-4', amount: 10 })
  t.equal(first.resultType, 'input_required')
  t.type(first.requestState, 'string')
  t.same(first.inputRequests ?? {}, {}, 'no elicitation for a client without the capability')
  const approvalId = (await pendingApprovals(app)).find((a) => a.args.order === 'o-4').approval_id
  await vote(app, ownerToken, approvalId)
  const before = calls('refund')
  const changed = await manualCall(client, { order: 'o-4', amount: 1000 }, first.requestState)
  t.equal(changed.isError, true)
  t.match(textOf(changed), /the approval was given for other arguments/)
  t.equal(calls('refund'), before, 'nothing went upstream')
  const same = await manualCall(client, { order: 'o-4', amount: 10 }, first.requestState)
  t.same(same.content, [{ type: 'text', text: 'Refunded 10 EUR on order o-4' }], 'the approved arguments still go through')
  t.equal(calls('refund'), before + 1)
})

t.test('a declined elicitation ends the call with a tool error; the approval stays pending for a later call', async (t) => {
  const client = await modernClient(t, app, keys.bot, { capabilities: { elicitation: { url: {} } }, inputRequired: { autoFulfill: false } })
  const first = await manualCall(client, { order: 'o-7', amount: 2 })
  t.equal(first.inputRequests.steward_approval.params.mode, 'url', 'a URL-mode elicitation')
  const declined = await client.request(
    { method: 'tools/call', params: { name: 'demo__refund', arguments: { order: 'o-7', amount: 2 }, requestState: first.requestState, inputResponses: { steward_approval: { action: 'decline' } } } },
    { allowInputRequired: true },
  )
  t.equal((declined as { isError?: boolean }).isError, true)
  t.match(textOf(declined as { content?: unknown }), /^The approval page was not opened; approval [0-9a-f-]{36} stays pending/)
  t.ok((await pendingApprovals(app)).some((approval) => approval.args.order === 'o-7'), 'still pending')
})

t.test('two concurrent retries with one approval: one upstream call; a replay is a deny; a forged state is refused', async (t) => {
  const client = await modernClient(t, app, keys.bot, { inputRequired: { autoFulfill: false } })
  const args = { order: 'o-5', amount: 3 }
  const first = await manualCall(client, args)
  await vote(app, ownerToken, (await pendingApprovals(app)).find((a) => a.args.order === 'o-5').approval_id)
  const before = calls('refund')
  const both = await Promise.all([manualCall(client, args, first.requestState), manualCall(client, args, first.requestState)])
  t.equal(both.filter((result) => !result.isError).length, 1, 'one retry got the result')
  t.match(textOf(both.find((result) => result.isError)), /the approval is no longer usable/, 'the other a tool error')
  t.equal(calls('refund'), before + 1, 'exactly one upstream call')
  const replay = await manualCall(client, args, first.requestState)
  t.equal(replay.isError, true, 'a replayed requestState decides as a deny')
  const forged = first.requestState.slice(0, -4) + (first.requestState.endsWith('AAAA') ? 'BBBB' : 'AAAA')
  const refused = await manualCall(client, args, forged).catch((error: unknown) => error)
  t.ok(refused instanceof ProtocolError, 'a forged requestState is a JSON-RPC error')
  t.equal((refused as ProtocolError).code, -32602)
  t.equal(calls('refund'), before + 1, 'neither went upstream')
})

t.test('a denied approval ends the held call with a tool error', async (t) => {
  const client = await legacyClient(t, app, keys.bot)
  let denying: Promise<unknown> | null = null
  const result = await client.callTool({ name: 'demo__refund', arguments: { order: 'o-6', amount: 1 } }, CallToolResultSchema, {
    timeout: 20_000,
    onprogress: () => {
      denying ??= pendingApprovals(app).then((pending) => vote(app, ownerToken, pending.find((a) => a.args.order === 'o-6').approval_id, 'deny'))
    },
  })
  await denying
  t.equal(result.isError, true)
  t.match(textOf(result as { content?: unknown }), /the approval is no longer usable/)
})

t.test('a policy change reaches a listening 2026 client as list_changed, and the next list reflects it', async (t) => {
  let changes = 0
  const client = await modernClient(t, app, keys.bot, { listChanged: { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => void changes++ } } })
  await eventually(async () => client.autoOpenedSubscription !== undefined)
  t.same((await client.listTools()).tools.map((tool) => tool.name), ['demo__echo', 'demo__refund'])
  const patched = await app.call('PATCH', `/policies/${world.policies.echo}?organization_id=${app.vars.ORG_A}`, { token: app.vars.ADMIN_KEY_A, json: { effect: 'deny' } })
  t.equal(patched.status, 200)
  await eventually(async () => changes > 0)
  t.pass('notifications/tools/list_changed arrived')
  t.same((await client.listTools({}, { cacheMode: 'refresh' })).tools.map((tool) => tool.name), ['demo__refund'], 'echo is gone for this agent')
  const servers = await jsonOf(await app.call('GET', '/mcp/servers', { token: app.vars.VIEWER_KEY_A }))
  const demo = servers.servers.find((server: { name: string }) => server.name === 'demo')
  const seen = changes
  t.equal((await app.call('PATCH', `/mcp/servers/${demo.server_id}`, { token: app.vars.ADMIN_KEY_A, json: { enabled: false } })).status, 200)
  await eventually(async () => changes > seen)
  t.same((await client.listTools({}, { cacheMode: 'refresh' })).tools, [], 'a disabled upstream is announced too, and lists nothing')
  await app.call('PATCH', `/mcp/servers/${demo.server_id}`, { token: app.vars.ADMIN_KEY_A, json: { enabled: true } })
})

t.test('a listen stream ends when its agent key is revoked: no notifications for a key that no longer works', async (t) => {
  const created = await jsonOf(await app.call('POST', `/agents/${agentIds.bot}/keys`, { token: app.vars.ADMIN_KEY_A, json: {} }))
  const client = await modernClient(t, app, created.api_key, { listChanged: { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => {} } } })
  const subscription = await eventually(async () => client.autoOpenedSubscription)
  let ended: unknown = 'still open'
  void subscription.closed.then((cause: unknown) => (ended = cause))
  t.equal((await app.call('DELETE', `/keys/${created.key_id}`, { token: app.vars.ADMIN_KEY_A })).status, 204)
  await eventually(async () => ended !== 'still open')
  t.equal(ended, 'remote', 'the server closed the stream')
  const again = await app.call('POST', '/mcp', { token: created.api_key, json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} } })
  t.equal(again.status, 401, 'and the key opens nothing new')
})

t.test('a call over a budget is a tool error that says which limit, how much was used and when it resets', async (t) => {
  const budget = [{ name: 'echoes', kind: 'count', max: 0, window: { type: 'all_time' } }]
  const patched = await app.call('PATCH', `/policies/${world.policies.echo}`, { token: app.vars.ADMIN_KEY_A, json: { effect: 'allow', limits: budget } })
  t.equal(patched.status, 200)
  t.teardown(async () => void (await app.call('PATCH', `/policies/${world.policies.echo}`, { token: app.vars.ADMIN_KEY_A, json: { limits: [] } })))
  const before = calls('echo')
  const result = (await (await modernClient(t, app, keys.reader)).callTool({ name: 'demo__echo', arguments: { text: 'over budget' } })) as { isError?: boolean; content: unknown }
  t.equal(result.isError, true)
  t.match(textOf(result), /^Steward denied demo__echo \(action mcp\.demo\.echo\): Limit "echoes" of policy "Echo for everyone" \(count, all_time\): 0 used of 0, 0 remaining; this request needs 1\. Decision [0-9a-f-]{36}; nothing was sent upstream\.$/)
  t.equal(calls('echo'), before, 'nothing reached the upstream')
})
