// An organization's policies compiled once per ruleset revision: patterns become matchers,
// conditions become CEL programs, and an index by action keeps one evaluation to the few
// policies that can apply. The result is frozen; callers cache it by (organization, revision).
import { compileCondition, type CompiledCondition } from './condition.ts'
import { compileLimit, type CompiledLimit } from './limits.ts'
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
  /** Its budgets (engine/limits.ts); a stored amount that no longer compiles fails closed when evaluated. */
  readonly limits: readonly CompiledLimit[]
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
  /** Policies naming an action exactly, by that action. */
  readonly byAction: ReadonlyMap<string, readonly CompiledPolicy[]>
  /**
   * Policies with a wildcard action whose literal start holds a dot (`payments.*`,
   * `payments.re*`), by that start up to its first dot (`payments.`): only actions in that
   * namespace can match them.
   */
  readonly byNamespace: ReadonlyMap<string, readonly CompiledPolicy[]>
  /** Policies with any other wildcard action (`*`, `*.read`, `pay*`): tested on every lookup. */
  readonly wildcard: readonly CompiledPolicy[]
  /** Policies placed in more than one kind of list above (a lookup must then deduplicate). */
  readonly shared: ReadonlySet<CompiledPolicy>
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
    limits: Object.freeze((policy.limits ?? []).map(compiledLimitOf)),
    order,
  })
  const problem = conditionError === null ? null : { policy_id: policy.policy_id, version: policy.version, message: conditionError }
  return { policy: compiled, problem }
}

function compiledLimitOf(limit: NonNullable<PolicyInput['limits']>[number]): CompiledLimit {
  const compiled = compileLimit(limit)
  if (compiled.ok) return compiled.limit
  const message = compiled.message
  return Object.freeze({ ...limit, evaluateAmount: () => ({ ok: false as const, message }) })
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
  const byNamespace = new Map<string, CompiledPolicy[]>()
  const wildcard: CompiledPolicy[] = []
  const shared = new Set<CompiledPolicy>()
  for (const policy of active) {
    const places = new Set<CompiledPolicy[]>()
    const kinds = new Set<string>()
    for (const pattern of new Set(policy.actions)) {
      const list = placeFor(pattern, byAction, byNamespace, wildcard)
      places.add(list)
      kinds.add(list === wildcard ? 'wildcard' : isExactPattern(pattern) ? 'exact' : 'namespace')
    }
    for (const list of places) list.push(policy)
    // One action has one exact key and one namespace, so only a policy in two kinds of list
    // can be met twice by one lookup.
    if (kinds.size > 1) shared.add(policy)
  }
  for (const list of [...byAction.values(), ...byNamespace.values()]) Object.freeze(list)
  return Object.freeze({
    ruleset_revision: rulesetRevision,
    policies: Object.freeze(active),
    byAction,
    byNamespace,
    wildcard: Object.freeze(wildcard),
    shared,
    problems: Object.freeze(problems),
  })
}

function placeFor(pattern: string, byAction: Map<string, CompiledPolicy[]>, byNamespace: Map<string, CompiledPolicy[]>, wildcard: CompiledPolicy[]): CompiledPolicy[] {
  if (isExactPattern(pattern)) return listIn(byAction, pattern)
  const namespace = namespaceOf(pattern.slice(0, pattern.indexOf('*')))
  return namespace === null ? wildcard : listIn(byNamespace, namespace)
}

function listIn(map: Map<string, CompiledPolicy[]>, key: string): CompiledPolicy[] {
  let list = map.get(key)
  if (list === undefined) {
    list = []
    map.set(key, list)
  }
  return list
}

/** `payments.refund` → `payments.`; no dot → null. */
function namespaceOf(text: string): string | null {
  const dot = text.indexOf('.')
  return dot < 0 ? null : text.slice(0, dot + 1)
}

/** Policies whose action patterns match, in input order, each once. */
export function candidatesFor(set: CompiledPolicySet, action: string): CompiledPolicy[] {
  const out: CompiledPolicy[] = []
  let sources = 0
  const exact = set.byAction.get(action)
  if (exact !== undefined) {
    for (const policy of exact) out.push(policy)
    sources += 1
  }
  const namespace = namespaceOf(action)
  const inNamespace = namespace === null ? undefined : set.byNamespace.get(namespace)
  if (inNamespace !== undefined) sources += collect(inNamespace, action, out)
  sources += collect(set.wildcard, action, out)
  if (sources < 2) return out
  const unique = set.shared.size === 0 ? out : dedupe(out, set.shared)
  return unique.sort((a, b) => a.order - b.order)
}

/** Appends the policies of `list` whose action patterns match; 1 when any did, else 0. */
function collect(list: readonly CompiledPolicy[], action: string, out: CompiledPolicy[]): number {
  const before = out.length
  for (const policy of list) if (policy.matchAction(action)) out.push(policy)
  return out.length > before ? 1 : 0
}

function dedupe(policies: CompiledPolicy[], shared: ReadonlySet<CompiledPolicy>): CompiledPolicy[] {
  const seen = new Set<CompiledPolicy>()
  return policies.filter((policy) => {
    if (!shared.has(policy)) return true
    if (seen.has(policy)) return false
    seen.add(policy)
    return true
  })
}
