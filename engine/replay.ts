// Replay: the decisions an organization actually asked for, decided again against a draft set,
// to see what a policy change would do to real traffic before it is enforced.
import { decide, type DecisionRequest } from './decide.ts'
import type { CompiledPolicySet } from './policyset.ts'
import { windowLabel, type AppliedLimit, type replayCounter } from './limits.ts'
import type { Decision, OrganizationSettings, Reason } from './types.ts'

/** A replayed limit refusal (the counts of a replay are not the live counters: no used or remaining). */
function limitOf(applied: AppliedLimit): Reason {
  const { limit } = applied
  const sentence = applied.amount === null ? `its amount could not be evaluated: ${applied.error}` : 'it would have gone over its max in this replay'
  return {
    rule: applied.amount === null ? 'limit_error' : 'limit_exceeded',
    policy_id: applied.policy_id,
    version: applied.policy_version,
    limit: limit.name,
    policy_name: applied.policy_name,
    kind: limit.kind,
    mode: 'enforce',
    window: windowLabel(limit.window),
    max: limit.max,
    used: 0,
    remaining: 0,
    requested: applied.amount,
    currency: limit.currency ?? null,
    resets_at: null,
    message: `Limit "${limit.name}" of policy "${applied.policy_name}" (${limit.kind}, ${windowLabel(limit.window)}): ${sentence}`,
  }
}

export const DEFAULT_REPLAY_SAMPLE = 20

export interface LoggedDecision {
  readonly decision_id: string
  /**
   * What the policies decided when it was logged. For a decision made by consuming an approval,
   * pass the policy decision (require_approval), not the resulting allow, or it counts as a change.
   */
  readonly decision: Decision
  /** The logged request, with `now` set to when it was decided. */
  readonly request: DecisionRequest
  /** True for an allow that used an approval: it took nothing from the budgets (its request did). */
  readonly approval_use?: boolean
}

export interface ReplaySample {
  readonly decision_id: string
  readonly from: Decision
  readonly to: Decision
  readonly reasons: readonly Reason[]
}

export interface ReplayResult {
  readonly evaluated: number
  /** Counts keyed `"<old>→<new>"`, only for outcomes that changed. */
  readonly changed: Readonly<Record<string, number>>
  /** The first changed decisions, in input order. */
  readonly sample: readonly ReplaySample[]
}

/** Decides every logged input against `draft`; pure, so the caller chooses how many to load. */
export function replay(
  draft: CompiledPolicySet,
  settings: OrganizationSettings,
  inputs: Iterable<LoggedDecision>,
  sampleSize: number = DEFAULT_REPLAY_SAMPLE,
  /** With limits in the draft: counts them over the inputs, which must then come oldest first (engine/limits.ts replayCounter). */
  counter?: ReturnType<typeof replayCounter>,
): ReplayResult {
  let evaluated = 0
  const changed: Record<string, number> = {}
  const sample: ReplaySample[] = []
  for (const input of inputs) {
    evaluated += 1
    const decided = decide(draft, settings, input.request)
    let outcome: { decision: Decision; reasons: readonly Reason[] } = decided
    if (counter && !input.approval_use) {
      const counted = counter(decided.decision, decided.limits, input.request.agent.id, input.request.resource ?? '', input.request.now.getTime())
      if (counted.limit) outcome = { decision: 'deny', reasons: [limitOf(counted.limit)] }
    }
    if (outcome.decision === input.decision) continue
    const key = `${input.decision}→${outcome.decision}`
    changed[key] = (changed[key] ?? 0) + 1
    if (sample.length < sampleSize) sample.push({ decision_id: input.decision_id, from: input.decision, to: outcome.decision, reasons: outcome.reasons })
  }
  return { evaluated, changed, sample }
}
