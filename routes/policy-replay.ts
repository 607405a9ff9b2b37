// POST /policies/replay (docs/api.md): the organization's logged decisions decided again against
// draft policies, to see what a change would do to real traffic before it is enforced. Nothing
// is written. The log is read a page at a time (the next page loads while the engine works on
// the current one), so 100,000 decisions never sit in memory together.
import type { IRequest } from 'itty-router'
import type { Kysely } from 'kysely'
import * as v from 'valibot'
import { compilePolicySet, DEFAULT_REPLAY_SAMPLE, replay, type LoggedDecision, type PolicyInput, type Reason } from '../engine/index.ts'
import { findOrganizationSettings } from '../storage/organization-settings.ts'
import { findPolicy, listPoliciesInForce, type Policy, type PolicyFields } from '../storage/policies.ts'
import { agentLabels, pageOfLoggedDecisions, type LoggedDecisionRow, type ReplayPosition, type ReplayWindow } from '../storage/replay.ts'
import type { Database } from '../database/schema.ts'
import { protectedErrors, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField, validateInput } from '../http/body.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { Timestamp } from './input.ts'
import { fieldsFromInput, POLICY_NOT_FOUND, PolicyDraftSchema } from './policies.ts'
import type { OperationDoc } from '../http/pipeline.ts'

import { MAX_REPLAY } from '../domain/replay.ts'

export { MAX_REPLAY }
export const DEFAULT_REPLAY = 10_000
export const MAX_DRAFTS = 1000
/** Decisions read per query. */
export const REPLAY_PAGE = 5000

const limitMessage = `Field limit must be a whole number from 1 to ${MAX_REPLAY}`

export const ReplaySchema = v.pipe(
  v.strictObject(
    {
      from: v.optional(Timestamp('from', 'Only decisions made at or after this instant.')),
      to: v.optional(Timestamp('to', 'Only decisions made before this instant.')),
      limit: v.optional(
        v.pipe(v.number(limitMessage), v.integer(limitMessage), v.minValue(1, limitMessage), v.maxValue(MAX_REPLAY, limitMessage), v.description(`How many of the newest decisions in the window to replay (default ${DEFAULT_REPLAY}).`)),
        DEFAULT_REPLAY,
      ),
      policies: v.pipe(
        v.array(PolicyDraftSchema, 'Field policies must be an array of draft policies'),
        v.minLength(1, 'Field policies must hold at least one draft'),
        v.maxLength(MAX_DRAFTS, `Field policies holds more than ${MAX_DRAFTS} drafts`),
        v.description('Drafts: a draft with policy_id stands in for that stored policy (enabled: false takes it out); one without is added. The other stored policies in force stay as they are.'),
      ),
    },
    unknownField(),
  ),
  v.title('PolicyReplay'),
)

const replayBody = bodyDoc(ReplaySchema, ['application/json'], true)

const OutcomeSchema = v.picklist(['allow', 'deny', 'require_approval'])

export const ReplaySampleSchema = v.pipe(
  v.object({
    decision_id: v.pipe(v.string(), v.uuid()),
    evaluated_at: v.pipe(v.string(), v.isoTimestamp()),
    agent: v.pipe(v.string(), v.description("The agent's handle.")),
    action: v.string(),
    resource: v.string(),
    from: v.pipe(OutcomeSchema, v.description('What the policies decided when it was logged.')),
    to: v.pipe(OutcomeSchema, v.description('What the draft set decides.')),
    reasons: v.pipe(v.array(v.record(v.string(), v.unknown())), v.description('Why the draft set decides so (policy_id "draft:<index>" names a new draft).')),
  }),
  v.title('ReplaySample'),
)

export const ReplayAnswerSchema = v.pipe(
  v.object({
    evaluated: v.pipe(v.number(), v.integer(), v.description('Logged decisions decided again.')),
    changed: v.pipe(v.record(v.string(), v.number()), v.description('Counts of changed outcomes keyed "<old>→<new>", e.g. "allow→deny"; unchanged ones are not listed.')),
    sample: v.pipe(v.array(ReplaySampleSchema), v.description(`The first ${DEFAULT_REPLAY_SAMPLE} changed decisions, newest first.`)),
  }),
  v.title('PolicyReplayResult'),
)

export type ReplayAnswer = v.InferOutput<typeof ReplayAnswerSchema>

export interface ReplayRequest {
  readonly window: ReplayWindow
  readonly limit: number
  readonly drafts: readonly (PolicyFields & { policy_id?: string | undefined })[]
}

/** Validates a replay body read elsewhere (the command line) as the route does: its published doc. */
export function parseReplayRequest(body: Record<string, unknown>): ReplayRequest {
  return replayRequestOf(validateInput(replayBody, body))
}

/**
 * The checks after the schema (the same rules as POST /policies for every draft): a problem is a
 * 400 naming the draft.
 */
function replayRequestOf(input: v.InferOutput<typeof ReplaySchema>): ReplayRequest {
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
    decision: row.policy_decision,
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

/** Replays the organization's logged decisions (newest first, within the window) against the drafts. */
export async function replayDecisions(db: Kysely<Database>, organizationId: string, request: ReplayRequest): Promise<ReplayAnswer | null> {
  const settings = await findOrganizationSettings(db, organizationId)
  if (!settings) return null
  const set = compilePolicySet(await draftSet(db, organizationId, request.drafts), settings.ruleset_revision)
  const labels = await agentLabels(db, organizationId)
  const answer: ReplayAnswer = { evaluated: 0, changed: {}, sample: [] }
  const load = (after: ReplayPosition | null, remaining: number) => pageOfLoggedDecisions(db, organizationId, request.window, after, Math.min(REPLAY_PAGE, remaining))
  let remaining = request.limit
  let next: Promise<LoggedDecisionRow[]> | null = load(null, remaining)
  while (next !== null) {
    const rows: LoggedDecisionRow[] = await next
    remaining -= rows.length
    const last = rows[rows.length - 1]
    // The next page is read while this one is decided.
    next = last && remaining > 0 && rows.length === REPLAY_PAGE ? load({ evaluatedAt: last.position, decisionId: last.decision_id }, remaining) : null
    const result = replay(set, settings, rows.map((row) => loggedOf(row, labels)), DEFAULT_REPLAY_SAMPLE - answer.sample.length)
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

export function policyReplayRoutes(guard: Guard): Route[] {
  async function replayRoute(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, replayBody)
    const answer = await replayDecisions(ctx.deps.db, principal.organizationId, replayRequestOf(input))
    if (!answer) throw new HttpError(404, 'Organization not found')
    return json(200, answer)
  }
  return [{ method: 'POST', path: '/policies/replay', handler: guard.protect('policies:write', replayRoute), doc: replayDoc }]
}

const replayDoc: OperationDoc = {
  operationId: 'replayPolicies',
  summary: 'Replay logged decisions against draft policies',
  description:
    `Decides the organization's newest logged decisions (at most ${MAX_REPLAY}, within from/to) again against the stored policies with the drafts applied, ` +
    'and counts the outcomes that change compared with what the policies decided then. Uses the current organization settings; writes nothing. ' +
    'Drafts are validated like POST /policies; a problem is 400 naming the draft ("Draft 2: …" or "(at policies.2.condition)").',
  tags: ['Policies'],
  scopes: ['policies:write'],
  body: replayBody,
  responses: {
    200: { description: 'What would change.', schema: ReplayAnswerSchema },
    ...protectedErrors({
      404: 'A draft names a policy_id the organization does not have ("Policy not found").',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}
