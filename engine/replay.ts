// Replay: the decisions an organization actually asked for, decided again against a draft set,
// to see what a policy change would do to real traffic before it is enforced.
import { decide, type DecisionRequest } from './decide.ts'
import type { CompiledPolicySet } from './policyset.ts'
import type { Decision, OrganizationSettings, Reason } from './types.ts'

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
): ReplayResult {
  let evaluated = 0
  const changed: Record<string, number> = {}
  const sample: ReplaySample[] = []
  for (const input of inputs) {
    evaluated += 1
    const outcome = decide(draft, settings, input.request)
    if (outcome.decision === input.decision) continue
    const key = `${input.decision}→${outcome.decision}`
    changed[key] = (changed[key] ?? 0) + 1
    if (sample.length < sampleSize) sample.push({ decision_id: input.decision_id, from: input.decision, to: outcome.decision, reasons: outcome.reasons })
  }
  return { evaluated, changed, sample }
}
