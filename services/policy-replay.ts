// The replay of an organization's logged decisions against draft policies (POST /policies/replay
// and `policy replay`), to see what a change would do to real traffic before it is enforced.
// Nothing is written. The log is read a page at a time (the next page loads while the engine
// works on the current one), so the largest replay never sits in memory whole.
import type { Kysely } from 'kysely'
import { compilePolicySet, DEFAULT_REPLAY_SAMPLE, replay, replayCounter, type Effect, type LoggedDecision, type PolicyInput, type Reason } from '../engine/index.ts'
import { findOrganizationSettings } from '../storage/organization-settings.ts'
import { findPolicy, listPoliciesInForce, type Policy, type PolicyFields } from '../storage/policies.ts'
import { agentLabels, pageOfLoggedDecisions, type LoggedDecisionRow, type ReplayPosition, type ReplayWindow } from '../storage/replay.ts'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import { fieldsFromInput, POLICY_NOT_FOUND, type PolicyDocument } from './policies.ts'

/** Decisions read per query. */
export const REPLAY_PAGE = 5000

/** A replay body as parsed field by field: the window, how many decisions, the drafts. */
export interface ReplayInput {
  readonly from?: Date | undefined
  readonly to?: Date | undefined
  readonly limit: number
  readonly policies: readonly (PolicyDocument & { policy_id?: string | undefined })[]
}

export interface ReplayRequest {
  readonly window: ReplayWindow
  readonly limit: number
  readonly drafts: readonly (PolicyFields & { policy_id?: string | undefined })[]
}

/** One logged decision whose outcome the drafts change. */
export interface ReplaySampleAnswer {
  decision_id: string
  evaluated_at: string
  agent: string
  action: string
  resource: string
  from: Effect
  to: Effect
  reasons: Record<string, unknown>[]
}

/** What a replay answers: POST /policies/replay's body (ReplayAnswerSchema in routes/policy-replay.ts). */
export interface ReplayAnswer {
  evaluated: number
  changed: Record<string, number>
  sample: ReplaySampleAnswer[]
}

/**
 * The checks after the fields' own (the same rules as POST /policies for every draft): a problem
 * is a 400 naming the draft.
 */
export function replayRequestOf(input: ReplayInput): ReplayRequest {
  if (input.from && input.to && input.from.getTime() >= input.to.getTime()) throw new HttpError(400, 'Field from must be earlier than to')
  const seen = new Set<string>()
  const parsed = input.policies.map((draft, index) => {
    const where = `Draft ${index}: `
    const id = draft.policy_id?.toLowerCase()
    if (id !== undefined) {
      if (seen.has(id)) throw new HttpError(400, `${where}policy_id names a policy another draft already replaces`)
      seen.add(id)
    }
    return { ...fieldsFromInput(draft, where), ...(id === undefined ? {} : { policy_id: id }) }
  })
  return { window: { from: input.from ?? null, to: input.to ?? null }, limit: input.limit, drafts: parsed }
}

function inputOf(policy: PolicyFields, policyId: string, version: number): PolicyInput {
  return { ...policy, policy_id: policyId, version, archived: false }
}

/**
 * The set to replay against: the stored policies in force, each draft with a policy_id in place
 * of that policy (as its next version), the other drafts after them. A draft naming a policy
 * the organization does not have is a 404, whoever has it.
 */
async function draftSet(db: Kysely<Database>, organizationId: string, drafts: ReplayRequest['drafts']): Promise<PolicyInput[]> {
  const replaced = new Map<string, Policy>()
  for (const draft of drafts) {
    if (draft.policy_id === undefined) continue
    const stored = await findPolicy(db, organizationId, draft.policy_id)
    if (!stored) throw new HttpError(404, POLICY_NOT_FOUND)
    replaced.set(stored.policy_id, stored)
  }
  const inputs = (await listPoliciesInForce(db, organizationId)).filter((p) => !replaced.has(p.policy_id)).map((p) => inputOf(p, p.policy_id, p.version))
  drafts.forEach((draft, index) => {
    const stored = draft.policy_id === undefined ? undefined : replaced.get(draft.policy_id)
    inputs.push(stored ? inputOf(draft, stored.policy_id, stored.version + 1) : inputOf(draft, `draft:${index}`, 1))
  })
  return inputs
}

const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({})

function loggedOf(row: LoggedDecisionRow, labels: ReadonlyMap<string, Record<string, string>>): LoggedDecision {
  const status = row.agent_rule === 'agent_suspended' ? 'suspended' : row.agent_rule === 'unknown_agent' ? 'discovered' : 'active'
  return {
    decision_id: row.decision_id,
    // A limit's refusal is what was decided; an approval's use is what the policies decided.
    decision: row.other_rule === 'limit_exceeded' || row.other_rule === 'limit_error' ? 'deny' : row.policy_decision,
    approval_use: row.other_rule === 'approval',
    request: {
      agent: { id: row.agent_id, handle: row.agent_handle, labels: labels.get(row.agent_id) ?? NO_LABELS, status },
      action: row.action,
      resource: row.resource,
      args: row.args,
      context: row.context,
      now: row.evaluated_at,
    },
  }
}

/** Replays the organization's logged decisions (newest first, within the window) against the drafts; null when it has no settings. */
export async function replayDecisions(db: Kysely<Database>, organizationId: string, request: ReplayRequest): Promise<ReplayAnswer | null> {
  const settings = await findOrganizationSettings(db, organizationId)
  if (!settings) return null
  const set = compilePolicySet(await draftSet(db, organizationId, request.drafts), settings.ruleset_revision)
  const labels = await agentLabels(db, organizationId)
  const answer: ReplayAnswer = { evaluated: 0, changed: {}, sample: [] }
  // Limits are counted oldest first: the range is read whole (at most `limit` decisions), then replayed.
  const limited = set.policies.some((policy) => policy.limits.length > 0)
  const held: LoggedDecisionRow[] = []
  const load = (after: ReplayPosition | null, remaining: number) => pageOfLoggedDecisions(db, organizationId, request.window, after, Math.min(REPLAY_PAGE, remaining))
  let remaining = request.limit
  let next: Promise<LoggedDecisionRow[]> | null = load(null, remaining)
  while (next !== null) {
    const rows: LoggedDecisionRow[] = await next
    remaining -= rows.length
    const last = rows[rows.length - 1]
    // The next page is read while this one is decided.
    next = last && remaining > 0 && rows.length === REPLAY_PAGE ? load({ evaluatedAt: last.position, decisionId: last.decision_id }, remaining) : null
    if (limited) {
      held.push(...rows)
      if (next !== null) continue
      rows.splice(0, rows.length, ...held.reverse())
    }
    const result = replay(set, settings, rows.map((row) => loggedOf(row, labels)), DEFAULT_REPLAY_SAMPLE - answer.sample.length, limited ? replayCounter() : undefined)
    answer.evaluated += result.evaluated
    for (const [key, count] of Object.entries(result.changed)) answer.changed[key] = (answer.changed[key] ?? 0) + count
    for (const sample of result.sample) {
      const row = rows.find((r) => r.decision_id === sample.decision_id)!
      answer.sample.push({
        decision_id: row.decision_id,
        evaluated_at: row.evaluated_at.toISOString(),
        agent: row.agent_handle,
        action: row.action,
        resource: row.resource,
        from: sample.from,
        to: sample.to,
        reasons: sample.reasons.map((reason: Reason) => ({ ...reason })),
      })
    }
  }
  return answer
}
