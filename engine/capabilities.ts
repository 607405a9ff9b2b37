// What one agent may do, per action pattern named by the policies in force, without a request:
// allow, deny, require_approval, or conditional when a condition (or a resource restriction)
// decides at request time. Only enforce-mode policies count: monitor-mode ones grant and
// refuse nothing.
//
// The entry for a pattern P is decided by the policies whose action patterns cover all of P
// (`*` and `payments.*` cover `payments.refund`); a policy naming a narrower pattern gets its
// own entry. A `*` in P is treated as a character the other pattern's literals cannot match,
// which makes "Q matches the text of P" exactly "every action P matches, Q matches".
import { windowLabel } from './limits.ts'
import { compilePattern } from './patterns.ts'
import { candidatesFor, type CompiledPolicy, type CompiledPolicySet } from './policyset.ts'
import type { AgentStatus, Decision, Effect, OrganizationSettings, Rule } from './types.ts'

export type Capability = Decision | 'conditional'

export interface CapabilityPolicy {
  readonly policy_id: string
  readonly version: number
  readonly name: string
  readonly effect: Effect
  readonly condition: string | null
  readonly resources: readonly string[]
  /** Present when the policy carries limits (docs/budgets.md): what an allow under it may use per window. */
  readonly limits?: readonly CapabilityLimit[]
}

export interface CapabilityLimit {
  readonly name: string
  readonly kind: 'count' | 'spend'
  readonly max: number
  readonly currency: string | null
  readonly scope: string
  /** The window, as "day (Europe/Paris)", "rolling 3600 s", "all_time" or "per_call". */
  readonly window: string
  readonly mode: 'enforce' | 'monitor'
}

export interface CapabilityEntry {
  readonly action: string
  readonly decision: Capability
  /**
   * For `conditional`: the conditions that can change the outcome, joined with `||` when there
   * are several (each policy's own condition is in `policies`); null otherwise.
   */
  readonly condition: string | null
  /** For `conditional`: the decision when no condition holds; null otherwise. */
  readonly otherwise: Decision | null
  readonly policies: readonly CapabilityPolicy[]
  /** Set when a rule, not a policy, decides every action (suspended or unknown agent). */
  readonly rule?: Rule
}

export interface CapabilityAgent {
  readonly handle: string
  readonly status: AgentStatus
}

const STRENGTH: Readonly<Record<Effect, number>> = { allow: 1, require_approval: 2, deny: 3 }

/** The agent's capabilities, one entry per distinct action pattern, in the order policies name them. */
export function capabilitiesOf(set: CompiledPolicySet, settings: OrganizationSettings, agent: CapabilityAgent): CapabilityEntry[] {
  const governing = set.policies.filter((policy) => policy.mode === 'enforce' && policy.matchAgent(agent.handle))
  const patterns = [...new Set(governing.flatMap((policy) => policy.actions))]
  const rule = ruleFor(settings, agent.status)
  if (rule !== null) return patterns.map((action) => ({ action, decision: 'deny', condition: null, otherwise: null, policies: [], rule }))
  return patterns.map((action) => entryFor(action, governing, settings))
}

/** The agent's capability for one concrete action (an MCP tool's, say), from the policies that can apply to it. */
export function capabilityOf(set: CompiledPolicySet, settings: OrganizationSettings, agent: CapabilityAgent, action: string): CapabilityEntry {
  const rule = ruleFor(settings, agent.status)
  if (rule !== null) return { action, decision: 'deny', condition: null, otherwise: null, policies: [], rule }
  const governing = candidatesFor(set, action).filter((policy) => policy.mode === 'enforce' && policy.matchAgent(agent.handle))
  return entryFor(action, governing, settings)
}

function ruleFor(settings: OrganizationSettings, status: AgentStatus): Rule | null {
  if (status === 'suspended') return 'agent_suspended'
  if (status === 'discovered' && settings.unknown_agents !== 'evaluate') return 'unknown_agent'
  return null
}

function entryFor(action: string, governing: readonly CompiledPolicy[], settings: OrganizationSettings): CapabilityEntry {
  const behind = governing.filter((policy) => policy.actions.some((pattern) => compilePattern(pattern)(action)))
  const unconditional = behind.filter(isUnconditional)
  let base: Decision = settings.default_decision
  const top = strongestEffect(unconditional)
  if (top !== null) base = top
  // A conditional policy matters only if it could make the outcome stricter or, for allow over
  // a default or weaker base, grant what would otherwise be refused.
  const deciding = behind.filter((policy) => !isUnconditional(policy) && couldChange(policy.effect, base, top !== null))
  const policies = behind.map(describe)
  if (deciding.length === 0) return { action, decision: base, condition: null, otherwise: null, policies }
  const texts = deciding.map(conditionText)
  const condition = texts.length === 1 ? texts[0]! : texts.map((text) => `(${text})`).join(' || ')
  return { action, decision: 'conditional', condition, otherwise: base, policies }
}

function couldChange(effect: Effect, base: Decision, fromPolicy: boolean): boolean {
  if (effect === base) return false
  if (STRENGTH[effect] > STRENGTH[base]) return true
  // A weaker effect only changes a default decision (no unconditional policy applies).
  return !fromPolicy
}

function isUnconditional(policy: CompiledPolicy): boolean {
  return policy.condition_text === null && policy.resources.includes('*')
}

function strongestEffect(policies: readonly CompiledPolicy[]): Effect | null {
  let winner: Effect | null = null
  for (const policy of policies) if (winner === null || STRENGTH[policy.effect] > STRENGTH[winner]) winner = policy.effect
  return winner
}

/**
 * A resource restriction decides at request time too. It is written `resource like "order/*"`
 * (a description, not CEL: patterns are not CEL); a CEL condition keeps its own text.
 */
function conditionText(policy: CompiledPolicy): string {
  const parts: string[] = []
  if (!policy.resources.includes('*')) parts.push(policy.resources.map((pattern) => `resource like ${JSON.stringify(pattern)}`).join(' || '))
  if (policy.condition_text !== null) parts.push(policy.condition_text)
  return parts.length === 1 ? parts[0]! : parts.map((part) => `(${part})`).join(' && ')
}

function describe(policy: CompiledPolicy): CapabilityPolicy {
  const described = { policy_id: policy.policy_id, version: policy.version, name: policy.name, effect: policy.effect, condition: policy.condition_text, resources: policy.resources }
  if (policy.limits.length === 0) return described
  const limits = policy.limits.map((limit) => ({ name: limit.name, kind: limit.kind, max: limit.max, currency: limit.currency ?? null, scope: limit.scope, window: windowLabel(limit.window), mode: limit.mode }))
  return { ...described, limits }
}
