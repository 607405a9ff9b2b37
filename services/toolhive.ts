// Steward as the policy decision point of a ToolHive proxy (docs/mcp.md#toolhive): ToolHive's HTTP
// authorizer (stacklok/toolhive pkg/authz/authorizers/http) posts a PORC document, principal,
// operation, resource and context, for every tool call, prompt get and resource read, and lets
// the request through only on {"allow": true}. Each PORC becomes a logged decision of the caller's
// organization, named as the MCP gateway names its own (mcp.<server>.<tool>), so one policy
// governs a tool whichever of the two is in the path.
import type { Kysely } from 'kysely'
import { HANDLE } from '../domain/agents.ts'
import { toolAction } from '../domain/mcp.ts'
import { HttpError } from '../http/errors.ts'
import { findOpenApprovals } from '../storage/approval-matches.ts'
import type { Database } from '../database/schema.ts'
import { boundHash, requesterOf, type DecisionAnswer, type DecisionInput, type DecisionPrincipal } from './decision-answers.ts'
import type { DecisionCall, DecisionService } from './decisions.ts'

/** A PORC document as ToolHive's PORCBuilder builds it (porc.go), its shape already checked. */
export interface Porc {
  readonly principal: Record<string, unknown>
  readonly operation: string
  readonly resource: string
  readonly context: Record<string, unknown>
}

/** What ToolHive reads ({"allow": bool}), with the decision behind it for a person reading the answer. */
export interface ToolhiveAnswer extends Pick<DecisionAnswer, 'decision_id' | 'decision' | 'reasons' | 'approval'> {
  readonly allow: boolean
}

/** The MCP feature each operation ToolHive asks about acts on (authorizers/core.go). */
const FEATURES: Readonly<Record<string, 'tool' | 'prompt' | 'resource'>> = { 'mcp:tool:call': 'tool', 'mcp:prompt:get': 'prompt', 'mcp:resource:read': 'resource' }
const MRN = 'mrn:mcp:'
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
const MAX_ACTION = 200
const MAX_RESOURCE = 1000

export const UNSUPPORTED_OPERATION = 'Field operation must be mcp:tool:call, mcp:prompt:get or mcp:resource:read'
export const NO_AGENT = 'ToolHive\'s server name is not an agent handle: use an agent key, or name the ToolHive server with 1 to 64 characters of a-z, 0-9, ".", "_" or "-"'

/** The decision request a PORC asks for, and the agent it names when the key is not an agent's. */
export function porcToInput(principal: Pick<DecisionPrincipal, 'agentId'>, porc: Porc): DecisionInput {
  const feature = FEATURES[porc.operation]
  if (feature === undefined) throw new HttpError(400, UNSUPPORTED_OPERATION)
  // mrn:mcp:<server>:<feature>:<id> (porc.go buildResource); the id of a resource is a URI, colons and all.
  const rest = porc.resource.startsWith(MRN) ? porc.resource.slice(MRN.length) : null
  const split = rest === null ? -1 : rest.indexOf(`:${feature}:`)
  if (rest === null || split <= 0 || split + feature.length + 2 >= rest.length) {
    throw new HttpError(400, `Field resource must be mrn:mcp:<server>:${feature}:<name> for operation ${porc.operation}`)
  }
  const server = rest.slice(0, split)
  const name = rest.slice(split + feature.length + 2)
  const action = feature === 'tool' ? toolAction(server, name) : feature === 'prompt' ? `mcp-prompt.${server}.${name}` : `mcp-resource.${server}`
  const resource = feature === 'resource' ? name : server
  if (action.length > MAX_ACTION || !NO_CONTROL.test(action)) throw new HttpError(400, `The action a PORC names (${feature === 'tool' ? 'mcp.<server>.<tool>' : feature === 'prompt' ? 'mcp-prompt.<server>.<prompt>' : 'mcp-resource.<server>'}) must be at most ${MAX_ACTION} characters without control characters`)
  if (resource.length > MAX_RESOURCE || !NO_CONTROL.test(resource)) throw new HttpError(400, `The ${feature === 'resource' ? 'resource URI' : 'server name'} must be at most ${MAX_RESOURCE} characters without control characters`)
  if (principal.agentId === null && !HANDLE.test(server)) throw new HttpError(400, NO_AGENT)
  const mcp = objectOr(porc.context.mcp, 'context.mcp')
  const args = objectOr(mcp.args, 'context.mcp.args')
  const annotations = mcp.annotations === undefined ? undefined : objectOr(mcp.annotations, 'context.mcp.annotations')
  const subject = porc.principal.sub
  const context: Record<string, unknown> = {
    ...(typeof subject === 'string' ? { on_behalf_of: subject } : {}),
    principal: porc.principal,
    toolhive: { operation: porc.operation, resource: porc.resource },
    ...(annotations === undefined ? {} : { tool_annotations: annotations }),
  }
  return {
    agent: principal.agentId === null ? server : undefined,
    action,
    resource,
    args,
    context,
    approval_id: null,
    idempotency_key: null,
    via: 'toolhive',
  }
}

/** An optional JSON object of the PORC: absent is empty, anything but an object is refused. */
function objectOr(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value)) throw new HttpError(400, `Field ${field} must be a JSON object`)
  return value as Record<string, unknown>
}

export interface ToolhiveDeps {
  readonly db: Kysely<Database>
  readonly decisions: DecisionService
}

export interface ToolhiveCall extends DecisionCall {
  readonly now: number
  /** ToolHive's ?probe=true: what the decision would be, with nothing written. */
  readonly probe?: boolean
}

/**
 * Decides a PORC and logs the decision. ToolHive cannot wait for a person nor carry an approval
 * id: require_approval answers allow false and asks the approvers; the same request again (same
 * credential, agent, action, resource and arguments) uses that approval instead of asking again,
 * and once it is approved goes through once.
 */
export async function authorizeToolhive(deps: ToolhiveDeps, principal: DecisionPrincipal, porc: Porc, call: ToolhiveCall): Promise<ToolhiveAnswer> {
  const asked = porcToInput(principal, porc)
  if (call.probe) return answerOf(await deps.decisions.simulate(principal, asked, call))
  const input = { ...asked, approval_id: await openApproval(deps, principal, asked, call) }
  const { answer } = await deps.decisions.decide(principal, input, call)
  return answerOf(answer)
}

/**
 * The approval this request already asked for, when the policies still ask for one: a request
 * naming a pending approval is held at require_approval even if a policy now allows it.
 */
async function openApproval(deps: ToolhiveDeps, principal: DecisionPrincipal, input: DecisionInput, call: ToolhiveCall): Promise<string | null> {
  const now = new Date(call.now)
  const agent = principal.agentId !== null ? { id: principal.agentId } : { handle: input.agent! }
  const open = await findOpenApprovals(deps.db, { organizationId: principal.organizationId, agent, action: input.action, resource: input.resource, requestedBy: requesterOf(principal) }, now)
  const match = open.find((approval) => approval.args_sha256 === boundHash(principal.organizationId, approval.agent_handle, input))
  if (match === undefined) return null
  const policies = await deps.decisions.simulate(principal, input, call)
  return policies.decision === 'require_approval' ? match.approval_id : null
}

function answerOf(answer: DecisionAnswer): ToolhiveAnswer {
  return { allow: answer.decision === 'allow', decision_id: answer.decision_id, decision: answer.decision, reasons: answer.reasons, approval: answer.approval }
}
