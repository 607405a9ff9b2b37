// The MCP gateway's use cases (docs/mcp.md), whatever the protocol revision the agent speaks:
// the tools an agent may see, and a tool call as a decision. A call of `<server>__<tool>` is
// decided as the action `mcp.<server>.<tool>` for the agent of the calling key (via 'mcp', same
// log, seals, webhooks and approvals as POST /decisions); only an allow goes upstream, once,
// with the arguments decided on. A deny, a refused approval, an upstream that fails: a tool
// error that says why, never an allow because something failed.
import type { CallToolResult, Tool } from '@modelcontextprotocol/client'
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { Database } from '../database/schema.ts'
import { capabilityOf, type Reason } from '../engine/index.ts'
import { HttpError } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import type { ApprovalRecord } from '../storage/approvals.ts'
import { readDecisionContext } from '../storage/decision-context.ts'
import type { ApprovalHub } from './approvals.ts'
import type { DecisionAnswer, DecisionPrincipal, DecisionService } from './decisions.ts'
import { createGatewayApprovals, type ApprovalCall, type WaitOptions } from './mcp-gateway-approvals.ts'
import { gatewayToolName, listedTools, reasonsText } from './mcp-gateway-tools.ts'
import { UpstreamError, type UpstreamClients } from './mcp-gateway-upstream.ts'
import type { Upstream, UpstreamDirectory } from './mcp-upstreams.ts'
import type { PolicySetCache } from './policyset-cache.ts'
import { toolAction } from '../domain/mcp.ts'

/** Who calls: an agent key's principal, and the MCP client as it named itself. */
export interface GatewayCaller {
  readonly principal: DecisionPrincipal & { readonly agentId: string }
  /** The client's self-reported name and version (clientInfo); null when it gave none. */
  readonly client: { readonly name: string; readonly version: string } | null
  /** The protocol revision of the request, e.g. 2026-07-28 or 2025-11-25. */
  readonly protocolVersion: string | null
  /** The HTTP request's id (its decision and audit records carry it). */
  readonly requestId: string | null
  /** The traceparent of the request's span when tracing is on: the upstream call continues that trace. */
  readonly traceparent: string | null
}

/** An approval a call waits for. */
export interface PendingApproval {
  readonly approvalId: string
  readonly expiresAt: Date
  /** Where a person decides it: the console's approval view. */
  readonly url: string
  readonly decisionId: string | null
}

export type CallOutcome = { readonly kind: 'done'; readonly result: CallToolResult } | { readonly kind: 'pending'; readonly approval: PendingApproval }

/** A tool call as the gateway received it, after its name was split. */
export interface ToolCall {
  readonly name: string
  readonly args: Record<string, unknown>
}

export interface McpGateway {
  /** The enabled upstreams' tools this agent may call, namespaced; an upstream that fails is left out. */
  listTools(caller: GatewayCaller): Promise<Tool[]>
  /**
   * Decides the call (with `approvalId`, or the approval an identical call already asked for) and
   * forwards it on allow. Null when no enabled upstream has that name (the caller answers
   * "unknown tool", the same for every name it cannot see).
   */
  call(caller: GatewayCaller, call: ToolCall, approvalId: string | null, signal: AbortSignal | null): Promise<CallOutcome | null>
  /** Waits for the agent's approval to be decided; null when the agent has no such approval. */
  wait(caller: GatewayCaller, approvalId: string, options: WaitOptions): Promise<ApprovalRecord | null>
  /** The console page where a person decides the approval. */
  approvalUrl(approvalId: string): string
}

export interface McpGatewayDeps {
  readonly db: Kysely<Database>
  readonly clock: () => number
  readonly logger: Logger
  readonly config: Pick<Config, 'appUrl'>
  readonly decisions: DecisionService
  readonly hub: ApprovalHub
  readonly sets: PolicySetCache
  readonly upstreams: Pick<UpstreamDirectory, 'enabledUpstreams' | 'findUpstream'>
  readonly clients: UpstreamClients
}

/** A tool error: what the agent reads, and the decision behind it for a program (`_meta`). */
export function toolError(text: string, decision: { decision_id: string | null; decision: string; reasons: readonly Reason[] } | null = null): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text }],
    ...(decision ? { _meta: { 'steward/decision': { decision_id: decision.decision_id, decision: decision.decision, reasons: decision.reasons } } } : {}),
  }
}

/** The decision's resource: the server's name, or the value of the argument the server's record names. */
function resourceOf(upstream: Upstream, args: Record<string, unknown>): { resource: string } | { problem: string } {
  const name = upstream.resourceArgument
  if (name === null) return { resource: upstream.name }
  const value = args[name]
  if (typeof value === 'string') return { resource: value }
  if (typeof value === 'number' || typeof value === 'boolean') return { resource: String(value) }
  // Missing or structured: a policy on resources could not see it, so the call is not decided.
  return { problem: `Steward refused the call: argument "${name}" names the resource this call acts on and must be a string, number or boolean. Nothing was sent upstream.` }
}

/** The upstream's result as it gave it, but for the protocol's reserved `_meta` keys, which the gateway's own answer carries. */
function forwarded(result: CallToolResult): CallToolResult {
  if (!result._meta) return result
  const meta = Object.fromEntries(Object.entries(result._meta).filter(([key]) => !key.startsWith('io.modelcontextprotocol/')))
  const { _meta: _dropped, ...rest } = result
  return Object.keys(meta).length > 0 ? { ...rest, _meta: meta } : rest
}

export function createMcpGateway(deps: McpGatewayDeps): McpGateway {
  const approvals = createGatewayApprovals({ db: deps.db, hub: deps.hub, clock: deps.clock })
  const approvalUrl = (approvalId: string) => `${deps.config.appUrl}/console/#/approvals/${approvalId}`

  async function decide(caller: GatewayCaller, upstream: Upstream, call: ToolCall, tool: string, resource: string, approvalId: string | null): Promise<DecisionAnswer | CallOutcome> {
    const action = toolAction(upstream.name, tool)
    try {
      const { answer } = await deps.decisions.decide(caller.principal, {
        action,
        resource,
        args: call.args,
        context: { mcp: { tool: call.name, client: caller.client, protocol_version: caller.protocolVersion } },
        approval_id: approvalId,
        idempotency_key: null,
        via: 'mcp',
      }, { requestId: caller.requestId, now: deps.clock() })
      return answer
    } catch (error) {
      if (!(error instanceof HttpError)) throw error
      // No decision was given (bad arguments, a cap, the log unavailable): nothing goes upstream.
      return { kind: 'done', result: toolError(`Steward refused the call: ${error.message}. Nothing was sent upstream.`) }
    }
  }

  return {
    approvalUrl,
    async listTools(caller) {
      const { organizationId, agentId } = caller.principal
      const found = await readDecisionContext(deps.db, organizationId, { agentId })
      if (!found?.agent) return []
      const set = await deps.sets.get(organizationId, found.settings.ruleset_revision)
      if (!set) return []
      const agent = { handle: found.agent.handle, status: found.agent.status }
      const upstreams = await deps.upstreams.enabledUpstreams(organizationId)
      const lists = await Promise.all(
        upstreams.map((upstream) =>
          deps.clients.listTools(upstream).then(
            (tools) => listedTools(upstream.name, tools, (action) => capabilityOf(set, found.settings, agent, action)),
            (error: unknown) => {
              if (error instanceof UpstreamError) return []
              throw error
            },
          ),
        ),
      )
      return lists.flat()
    },

    async call(caller, call, approvalId, signal) {
      const ref = gatewayToolName(call.name)
      if (ref === null) return null
      const { organizationId, agentId, keyId } = caller.principal
      const upstream = await deps.upstreams.findUpstream(organizationId, ref.server)
      if (upstream === null) return null
      const located = resourceOf(upstream, call.args)
      if ('problem' in located) return { kind: 'done', result: toolError(located.problem) }
      const bound: ApprovalCall = { organizationId, agentId, keyId, action: toolAction(upstream.name, ref.tool), resource: located.resource, args: call.args }
      const using = approvalId ?? (await approvals.openFor(bound, new Date(deps.clock())))
      const answer = await decide(caller, upstream, call, ref.tool, located.resource, using)
      if ('kind' in answer) return answer
      if (answer.decision === 'require_approval' && answer.approval !== null) {
        approvals.remember(bound, answer.approval.approval_id)
        return { kind: 'pending', approval: { approvalId: answer.approval.approval_id, expiresAt: new Date(answer.approval.expires_at), url: approvalUrl(answer.approval.approval_id), decisionId: answer.decision_id } }
      }
      if (using !== null) approvals.forget(bound)
      if (answer.decision !== 'allow') {
        const text = `Steward denied ${call.name} (action ${bound.action}): ${reasonsText(answer.reasons)}. Decision ${answer.decision_id}; nothing was sent upstream.`
        return { kind: 'done', result: toolError(text, answer) }
      }
      try {
        return { kind: 'done', result: forwarded(await deps.clients.callTool(upstream, ref.tool, call.args, signal, caller.traceparent)) }
      } catch (error) {
        if (!(error instanceof UpstreamError)) throw error
        const ran = error.mayHaveRun ? ' It may or may not have run there.' : ''
        return { kind: 'done', result: toolError(`Steward allowed the call (decision ${answer.decision_id}), but ${error.message}.${ran}`, answer) }
      }
    },

    wait(caller, approvalId, options) {
      return approvals.wait({ organizationId: caller.principal.organizationId, agentId: caller.principal.agentId }, approvalId, options)
    },
  }
}
