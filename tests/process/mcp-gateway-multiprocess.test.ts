// The MCP gateway across two real server processes on one PostgreSQL database: a 2025-era call
// held by process B is released by an approval a person makes through process A (the approval
// feed, LISTEN/NOTIFY), and a 2026-07-28 requestState minted by B is honoured by A (one
// SECRETS_KEY). Runs only with TEST_DATABASE_URL (a scratch database per run).
import t from 'tap'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { createScratchDatabase, NO_RATE_LIMITS, seedWorld, startServer, type ServerProcess } from '../../bench/lib.ts'
import { startUpstream } from '../../examples/mcp-upstream.ts'
import { eventually, textOf } from '../support/mcp-support.ts'

const url = process.env.TEST_DATABASE_URL
if (!url) {
  t.test('the MCP gateway across two processes on one PostgreSQL', { skip: 'needs PostgreSQL: set TEST_DATABASE_URL (PGlite is one process per data directory)' }, async () => {})
} else {
  const scratch = await createScratchDatabase(url, 'steward_mcp')
  t.teardown(() => scratch.drop())
  const upstream = await startUpstream()
  t.teardown(() => upstream.close())
  const env = {
    ...NO_RATE_LIMITS,
    DATABASE_URL: scratch.url,
    SECRETS_KEY: Buffer.alloc(32, 7).toString('base64url'),
    MCP_ALLOW_PRIVATE: 'true',
    MCP_APPROVAL_HOLD_SECONDS: '30',
    PASSWORD_HASH_COST: '10',
  }
  const a: ServerProcess = await startServer('node', env)
  t.teardown(() => a.stop())
  const b: ServerProcess = await startServer('node', env)
  t.teardown(() => b.stop())
  const world = await seedWorld(scratch.url, 0)
  if (!world) throw new Error('could not seed an organization and key')

  const call = async (server: ServerProcess, method: string, path: string, body?: unknown, token = world.key) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  }

  // A person who may approve: invited, accepted, signed in (through A).
  const invited = await call(a, 'POST', '/invitations', { email: 'approver@example.com', role: 'admin' })
  await call(a, 'POST', '/invitations/accept', { token: invited.body.token, password: 'a long enough password' }, '')
  const person = (await call(a, 'POST', '/auth/login', { email: 'approver@example.com', password: 'a long enough password' }, '')).body.access_token as string
  const registered = await call(a, 'POST', '/mcp/servers', { name: 'demo', url: upstream.url })
  const agent = await call(a, 'POST', '/agents', { handle: 'bot' })
  const agentKey = (await call(a, 'POST', `/agents/${agent.body.agent_id}/keys`, {})).body.api_key as string
  const policy = await call(a, 'POST', `/policies?organization_id=${world.organizationId}`, { name: 'Refunds need a person', effect: 'require_approval', actions: ['mcp.demo.refund'] })
  const pending = async (order: string) => ((await call(a, 'GET', '/approvals?status=pending')).body.approvals as any[]).find((approval) => approval.args.order === order)

  t.test('setup through A', async (t) => {
    t.equal(registered.status, 201, 'upstream registered')
    t.equal(policy.status, 201, 'policy created')
    t.type(person, 'string', 'an approver signed in')
    t.type(agentKey, 'string', 'an agent key')
  })

  t.test('a 2025-era call held by B is released by an approval made through A', async (t) => {
    const client = new LegacyClient({ name: 'legacy', version: '1.0.0' })
    await client.connect(new LegacyTransport(new URL(`${b.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agentKey}` } } }))
    t.teardown(() => client.close())
    const started = performance.now()
    const held = client.callTool({ name: 'demo__refund', arguments: { order: 'mp-1', amount: 4 } }, CallToolResultSchema, { timeout: 60_000 })
    const approval = await eventually(() => pending('mp-1'))
    const voted = await call(a, 'POST', `/approvals/${approval.approval_id}/approve`, {}, person)
    t.equal(voted.status, 200, 'approved through A')
    const approvedAt = performance.now()
    const result = await held
    t.same(result.content, [{ type: 'text', text: 'Refunded 4 EUR on order mp-1' }], 'B forwarded the call')
    t.equal(upstream.calls.byTool.refund, 1, 'exactly once')
    t.ok(performance.now() - started < 30_000, 'released by the approval, not by the end of the hold')
    t.comment(`approval through A → result from B: ${(performance.now() - approvedAt).toFixed(0)} ms`)
  })

  t.test('a 2026-07-28 requestState minted by B is honoured by A', async (t) => {
    const connect = async (server: ServerProcess) => {
      const client = new Client({ name: 'modern', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, inputRequired: { autoFulfill: false } })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${agentKey}` } } }))
      t.teardown(() => client.close())
      return client
    }
    const params = { name: 'demo__refund', arguments: { order: 'mp-2', amount: 9 } }
    const first = (await (await connect(b)).request({ method: 'tools/call', params }, { allowInputRequired: true })) as any
    t.equal(first.resultType, 'input_required')
    await call(a, 'POST', `/approvals/${(await pending('mp-2')).approval_id}/approve`, {}, person)
    const retried = (await (await connect(a)).request({ method: 'tools/call', params: { ...params, requestState: first.requestState } }, { allowInputRequired: true })) as any
    t.equal(textOf(retried), 'Refunded 9 EUR on order mp-2')
    t.equal(upstream.calls.byTool.refund, 2)
  })
}
