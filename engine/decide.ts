// One decision: which policies apply to a request, and what follows from them.
//
// A policy applies when it is in force (enabled, not archived: only those are compiled into the
// set), its agent, action and resource patterns each match, and its condition holds. Enforce-mode
// policies decide, strongest effect first (deny > require_approval > allow); none → the
// organization's default. A condition that errors fails closed: it counts as true for deny and
// require_approval and false for allow, and is reported. Monitor-mode policies never change the
// decision; `monitor` is the decision with them enforced too (shadow mode).
import type { ConditionVariables } from './condition.ts'
import { applyLimits, type AppliedLimit } from './limits.ts'
import { candidatesFor, type CompiledPolicy, type CompiledPolicySet } from './policyset.ts'
import { DEFAULT_APPROVAL, type AgentStatus, type ApprovalSettings, type ConditionError, type Decision, type Effect, type OrganizationSettings, type PolicyReason, type Reason, type Rule } from './types.ts'

export interface DecisionRequest {
  readonly agent: {
    readonly id: string
    readonly handle: string
    readonly labels: Readonly<Record<string, string>>
    readonly status: AgentStatus
  }
  readonly action: string
  /** Defaults to the empty string. */
  readonly resource?: string
  readonly args: Readonly<Record<string, unknown>>
  readonly context: Readonly<Record<string, unknown>>
  /** The decision time; conditions see it as `now`. */
  readonly now: Date
}

/** What an approval for this decision needs: the strictest combination of the winning policies. */
export interface ApprovalRequirement extends ApprovalSettings {
  /** The require_approval policies the requirement comes from (empty when it is the default decision). */
  readonly policies: readonly { readonly policy_id: string; readonly version: number }[]
  /** True when the policies named no role in common, so only owners may approve (see combineApprovals). */
  readonly roles_conflict: boolean
}

export interface DecisionView {
  readonly decision: Decision
  readonly reasons: readonly Reason[]
}

export interface DecisionOutcome extends DecisionView {
  /** Always present: the decision with monitor-mode policies enforced too (equal to the above when none applies). */
  readonly monitor: DecisionView
  readonly errors: readonly ConditionError[]
  /** Present exactly when `decision` is require_approval. */
  readonly approval: ApprovalRequirement | null
  readonly ruleset_revision: number
  /** The limits of every applying policy (enforce and monitor mode) and what this request takes of each. */
  readonly limits?: readonly AppliedLimit[]
}

const NO_LIMITS: readonly AppliedLimit[] = Object.freeze([])

const STRENGTH: Readonly<Record<Effect, number>> = { allow: 1, require_approval: 2, deny: 3 }

/** Decides one request against a compiled set. Pure: same inputs, same answer. */
export function decide(set: CompiledPolicySet, settings: OrganizationSettings, request: DecisionRequest): DecisionOutcome {
  if (request.agent.status === 'suspended') return byRule(set, 'deny', 'agent_suspended')
  if (request.agent.status === 'discovered' && settings.unknown_agents !== 'evaluate') return byRule(set, 'deny', 'unknown_agent')
  const { enforced, shadowed, errors } = applyingPolicies(set, request)
  const decision = strongest(enforced, settings)
  const monitor = shadowed.length === 0 ? decision : strongest(enforced.concat(shadowed).sort(byOrder), settings)
  return {
    decision: decision.decision,
    reasons: decision.reasons,
    monitor,
    errors,
    approval: decision.decision === 'require_approval' ? combineApprovals(enforced.filter((p) => p.effect === 'require_approval')) : null,
    ruleset_revision: set.ruleset_revision,
    limits: limitsOf(enforced, shadowed, request),
  }
}

function limitsOf(enforced: readonly CompiledPolicy[], shadowed: readonly CompiledPolicy[], request: DecisionRequest): readonly AppliedLimit[] {
  if (!enforced.some(hasLimits) && !shadowed.some(hasLimits)) return NO_LIMITS
  let variables: ConditionVariables | null = null
  return applyLimits(enforced.concat(shadowed).filter(hasLimits).sort(byOrder), () => (variables ??= conditionVariables(request, request.resource ?? '')))
}

const hasLimits = (policy: CompiledPolicy): boolean => policy.limits.length > 0

interface Applying {
  readonly enforced: CompiledPolicy[]
  readonly shadowed: CompiledPolicy[]
  readonly errors: ConditionError[]
}

/** Every policy in force that applies to the request, split by mode, with condition errors. */
export function applyingPolicies(set: CompiledPolicySet, request: DecisionRequest): Applying {
  const resource = request.resource ?? ''
  const enforced: CompiledPolicy[] = []
  const shadowed: CompiledPolicy[] = []
  const errors: ConditionError[] = []
  let variables: ConditionVariables | null = null
  for (const policy of candidatesFor(set, request.action)) {
    if (!policy.matchAgent(request.agent.handle) || !policy.matchResource(resource)) continue
    let message: string | null = policy.condition_error
    let holds = true
    if (message === null && policy.condition !== null) {
      variables ??= conditionVariables(request, resource)
      const outcome = policy.condition.evaluate(variables)
      if (outcome.ok) holds = outcome.value
      else message = outcome.message
    }
    if (message !== null) {
      errors.push({ policy_id: policy.policy_id, version: policy.version, mode: policy.mode, message })
      // Fail closed: an unreadable condition restricts (deny, approval) but never grants.
      holds = policy.effect !== 'allow'
    }
    if (!holds) continue
    if (policy.mode === 'enforce') enforced.push(policy)
    else shadowed.push(policy)
  }
  return { enforced, shadowed, errors }
}

function conditionVariables(request: DecisionRequest, resource: string): ConditionVariables {
  const { id, handle, labels } = request.agent
  return { agent: { id, handle, labels }, action: request.action, resource, args: request.args, context: request.context, now: request.now }
}

function strongest(applying: readonly CompiledPolicy[], settings: OrganizationSettings): DecisionView {
  let winner: Effect | null = null
  for (const policy of applying) if (winner === null || STRENGTH[policy.effect] > STRENGTH[winner]) winner = policy.effect
  if (winner === null) return { decision: settings.default_decision, reasons: [{ rule: 'default_decision' }] }
  const reasons: PolicyReason[] = []
  for (const policy of applying) if (policy.effect === winner) reasons.push(reasonOf(policy))
  return { decision: winner, reasons }
}

export function reasonOf(policy: CompiledPolicy): PolicyReason {
  return { policy_id: policy.policy_id, version: policy.version, name: policy.name, effect: policy.effect, mode: policy.mode }
}

function byRule(set: CompiledPolicySet, decision: Decision, rule: Rule): DecisionOutcome {
  const view: DecisionView = { decision, reasons: [{ rule }] }
  return { ...view, monitor: view, errors: [], approval: decision === 'require_approval' ? combineApprovals([]) : null, ruleset_revision: set.ruleset_revision, limits: NO_LIMITS }
}

function byOrder(a: CompiledPolicy, b: CompiledPolicy): number {
  return a.order - b.order
}

/**
 * Several require_approval policies apply: the approval must satisfy all of them, so take the
 * strictest of each setting: most approvers, shortest timeout and use window, and only roles
 * every policy accepts. When they share no role, owners alone may approve (every organization
 * has one, and an owner outranks every role a policy can name): stricter than any one policy,
 * never impossible, and flagged with roles_conflict so the disagreement is visible.
 */
export function combineApprovals(policies: readonly CompiledPolicy[]): ApprovalRequirement {
  if (policies.length === 0) return { ...DEFAULT_APPROVAL, policies: [], roles_conflict: false }
  let roles = new Set(policies[0]!.approval.approver_roles)
  for (const policy of policies.slice(1)) {
    const accepted = new Set(policy.approval.approver_roles)
    roles = new Set([...roles].filter((role) => accepted.has(role)))
  }
  const conflict = roles.size === 0
  return {
    approvers_required: Math.max(...policies.map((p) => p.approval.approvers_required)),
    approver_roles: conflict ? ['owner'] : [...roles],
    timeout_seconds: Math.min(...policies.map((p) => p.approval.timeout_seconds)),
    use_within_seconds: Math.min(...policies.map((p) => p.approval.use_within_seconds)),
    policies: policies.map((p) => ({ policy_id: p.policy_id, version: p.version })),
    roles_conflict: conflict,
  }
}
