// The MCP gateway surface (docs/mcp.md): `/mcp`, one endpoint for every organization (the agent
// key says whose), speaking MCP over Streamable HTTP through the official SDK's createMcpHandler
// (protocol revision 2026-07-28, and 2025-era clients served statelessly). Before the SDK sees a
// request: the transport spec's Origin check (403) and a Host check against this server's own
// names (DNS rebinding), then the product API's guard (agent keys only; 401 carries the RFC 9728
// resource_metadata pointer), the body read within BODY_TIMEOUT_MS. Errors are JSON-RPC errors
// without an id. One SDK handler per organization, so a list_changed reaches only its streams.
import { createMcpHandler, localhostAllowedHostnames, validateHostHeader, type McpHttpHandler } from '@modelcontextprotocol/server'
import type { IRequest } from 'itty-router'
import type { Config } from '../config.ts'
import { readText } from '../http/body-text.ts'
import { HttpError, REASON } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { jsonText, type Reply } from '../http/reply.ts'
import type { Principal } from '../services/credentials.ts'
import type { Services } from '../services/index.ts'
import { MAX_PAYLOAD_BYTES } from '../services/decisions.ts'
import { createMcpGateway } from '../services/mcp-gateway.ts'
import { createRequestStateCodecFor } from '../services/mcp-gateway-state.ts'
import { createUpstreamClients } from '../services/mcp-gateway-upstream.ts'
import { createListWatch } from '../services/mcp-gateway-watch.ts'
import { createGuard } from './access.ts'
import type { Deps, RequestContext, Route, Surface } from './deps.ts'
import { mcpServerFactory, type McpAuthExtra } from './mcp-protocol.ts'

export const MCP_PATH = '/mcp'
/** Organizations with an SDK handler at once; the least recently used one is closed past this. */
const MAX_HANDLERS = 10_000
const AGENT_KEYS_ONLY = 'The MCP gateway takes an agent key (POST /agents/{agent_id}/keys): each tool call is decided for the key\'s agent'
/** A 2025-era client names itself only in `initialize`; this stateless session id carries the name to its later requests. */
const SESSION_PREFIX = 'stw1.'

/** A JSON-RPC error answer without an id, as the transport spec has refusals carry. */
function rpcError(status: number, code: number, message: string, headers: Record<string, string> = {}): Reply {
  return jsonText(status, JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), headers)
}

/** The origins that are this server's own: a browser page of the console or the API may call. */
function ownOrigins(config: Config): Set<string> {
  return new Set([config.baseUrl, config.productApiUrl, config.appUrl, ...config.mcpAllowedOrigins].map((url) => new URL(url).origin))
}

/** Host names this server answers the gateway on: those of its public URLs, and loopback. */
function ownHosts(config: Config): string[] {
  return [...new Set([config.baseUrl, config.productApiUrl, config.appUrl].map((url) => new URL(url).hostname).concat(localhostAllowedHostnames()))]
}

/** The RFC 9728 metadata URL of the gateway: the path-suffixed document (/.well-known/oauth-protected-resource/mcp). */
export function mcpResourceMetadataUrl(config: Config): string {
  const api = new URL(config.productApiUrl)
  return `${api.origin}/.well-known/oauth-protected-resource${api.pathname.replace(/\/+$/, '')}${MCP_PATH}`
}

function legacyClientOf(request: Request): McpAuthExtra['legacyClient'] {
  const session = request.headers.get('mcp-session-id')
  if (session === null || !session.startsWith(SESSION_PREFIX) || session.length > 600) return null
  try {
    const { n, v } = JSON.parse(Buffer.from(session.slice(SESSION_PREFIX.length), 'base64url').toString('utf8')) as { n?: unknown; v?: unknown }
    return typeof n === 'string' && typeof v === 'string' ? { name: n.slice(0, 200), version: v.slice(0, 100) } : null
  } catch {
    return null
  }
}

function sessionFor(body: unknown): string | null {
  const info = (body as { method?: unknown; params?: { clientInfo?: { name?: unknown; version?: unknown } } } | null)?.params?.clientInfo
  if ((body as { method?: unknown })?.method !== 'initialize' || typeof info?.name !== 'string' || typeof info.version !== 'string') return null
  return SESSION_PREFIX + Buffer.from(JSON.stringify({ n: info.name.slice(0, 200), v: info.version.slice(0, 100) })).toString('base64url')
}

/** How often an open listen stream's credential is checked again (a revoked key's stream is closed). */
const RECHECK_MS = 2000

/**
 * A stream that runs `done` once when it ends, fails or its reader goes away; with `stillAllowed`,
 * it is also ended when that check, run every RECHECK_MS, says no or fails (fail closed).
 */
function watched(body: ReadableStream<Uint8Array>, done: () => void, stillAllowed?: () => Promise<boolean>): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  let timer: ReturnType<typeof setInterval> | null = null
  let finished = false
  const finish = () => {
    if (finished) return false
    finished = true
    if (timer !== null) clearInterval(timer)
    done()
    return true
  }
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (!stillAllowed) return
      timer = setInterval(() => {
        void stillAllowed()
          .catch(() => false)
          .then((allowed) => {
            if (allowed || !finish()) return
            controller.close()
            void reader.cancel().catch(() => {})
          })
      }, RECHECK_MS)
      timer.unref?.()
    },
    async pull(controller) {
      try {
        const { value, done: ended } = await reader.read()
        if (finished) return
        if (ended) {
          finish()
          controller.close()
        } else controller.enqueue(value)
      } catch (error) {
        if (finish()) controller.error(error)
      }
    },
    cancel(reason) {
      finish()
      return reader.cancel(reason)
    },
  })
}

export function createMcpSurface(config: Config, deps: Deps, services: Services): Surface {
  const guard = createGuard(services.credentials, services.apiLimiter, services.apiOrgLimiter)
  const clients = createUpstreamClients({ logger: deps.logger, timeoutMs: config.mcpUpstreamTimeoutMs, outbound: { allowPrivate: config.mcpAllowPrivate, setting: 'MCP_ALLOW_PRIVATE' }, clock: deps.clock, telemetry: deps.telemetry })
  const gateway = createMcpGateway({ db: deps.db, clock: deps.clock, logger: deps.logger, config, decisions: services.decisions, hub: services.approvals, sets: services.sets, upstreams: services.mcpServers, clients })
  const codec = createRequestStateCodecFor(services.secrets, deps.logger, deps.clock)
  const factory = mcpServerFactory({ gateway, codec, holdMs: config.mcpApprovalHoldSeconds * 1000, logger: deps.logger })
  const handlers = new Map<string, McpHttpHandler>()
  const watch = createListWatch({ db: deps.db, logger: deps.logger, notify: (organizationId) => handlers.get(organizationId)?.notify.toolsChanged() })
  const unsubscribe = [
    services.mcpServers.onChange((organizationId) => {
      clients.forget(organizationId)
      watch.changed(organizationId)
    }),
    clients.onToolsChanged((organizationId) => watch.changed(organizationId)),
  ]
  const origins = ownOrigins(config)
  const hosts = ownHosts(config)
  const challenge = `Bearer resource_metadata="${mcpResourceMetadataUrl(config)}"`
  const maxBody = Math.max(config.bodyLimitBytes, 4 * MAX_PAYLOAD_BYTES)

  const handlerFor = (organizationId: string): McpHttpHandler => {
    let handler = handlers.get(organizationId)
    if (handler) {
      handlers.delete(organizationId)
      handlers.set(organizationId, handler)
      return handler
    }
    handler = createMcpHandler(factory, {
      maxRequestBodySize: maxBody,
      // A held call streams comment frames this often: well within the idle timeout a runtime may
      // put on a quiet connection (Bun's is HEADERS_TIMEOUT_MS).
      keepAliveMs: 5000,
      onerror: (error) => deps.logger.log('debug', 'MCP request refused', { organizationId, error: error.message.slice(0, 200) }),
    })
    handlers.set(organizationId, handler)
    if (handlers.size > MAX_HANDLERS) {
      const [oldest, evicted] = handlers.entries().next().value!
      handlers.delete(oldest)
      void evicted.close()
    }
    return handler
  }

  async function serve(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    if (principal.agentId === null) return rpcError(403, -32000, AGENT_KEYS_ONLY)
    const agentKey = principal as Principal & { agentId: string }
    let parsedBody: unknown = undefined
    if (request.method === 'POST') {
      const text = await readText(request as unknown as Request, maxBody, config.bodyTimeoutMs)
      try {
        parsedBody = JSON.parse(text)
      } catch {
        return rpcError(400, -32700, 'Parse error: the body is not JSON')
      }
    }
    const extra: McpAuthExtra = {
      principal: agentKey,
      legacyClient: legacyClientOf(request as unknown as Request),
      requestId: ctx.requestId,
      traceparent: deps.telemetry?.traceparentOf(request as unknown as Request) ?? null,
    }
    const authInfo = { token: '', clientId: principal.keyId ?? '', scopes: [], extra: extra as unknown as Record<string, unknown> }
    const response = await handlerFor(principal.organizationId).fetch(request as unknown as Request, parsedBody === undefined ? { authInfo } : { authInfo, parsedBody })
    const headers: Record<string, string> = {}
    response.headers.forEach((value, name) => (headers[name] = value))
    const session = response.ok ? sessionFor(parsedBody) : null
    if (session !== null) headers['mcp-session-id'] = session
    if (response.body === null) return { status: response.status, body: null, headers }
    if (!(headers['content-type'] ?? '').startsWith('text/event-stream')) return { status: response.status, body: await response.text(), headers }
    const listening = (parsedBody as { method?: unknown } | undefined)?.method === 'subscriptions/listen'
    if (!listening) return { status: response.status, body: null, stream: watched(response.body, () => {}), headers }
    // Continuous authorization: a listen stream lives only as long as its key (revoked, expired or
    // its agent deleted: the stream ends, in every process, through the credential feed).
    const authorization = request.headers.get('authorization')
    const stillAllowed = async () => {
      const now = await services.credentials.authenticate(authorization, deps.clock())
      return !(now instanceof HttpError) && now.agentId === agentKey.agentId
    }
    return { status: response.status, body: null, stream: watched(response.body, watch.watch(principal.organizationId, agentKey.agentId), stillAllowed), headers }
  }

  const guarded = guard.protect('decisions:check', serve, { agentKeys: true })

  async function handle(request: IRequest, ctx: RequestContext): Promise<Reply | HttpError> {
    const origin = request.headers.get('origin')
    if (origin !== null && !origins.has(origin)) {
      return rpcError(403, -32000, `Origin ${origin.slice(0, 200)} may not call this MCP endpoint (MCP_ALLOWED_ORIGINS lists the browser origins that may)`)
    }
    const host = validateHostHeader(request.headers.get('host') ?? new URL(request.url).host, hosts)
    if (!host.ok) return rpcError(403, -32000, `Host ${(host.hostname ?? '').slice(0, 200)} is not this server's: set PRODUCT_API_URL (or BASE_URL, APP_URL) to the URL clients use`)
    const answer = await guarded(request, ctx)
    if (answer instanceof HttpError && answer.status === 401) {
      const error = answer.message === 'Authentication required' ? '' : ', error="invalid_token"'
      return rpcError(401, -32001, answer.message, { 'WWW-Authenticate': `${challenge}${error}` })
    }
    return answer
  }

  const routes: Route[] = (['POST', 'GET', 'DELETE'] as const).map((method) => ({ method, path: MCP_PATH, handler: handle, doc: docOf(method) }))
  return {
    name: 'mcp',
    routes,
    errorBody: (status, error) => ({ jsonrpc: '2.0', error: { code: status === 401 ? -32001 : -32000, message: error.message || (REASON[status] ?? 'Error') }, id: null }),
    headers: { 'Cache-Control': 'no-store' },
    async close() {
      for (const stop of unsubscribe) stop()
      watch.close()
      await Promise.all([...handlers.values()].map((handler) => handler.close()))
      handlers.clear()
      await clients.close()
    },
  }
}

function docOf(method: 'POST' | 'GET' | 'DELETE'): OperationDoc {
  return {
    operationId: `mcp${method[0]}${method.slice(1).toLowerCase()}`,
    summary: method === 'POST' ? 'MCP gateway: one JSON-RPC message (Streamable HTTP)' : `MCP gateway: ${method} (answered 405: the gateway keeps no session)`,
    description: 'Model Context Protocol over Streamable HTTP, revision 2026-07-28 and 2025-era clients (docs/mcp.md). Takes an agent key as bearer token.',
    tags: ['MCP'],
    scopes: ['decisions:check'],
    responses: {
      200: { description: 'A JSON-RPC response, or a stream of server-sent events.' },
      401: { description: 'No valid agent key; WWW-Authenticate names the protected-resource metadata (RFC 9728).' },
      403: { description: 'Not an agent key, an Origin not allowed, or a Host not this server\'s.' },
    },
  }
}
