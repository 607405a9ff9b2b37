// The MCP server of one gateway request, built with the official SDK (a low-level Server: the
// tools are the upstreams', not registered here): tools/list and tools/call over the gateway use
// cases (services/mcp-gateway.ts). What differs by protocol revision is only how a call waits for
// its approval:
// - 2026-07-28: at once an `input_required` result, with a URL-mode elicitation of the console's
//   approval page (form mode when the client has no URL mode) and a signed `requestState`
//   (services/mcp-gateway-state.ts); each retry waits up to MCP_APPROVAL_HOLD_SECONDS for the
//   decision, then answers the result, or `input_required` again while it is pending.
// - 2025 era (served statelessly): the call is held up to MCP_APPROVAL_HOLD_SECONDS, with progress
//   notifications when the client sent a progress token; still pending then, a tool error says so,
//   and calling again with the same arguments waits on the same approval.
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  inputRequired,
  inputResponse,
  PROTOCOL_VERSION_META_KEY,
  ProtocolError,
  ProtocolErrorCode,
  Server,
  type CallToolResult,
  type InputRequiredResult,
  type McpRequestContext,
  type ServerContext,
} from '@modelcontextprotocol/server'
import { isDatabaseUnavailable } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import type { Principal } from '../services/credentials.ts'
import { toolError, type CallOutcome, type GatewayCaller, type McpGateway, type PendingApproval, type ToolCall } from '../services/mcp-gateway.ts'
import type { RequestState, RequestStateCodec } from '../services/mcp-gateway-state.ts'

export const SERVER_INFO = { name: 'steward', title: 'Steward MCP gateway', version: '1.0.0' }
const ELICITATION_KEY = 'steward_approval'
/** The longest an approved approval stays usable after its expiry (a policy's use_within_seconds, at most a day). */
const MAX_USE_WINDOW_MS = 86_400_000
const INSTRUCTIONS =
  'Steward governs every tool call: each is decided by the policies of your organization for this agent, and logged. A refused call comes back as a tool error that says which policies refused it; some calls wait until a person approves them.'

/** What the HTTP layer (routes/mcp.ts) hands every request: the agent key's principal and, for the 2025 era, the client it named. */
export interface McpAuthExtra {
  readonly principal: Principal & { readonly agentId: string }
  /** From the 2025-era stateless session id (routes/mcp.ts); null when the request carried none. */
  readonly legacyClient: { readonly name: string; readonly version: string } | null
  readonly requestId: string
  /** The traceparent of the HTTP request's span (tracing on), else null. */
  readonly traceparent: string | null
}

export interface McpProtocolOptions {
  readonly gateway: McpGateway
  readonly codec: RequestStateCodec
  readonly holdMs: number
  readonly logger: Logger
}

function extraOf(ctx: { readonly http?: { readonly authInfo?: { readonly extra?: Record<string, unknown> } } }): McpAuthExtra {
  const extra = ctx.http?.authInfo?.extra as McpAuthExtra | undefined
  if (!extra?.principal) throw new ProtocolError(ProtocolErrorCode.InternalError, 'no principal')
  return extra
}

function clientOf(value: unknown): GatewayCaller['client'] {
  const info = value as { name?: unknown; version?: unknown } | undefined
  return typeof info?.name === 'string' && typeof info.version === 'string' ? { name: info.name.slice(0, 200), version: info.version.slice(0, 100) } : null
}

function callerOf(ctx: ServerContext, era: McpRequestContext['era']): GatewayCaller {
  const extra = extraOf(ctx)
  if (era === 'modern') {
    const envelope = (ctx.mcpReq.envelope ?? {}) as Record<string, unknown>
    const version = envelope[PROTOCOL_VERSION_META_KEY]
    return { principal: extra.principal, client: clientOf(envelope[CLIENT_INFO_META_KEY]), protocolVersion: typeof version === 'string' ? version : null, requestId: extra.requestId, traceparent: extra.traceparent }
  }
  const version = ctx.http?.req?.headers.get('mcp-protocol-version') ?? null
  return { principal: extra.principal, client: extra.legacyClient, protocolVersion: version, requestId: extra.requestId, traceparent: extra.traceparent }
}

/** Progress notifications for a client that sent a progress token; null for one that did not. */
function progressOf(ctx: ServerContext, token: string | number | undefined, approvalId: string): ((waitedMs: number) => void) | null {
  if (token === undefined) return null
  return (waitedMs) => {
    const seconds = Math.round(waitedMs / 1000)
    void ctx.mcpReq
      .notify({ method: 'notifications/progress', params: { progressToken: token, progress: seconds, message: `Waiting for a person to decide approval ${approvalId} (${seconds} s)` } })
      .catch(() => {})
  }
}

/** Progress ticks often enough to be seen within the hold, at most every 5 seconds. */
function tickMs(holdMs: number): number {
  return Math.min(5000, Math.max(1000, Math.floor(holdMs / 4)))
}

function stillPending(approval: { approvalId: string; url: string; expiresAt: Date }): CallToolResult {
  return toolError(
    `Steward holds this call until a person approves it: approval ${approval.approvalId} is still pending (decide it at ${approval.url}; it expires at ${approval.expiresAt.toISOString()}). Call the tool again with the same arguments to keep waiting; nothing was sent upstream.`,
  )
}

const unknownTool = (name: string) => new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool ${name} not found`)

/**
 * A handler whose failures other than protocol errors are logged and answered as a bare internal
 * error: the SDK would send an error's own message, and a database's can name its tables.
 */
function shielded<A extends unknown[], R>(logger: Logger, method: string, handler: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
  return (...args) =>
    handler(...args).catch((error: unknown) => {
      if (error instanceof ProtocolError) throw error
      const unavailable = isDatabaseUnavailable(error)
      const e = error as { name?: unknown; code?: unknown; message?: unknown }
      logger.log(unavailable ? 'warn' : 'error', 'MCP request failed', { method, error: String(e?.name ?? 'Error'), code: typeof e?.code === 'string' ? e.code : null, message: unavailable ? null : String(e?.message ?? '').slice(0, 300) })
      throw new ProtocolError(ProtocolErrorCode.InternalError, unavailable ? 'Service temporarily unavailable; try again shortly' : 'Internal error')
    })
}

/** The factory createMcpHandler calls for every request. */
export function mcpServerFactory(options: McpProtocolOptions): (ctx: McpRequestContext) => Server {
  const { gateway, codec, holdMs, logger } = options
  const listTools = shielded(logger, 'tools/list', async (caller: GatewayCaller) => ({ tools: await gateway.listTools(caller) }))
  const callTool = shielded(logger, 'tools/call', (era: McpRequestContext['era'], ctx: ServerContext, caller: GatewayCaller, call: ToolCall, token: string | number | undefined) =>
    era === 'modern' ? modernCall(ctx, caller, call, token) : legacyCall(ctx, caller, call, token),
  )

  async function legacyCall(ctx: ServerContext, caller: GatewayCaller, call: ToolCall, token: string | number | undefined): Promise<CallToolResult> {
    const first = await gateway.call(caller, call, null, ctx.mcpReq.signal)
    if (first === null) throw unknownTool(call.name)
    if (first.kind === 'done') return first.result
    const pending = first.approval
    const record = await gateway.wait(caller, pending.approvalId, { ms: holdMs, signal: ctx.mcpReq.signal, tickMs: tickMs(holdMs), tick: progressOf(ctx, token, pending.approvalId) })
    if (ctx.mcpReq.signal.aborted) return stillPending(pending)
    if (record !== null && record.status === 'pending') return stillPending({ ...pending, expiresAt: record.expires_at })
    const settled = await gateway.call(caller, call, pending.approvalId, ctx.mcpReq.signal)
    if (settled === null) throw unknownTool(call.name)
    return settled.kind === 'done' ? settled.result : stillPending(settled.approval)
  }

  async function askFor(ctx: ServerContext, pending: PendingApproval, call: ToolCall, withElicitation: boolean): Promise<InputRequiredResult> {
    const requestState = await codec.mint({ approvalId: pending.approvalId, tool: call.name, expiresAt: pending.expiresAt.getTime() + MAX_USE_WINDOW_MS }, ctx)
    if (!withElicitation) return inputRequired({ requestState })
    const capabilities = ((ctx.mcpReq.envelope ?? {}) as Record<string, unknown>)[CLIENT_CAPABILITIES_META_KEY] as { elicitation?: { url?: unknown; form?: unknown } } | undefined
    const elicitation = capabilities?.elicitation
    const message = `Steward holds the call of ${call.name} until a person approves it. Approval ${pending.approvalId}: ${pending.url}`
    if (elicitation?.url !== undefined) return inputRequired({ requestState, inputRequests: { [ELICITATION_KEY]: inputRequired.elicitUrl({ message, url: pending.url }) } })
    // An empty elicitation capability means form mode (the spec's default).
    if (elicitation !== undefined) return inputRequired({ requestState, inputRequests: { [ELICITATION_KEY]: inputRequired.elicit({ message, requestedSchema: { type: 'object', properties: {} } }) } })
    return inputRequired({ requestState })
  }

  async function modernCall(ctx: ServerContext, caller: GatewayCaller, call: ToolCall, token: string | number | undefined): Promise<CallToolResult | InputRequiredResult> {
    const state = ctx.mcpReq.requestState<RequestState>()
    if (state === undefined) {
      const outcome = await gateway.call(caller, call, null, ctx.mcpReq.signal)
      if (outcome === null) throw unknownTool(call.name)
      return outcome.kind === 'done' ? outcome.result : askFor(ctx, outcome.approval, call, true)
    }
    if (state.tool !== call.name) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'Invalid or expired requestState', { reason: 'invalid_request_state' })
    const answered = inputResponse(ctx.mcpReq.inputResponses, ELICITATION_KEY)
    if (answered.kind === 'elicit' && answered.action !== 'accept') {
      return toolError(`The approval page was not opened; approval ${state.approvalId} stays pending until a person decides it or it expires. Call the tool again with the same arguments to wait on it; nothing was sent upstream.`)
    }
    const record = await gateway.wait(caller, state.approvalId, { ms: holdMs, signal: ctx.mcpReq.signal, tickMs: tickMs(holdMs), tick: progressOf(ctx, token, state.approvalId) })
    const pendingOf = (outcome: CallOutcome | null): PendingApproval | null => (outcome?.kind === 'pending' ? outcome.approval : null)
    // Still pending, or the client went away while it waited: the approval is left for a retry.
    if ((record !== null && record.status === 'pending') || ctx.mcpReq.signal.aborted) {
      return askFor(ctx, { approvalId: state.approvalId, expiresAt: record?.expires_at ?? new Date(state.expiresAt - MAX_USE_WINDOW_MS), url: gateway.approvalUrl(state.approvalId), decisionId: null }, call, false)
    }
    const outcome = await gateway.call(caller, call, state.approvalId, ctx.mcpReq.signal)
    if (outcome === null) throw unknownTool(call.name)
    const again = pendingOf(outcome)
    return again ? askFor(ctx, again, call, false) : (outcome as Extract<CallOutcome, { kind: 'done' }>).result
  }

  return (requestContext) => {
    const { era } = requestContext
    const server = new Server(SERVER_INFO, {
      // 2025-era clients are served statelessly: no stream outlives a request to carry list_changed.
      capabilities: { tools: { listChanged: era === 'modern' } },
      instructions: INSTRUCTIONS,
      requestState: { verify: (text, ctx) => codec.verify(text, ctx) },
    })
    server.setRequestHandler('tools/list', (_request, ctx) => listTools(callerOf(ctx, era)))
    server.setRequestHandler('tools/call', async (request, ctx) => {
      const caller = callerOf(ctx, era)
      const call: ToolCall = { name: request.params.name, args: (request.params.arguments ?? {}) as Record<string, unknown> }
      const token = request.params._meta?.progressToken
      return callTool(era, ctx, caller, call, token)
    })
    return server
  }
}
