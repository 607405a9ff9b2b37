// Shared setup for the MCP gateway tests: the example upstream (examples/mcp-upstream.ts, a real
// HTTP server built with the official SDK), a product app with it registered as `demo`, agents
// with their keys, policies on its tools, and the official clients of both protocol revisions
// connected through Steward's fetch handler (in process: the SDK transports take a fetch).
import type { Test } from 'tap'
import { Client, StreamableHTTPClientTransport, type ClientOptions } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startUpstream, type RunningUpstream } from '../../examples/mcp-upstream.ts'
import { jsonOf, productApp, type ProductApp } from './product-support.ts'

export const MCP_URL = 'http://localhost/mcp'

export interface McpWorld {
  readonly app: ProductApp
  readonly upstream: RunningUpstream
  /** Keys of the agents `bot` (echo allowed, refunds need approval) and `reader` (echo allowed, refunds denied). */
  readonly keys: { readonly bot: string; readonly reader: string }
  readonly agentIds: { readonly bot: string; readonly reader: string }
  readonly policies: Record<'echo' | 'refunds' | 'noRefunds', string>
  /** A signed-in owner of organization A, who may approve. */
  readonly ownerToken: string
}

async function ok(response: Response, what: string): Promise<any> {
  if (response.status >= 300) throw new Error(`${what}: ${response.status} ${await response.text()}`)
  return jsonOf(response)
}

export async function mcpWorld(t: Test, env: Record<string, string> = {}): Promise<McpWorld> {
  const upstream = await startUpstream()
  t.teardown(() => upstream.close())
  const app = await productApp(t, { env: { MCP_ALLOW_PRIVATE: 'true', MCP_APPROVAL_HOLD_SECONDS: '8', MCP_UPSTREAM_TIMEOUT_MS: '3000', ...env } })
  const { vars } = app
  await ok(await app.call('POST', '/mcp/servers', { token: vars.ADMIN_KEY_A, json: { name: 'demo', url: upstream.url } }), 'register the upstream')
  const keys: Record<string, string> = {}
  const agentIds: Record<string, string> = {}
  for (const handle of ['bot', 'reader']) {
    const agent = await ok(await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle } }), `agent ${handle}`)
    agentIds[handle] = agent.agent_id
    keys[handle] = (await ok(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }), `key of ${handle}`)).api_key
  }
  const policy = async (json: unknown) => (await ok(await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.ADMIN_KEY_A, json }), 'policy')).policy_id as string
  const policies = {
    echo: await policy({ name: 'Echo for everyone', effect: 'allow', actions: ['mcp.demo.echo'] }),
    refunds: await policy({ name: 'Refunds need a person', effect: 'require_approval', agents: ['bot'], actions: ['mcp.demo.refund'] }),
    noRefunds: await policy({ name: 'No refunds for readers', effect: 'deny', agents: ['reader'], actions: ['mcp.demo.refund'] }),
  }
  const login = await ok(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }), 'owner login')
  return { app, upstream, keys: keys as McpWorld['keys'], agentIds: agentIds as McpWorld['agentIds'], policies, ownerToken: login.access_token }
}

/** A fetch into the app's handler, as a client on loopback. */
export function appFetch(app: ProductApp): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => app.app.fetch(new Request(input, init), { remoteAddress: '127.0.0.1' })) as typeof fetch
}

/** An official 2.x client speaking 2026-07-28 through Steward, connected with the agent key. */
export async function modernClient(t: Test, app: ProductApp, key: string, options: ClientOptions = {}): Promise<Client> {
  const client = new Client({ name: 'modern-test-client', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } }, ...options })
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP_URL), { fetch: appFetch(app), requestInit: { headers: { authorization: `Bearer ${key}` } } }))
  t.teardown(() => client.close())
  return client
}

/** The official 1.x client (protocol 2025-11-25) through Steward, connected with the agent key. */
export async function legacyClient(t: Test, app: ProductApp, key: string): Promise<LegacyClient> {
  const client = new LegacyClient({ name: 'legacy-test-client', version: '1.32.0' })
  await client.connect(new LegacyTransport(new URL(MCP_URL), { fetch: appFetch(app), requestInit: { headers: { authorization: `Bearer ${key}` } } }))
  t.teardown(() => client.close())
  return client
}

/** A signed-in person approves (or denies) over HTTP. */
export async function vote(app: ProductApp, token: string, approvalId: string, kind: 'approve' | 'deny' = 'approve'): Promise<any> {
  return ok(await app.call('POST', `/approvals/${approvalId}/${kind}`, { token, json: {} }), `${kind} ${approvalId}`)
}

/** The pending approvals of organization A, newest first. */
export async function pendingApprovals(app: ProductApp): Promise<any[]> {
  return (await ok(await app.call('GET', '/approvals?status=pending', { token: app.vars.VIEWER_KEY_A }), 'pending approvals')).approvals
}

/** Polls until `check` holds (every 50 ms, up to `ms`). */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, ms = 10_000): Promise<T> {
  const until = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > until) throw new Error('timed out waiting')
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The text of a tool result's first content block. */
export function textOf(result: { content?: unknown }): string {
  const first = (result.content as { type: string; text?: string }[] | undefined)?.[0]
  return first?.type === 'text' ? (first.text ?? '') : ''
}

/** The decision rows the gateway logged for an agent, newest first. */
export async function gatewayDecisions(app: ProductApp, agentId: string): Promise<any[]> {
  return app.db.selectFrom('decisions').selectAll().where('agent_id', '=', agentId).orderBy('evaluated_at', 'desc').orderBy('decision_id').execute()
}
