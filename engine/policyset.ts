// An organization's policies compiled once per ruleset revision: patterns become matchers,
// conditions become CEL programs, and an index by action keeps one evaluation to the few
// policies that can apply. The result is frozen; callers cache it by (organization, revision).
import { compileCondition, type CompiledCondition } from './condition.ts'
import { compilePatternList, isExactPattern, type Matcher } from './patterns.ts'
import { DEFAULT_APPROVAL, type ApprovalSettings, type Effect, type PolicyInput, type PolicyMode } from './types.ts'

export interface CompiledPolicy {
  readonly policy_id: string
  readonly version: number
  readonly name: string
  readonly effect: Effect
  readonly mode: PolicyMode
  readonly agents: readonly string[]
  readonly actions: readonly string[]
  readonly resources: readonly string[]
  readonly condition_text: string | null
  /** null when there is no condition. */
  readonly condition: CompiledCondition | null
  /** Set when a stored condition no longer compiles: it then fails closed like a run-time error. */
  readonly condition_error: string | null
  readonly approval: ApprovalSettings
  readonly matchAgent: Matcher
  readonly matchAction: Matcher
  readonly matchResource: Matcher
  /** Position in the input list: reasons and errors are reported in this order. */
  readonly order: number
}

export interface CompileProblem {
  readonly policy_id: string
  readonly version: number
  readonly message: string
}

export interface CompiledPolicySet {
  readonly ruleset_revision: number
  /** Enabled, not archived policies, in input order. Disabled and archived ones never apply. */
  readonly policies: readonly CompiledPolicy[]
  /** Policies naming an action exactly (and no wildcard action), by action. */
  readonly byAction: ReadonlyMap<string, readonly CompiledPolicy[]>
  /** Policies with at least one wildcard action pattern; each is tested with its matchAction. */
  readonly wildcard: readonly CompiledPolicy[]
  /** Stored conditions that failed to compile (they fail closed; see CompiledPolicy). */
  readonly problems: readonly CompileProblem[]
}

/** Fills an approval block's missing fields with the defaults. */
export function normalizeApproval(approval: Partial<ApprovalSettings> | null | undefined): ApprovalSettings {
  return Object.freeze({
    approvers_required: approval?.approvers_required ?? DEFAULT_APPROVAL.approvers_required,
    approver_roles: Object.freeze([...(approval?.approver_roles ?? DEFAULT_APPROVAL.approver_roles)]),
    timeout_seconds: approval?.timeout_seconds ?? DEFAULT_APPROVAL.timeout_seconds,
    use_within_seconds: approval?.use_within_seconds ?? DEFAULT_APPROVAL.use_within_seconds,
  })
}

/** Compiles one policy version; disabled and archived versions compile too (for capabilities of drafts). */
export function compilePolicy(policy: PolicyInput, order: number): { policy: CompiledPolicy; problem: CompileProblem | null } {
  let condition: CompiledCondition | null = null
  let conditionError: string | null = null
  if (policy.condition !== null) {
    const compiled = compileCondition(policy.condition)
    if (compiled.ok) condition = compiled.condition
    else conditionError = `Condition does not compile (line ${compiled.error.line}, column ${compiled.error.column}): ${compiled.error.message}`
  }
  const compiled: CompiledPolicy = Object.freeze({
    policy_id: policy.policy_id,
    version: policy.version,
    name: policy.name,
    effect: policy.effect,
    mode: policy.mode,
    agents: Object.freeze([...policy.agents]),
    actions: Object.freeze([...policy.actions]),
    resources: Object.freeze([...policy.resources]),
    condition_text: policy.condition,
    condition,
    condition_error: conditionError,
    approval: normalizeApproval(policy.approval),
    matchAgent: compilePatternList(policy.agents),
    matchAction: compilePatternList(policy.actions),
    matchResource: compilePatternList(policy.resources),
    order,
  })
  const problem = conditionError === null ? null : { policy_id: policy.policy_id, version: policy.version, message: conditionError }
  return { policy: compiled, problem }
}

/** Compiles the policies in force for one organization at one ruleset revision. */
export function compilePolicySet(policies: readonly PolicyInput[], rulesetRevision: number): CompiledPolicySet {
  const active: CompiledPolicy[] = []
  const problems: CompileProblem[] = []
  for (const input of policies) {
    if (!input.enabled || input.archived) continue
    const { policy, problem } = compilePolicy(input, active.length)
    active.push(policy)
    if (problem) problems.push(problem)
  }
  const byAction = new Map<string, CompiledPolicy[]>()
  const wildcard: CompiledPolicy[] = []
  for (const policy of active) {
    // A policy sits in exactly one place, so a lookup never meets it twice.
    if (!policy.actions.every(isExactPattern)) {
      wildcard.push(policy)
      continue
    }
    for (const action of new Set(policy.actions)) {
      const list = byAction.get(action)
      if (list) list.push(policy)
      else byAction.set(action, [policy])
    }
  }
  for (const list of byAction.values()) Object.freeze(list)
  return Object.freeze({
    ruleset_revision: rulesetRevision,
    policies: Object.freeze(active),
    byAction,
    wildcard: Object.freeze(wildcard),
    problems: Object.freeze(problems),
  })
}

/** Policies whose action patterns match, in input order. */
export function candidatesFor(set: CompiledPolicySet, action: string): CompiledPolicy[] {
  const exact = set.byAction.get(action)
  const out: CompiledPolicy[] = []
  for (const policy of set.wildcard) if (policy.matchAction(action)) out.push(policy)
  if (exact === undefined) return out
  if (out.length === 0) return exact.slice()
  for (const policy of exact) out.push(policy)
  return out.sort((a, b) => a.order - b.order)
}
