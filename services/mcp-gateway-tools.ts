// How the gateway shows upstream tools, and what it tells an agent about a refusal. A tool
// `refund` of the upstream server `billing` is listed as `billing__refund` and decided as the
// action `mcp.billing.refund` (domain/mcp.ts). Pure: no I/O.
import type { Tool } from '@modelcontextprotocol/client'
import { namespacedTool, splitToolName, toolAction } from '../domain/mcp.ts'
import type { CapabilityEntry, Reason } from '../engine/index.ts'

/** The spec's limit on a tool name (server/tools, Tool Names): a longer listed name is left out. */
export const MAX_TOOL_NAME = 128
/** The characters the spec allows in a tool name; an upstream tool named otherwise is left out. */
const TOOL_NAME = /^[A-Za-z0-9_.-]+$/

export interface ToolRef {
  readonly server: string
  readonly tool: string
}

/** `billing__refund` → billing, refund; null for a name the gateway never lists (nor calls). */
export function gatewayToolName(name: string): ToolRef | null {
  if (name.length > MAX_TOOL_NAME || !TOOL_NAME.test(name)) return null
  return splitToolName(name)
}

/**
 * What the listing says of a tool the agent may call only under conditions, or null when it may
 * call it freely. A tool it may never call (deny) is not listed at all.
 */
export function capabilityNote(entry: CapabilityEntry): string | null {
  if (entry.decision === 'require_approval') return 'Steward: each call waits until a person approves it.'
  if (entry.decision !== 'conditional') return null
  const otherwise = entry.otherwise === 'allow' ? '' : entry.otherwise === 'require_approval' ? ' Otherwise each call waits until a person approves it.' : ' Otherwise it is refused.'
  const condition = (entry.condition ?? '').length > 300 ? `${entry.condition!.slice(0, 300)}…` : entry.condition
  return `Steward: a policy condition decides each call (${condition}).${otherwise}`
}

/**
 * The upstream's tools as this agent sees them: renamed into the server's namespace, those it
 * may never call left out, and a note on each that needs an approval or meets a condition. A
 * name the spec does not allow (too long once prefixed, odd characters) or seen twice is left out.
 */
export function listedTools(server: string, tools: readonly Tool[], capability: (action: string) => CapabilityEntry): Tool[] {
  const out: Tool[] = []
  const seen = new Set<string>()
  for (const tool of tools) {
    const name = namespacedTool(server, tool.name)
    if (seen.has(name) || !gatewayToolName(name)) continue
    seen.add(name)
    const entry = capability(toolAction(server, tool.name))
    if (entry.decision === 'deny') continue
    const note = capabilityNote(entry)
    const description = note === null ? tool.description : tool.description ? `${tool.description}\n\n${note}` : note
    const { execution: _execution, ...rest } = tool as Tool & { execution?: unknown }
    out.push({ ...rest, name, ...(description === undefined ? {} : { description }) })
  }
  return out
}

const RULE_TEXT: Readonly<Record<string, string>> = {
  default_decision: "no policy allows it, and the organization's default decision applies",
  agent_suspended: 'this agent is suspended',
  unknown_agent: 'this agent is not known to the organization',
  approval_mismatch: 'the approval was given for other arguments',
  approval_unusable: 'the approval is no longer usable (denied, expired, cancelled or already used)',
  approval: 'an approval was used',
}

/** A rule's sentence; a limit's reason carries its own (the limit, window, used and remaining). */
function ruleText(reason: Extract<Reason, { rule: string }>): string {
  const message = (reason as { message?: unknown }).message
  if (typeof message === 'string' && message.length > 0) return message
  return RULE_TEXT[reason.rule] ?? reason.rule
}

/** The reasons of a decision as a sentence: each policy by name, version and effect, or the rule. */
export function reasonsText(reasons: readonly Reason[]): string {
  if (reasons.length === 0) return 'no reason was given'
  return reasons
    .map((reason) => ('rule' in reason ? ruleText(reason) : `policy "${reason.name}" (version ${reason.version}, ${reason.effect}, ${reason.mode})`))
    .join('; ')
}
