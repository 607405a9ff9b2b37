// Shapes shared by the engine's modules and by its callers (routes and storage), kept free of
// any I/O so the engine can be compiled, evaluated and tested on its own.
import type { LimitInput } from './limits.ts'

export type Effect = 'allow' | 'deny' | 'require_approval'
export type Decision = Effect
export type PolicyMode = 'enforce' | 'monitor'
export type AgentStatus = 'active' | 'suspended' | 'discovered'
export type DefaultDecision = Decision
export type UnknownAgents = 'deny' | 'evaluate'

/** What an approval of a `require_approval` policy needs; null fields in a policy take the defaults. */
export interface ApprovalSettings {
  readonly approvers_required: number
  readonly approver_roles: readonly string[]
  readonly timeout_seconds: number
  readonly use_within_seconds: number
}

export const DEFAULT_APPROVAL: ApprovalSettings = Object.freeze({
  approvers_required: 1,
  approver_roles: Object.freeze(['owner', 'admin', 'manager']),
  timeout_seconds: 900,
  use_within_seconds: 300,
})

/** One policy version as storage holds it (or as a draft in a simulation or a replay). */
export interface PolicyInput {
  readonly policy_id: string
  readonly version: number
  readonly name: string
  readonly effect: Effect
  readonly agents: readonly string[]
  readonly actions: readonly string[]
  readonly resources: readonly string[]
  readonly condition: string | null
  readonly approval?: Partial<ApprovalSettings> | null
  readonly mode: PolicyMode
  readonly enabled: boolean
  readonly archived: boolean
  /** Budgets counted while the policy applies (engine/limits.ts); none when absent. */
  readonly limits?: readonly LimitInput[] | null
}

export interface OrganizationSettings {
  readonly default_decision: DefaultDecision
  readonly unknown_agents: UnknownAgents
}

/** Why a decision was made by a policy. */
export interface PolicyReason {
  readonly policy_id: string
  readonly version: number
  readonly name: string
  readonly effect: Effect
  readonly mode: PolicyMode
}

/**
 * Why a decision was made by a rule rather than a policy. The engine produces the first three;
 * the route layer produces the approval ones when a request carries an `approval_id`.
 */
export type Rule = 'default_decision' | 'agent_suspended' | 'unknown_agent' | 'approval' | 'approval_mismatch' | 'approval_unusable'
export interface RuleReason {
  readonly rule: Rule
}

/**
 * Why a limit refused a request (limit_exceeded: it would go over; limit_error: its amount could
 * not be taken from the request, which fails closed), or, in `monitor`, would have.
 */
export interface LimitReason {
  readonly rule: 'limit_exceeded' | 'limit_error'
  readonly policy_id: string
  readonly version: number
  /** The limit's name (the policy's is policy_name). */
  readonly limit: string
  readonly policy_name: string
  readonly kind: 'count' | 'spend'
  readonly mode: PolicyMode
  /** The window, as "day (Europe/Paris)", "rolling 3600 s", "all_time" or "per_call". */
  readonly window: string
  readonly max: number
  readonly used: number
  readonly remaining: number
  /** What this request would take (null when its amount could not be evaluated). */
  readonly requested: number | null
  readonly currency: string | null
  /** When the window resets (ISO 8601), or null (all_time, per_call, an empty rolling window). */
  readonly resets_at: string | null
  /** The whole reason as one sentence. */
  readonly message: string
}

export type Reason = PolicyReason | RuleReason | LimitReason

/** A condition that failed at run time (or a stored condition that no longer compiles). */
export interface ConditionError {
  readonly policy_id: string
  readonly version: number
  readonly mode: PolicyMode
  readonly message: string
}
