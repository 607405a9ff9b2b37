// POST /policies/replay (docs/api.md): the organization's logged decisions decided again against
// draft policies, to see what a change would do to real traffic before it is enforced. The body
// and the answer are published here; the replay itself is services/policy-replay.ts.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { DEFAULT_REPLAY_SAMPLE } from '../engine/index.ts'
import { MAX_REPLAY } from '../domain/replay.ts'
import { replayDecisions, replayRequestOf, type ReplayRequest } from '../services/policy-replay.ts'
import { protectedErrors, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField, validateInput } from '../http/body.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { Timestamp } from './input.ts'
import { PolicyDraftSchema } from './policy-schemas.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const DEFAULT_REPLAY = 10_000
export const MAX_DRAFTS = 1000

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

/** Validates a replay body read elsewhere (the command line) as the route does: its published doc. */
export function parseReplayRequest(body: Record<string, unknown>): ReplayRequest {
  return replayRequestOf(validateInput(replayBody, body))
}

export function policyReplayRoutes(guard: Guard): Route[] {
  async function replayRoute(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, replayBody)
    const answer = await replayDecisions(ctx.deps.db, principal.organizationId, replayRequestOf(input))
    if (!answer) throw new HttpError(404, 'Organization not found')
    return json(200, answer satisfies v.InferOutput<typeof ReplayAnswerSchema>)
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
