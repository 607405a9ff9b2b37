// Policies as code (docs/policies-as-code.md): POST /policies/plan compares a whole desired set
// with the policies in force and replays the difference; POST /policies/apply writes it as one
// ruleset revision when the set has not changed since the plan. The use cases are
// services/policy-sets.ts; this file parses, authorizes and answers.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { MAX_REPLAY } from '../domain/replay.ts'
import { applyPolicySet, COMPARED, planPolicySet, desiredSet, STALE_BASE } from '../services/policy-sets.ts'
import type { Principal } from '../services/credentials.ts'
import { actorOf } from '../services/policies.ts'
import { auditBy, protectedErrors, withinCap, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { Timestamp } from './input.ts'
import { policyCap } from './policies.ts'
import { DEFAULT_REPLAY, ReplayAnswerSchema } from './policy-replay.ts'
import { EffectSchema, ModeSchema, PolicyCreateSchema } from './policy-schemas.ts'
import type { OperationDoc } from '../http/pipeline.ts'

/** Most policies one set may hold (the organization's cap, MAX_POLICIES_PER_ORG, applies at apply). */
export const MAX_SET = 1000
/**
 * A set of many policies with long conditions does not fit BODY_LIMIT_BYTES (16 KiB by default):
 * these two routes read up to 1 MiB, or BODY_LIMIT_BYTES when that is set higher.
 */
export const POLICY_SET_BODY_LIMIT = 1024 * 1024

const ORGANIZATION_NOT_FOUND = 'Organization not found'
const limitMessage = `Field replay.limit must be a whole number from 1 to ${MAX_REPLAY}`

const PoliciesSchema = v.pipe(
  v.array(PolicyCreateSchema, 'Field policies must be an array of policies'),
  v.maxLength(MAX_SET, `Field policies holds more than ${MAX_SET} policies`),
  v.description('The whole desired set: POST /policies bodies, names unique. Stored policies in force are matched by name; those the set does not name are archived. An empty array archives every policy.'),
)

const ReplayOptionsSchema = v.pipe(
  v.strictObject(
    {
      from: v.optional(Timestamp('replay.from', 'Only decisions made at or after this instant.')),
      to: v.optional(Timestamp('replay.to', 'Only decisions made before this instant.')),
      limit: v.optional(
        v.pipe(v.number(limitMessage), v.integer(limitMessage), v.minValue(1, limitMessage), v.maxValue(MAX_REPLAY, limitMessage), v.description(`How many of the newest decisions to replay (default ${DEFAULT_REPLAY}).`)),
        DEFAULT_REPLAY,
      ),
    },
    unknownField(),
  ),
  v.description('The window of logged decisions the plan replays, as in POST /policies/replay.'),
)

export const PolicyPlanSchema = v.pipe(v.strictObject({ policies: PoliciesSchema, replay: v.optional(ReplayOptionsSchema) }, unknownField()), v.title('PolicyPlanRequest'))

export const PolicyApplySchema = v.pipe(
  v.strictObject(
    {
      policies: PoliciesSchema,
      base: v.pipe(v.string('Field base must be a string'), v.nonEmpty('Field base is required'), v.maxLength(200, 'Field base is longer than 200 characters'), v.description('The base of the plan this applies.')),
    },
    unknownField(),
  ),
  v.title('PolicyApplyRequest'),
)

const planBody = bodyDoc(PolicyPlanSchema, ['application/json'], true)
const applyBody = bodyDoc(PolicyApplySchema, ['application/json'], true)

const BaseSchema = v.pipe(v.string(), v.description('Opaque fingerprint of the set in force (which policies, at which version).'))
const Named = v.object({ policy_id: v.pipe(v.string(), v.uuid()), name: v.string(), version: v.pipe(v.number(), v.integer()) })
const Transition = v.object({ from: v.unknown(), to: v.unknown() })

const ContentSchema = v.object({
  name: v.string(),
  description: v.string(),
  effect: EffectSchema,
  agents: v.array(v.string()),
  actions: v.array(v.string()),
  resources: v.array(v.string()),
  condition: v.nullable(v.string()),
  approval: v.nullable(v.object({ approvers_required: v.number(), approver_roles: v.array(v.string()), timeout_seconds: v.number(), use_within_seconds: v.number() })),
  mode: ModeSchema,
  enabled: v.boolean(),
  limits: v.pipe(v.array(v.unknown()), v.description('Budgets, as POST /policies takes them ([] for none).')),
})

export const PolicyPlanAnswerSchema = v.pipe(
  v.object({
    base: BaseSchema,
    create: v.pipe(v.array(v.object({ name: v.string(), policy: ContentSchema })), v.description('Policies of the set no policy in force has the name of, with every default filled in.')),
    change: v.pipe(
      v.array(
        v.object({
          policy_id: v.pipe(v.string(), v.uuid()),
          name: v.string(),
          version: v.pipe(v.number(), v.integer(), v.description('The version in force now.')),
          fields: v.pipe(v.record(v.string(), Transition), v.description(`Only the fields that differ (of ${COMPARED.join(', ')}), each {from, to}.`)),
        }),
      ),
      v.description('Policies in force whose content differs from the set.'),
    ),
    archive: v.pipe(v.array(Named), v.description('Policies in force the set does not name.')),
    unchanged: v.pipe(v.number(), v.integer(), v.description('Policies in force the set names with the same content.')),
    replay: v.pipe(ReplayAnswerSchema, v.description('What the change would have decided on the logged decisions (nothing is replayed when nothing would change).')),
  }),
  v.title('PolicyPlan'),
)

export const PolicyApplyAnswerSchema = v.pipe(
  v.object({
    applied: v.pipe(v.boolean(), v.description('False when nothing differed: nothing was written and the ruleset revision is unchanged.')),
    base: v.pipe(v.string(), v.description('The fingerprint of the set now in force.')),
    create: v.array(Named),
    change: v.array(Named),
    archive: v.array(Named),
  }),
  v.title('PolicyApplyResult'),
)

/** The request context with the larger body limit of a policy set (only the reader looks at it). */
function withSetLimit(ctx: RequestContext): RequestContext {
  return { config: { ...ctx.config, bodyLimitBytes: Math.max(ctx.config.bodyLimitBytes, POLICY_SET_BODY_LIMIT) } } as RequestContext
}

/** The organization a policy of the set names, when it names one, must be the credential's. */
function ownPolicies(policies: v.InferOutput<typeof PoliciesSchema>, principal: Principal) {
  return policies.map(({ organization_id: named, ...document }) => {
    if (named !== undefined && named.trim().toLowerCase() !== principal.organizationId) throw new HttpError(404, ORGANIZATION_NOT_FOUND)
    return document
  })
}

export function policySetRoutes(guard: Guard): Route[] {
  async function plan(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, withSetLimit(ctx), planBody)
    const desired = desiredSet(ownPolicies(input.policies, principal))
    const replay = input.replay ?? { limit: DEFAULT_REPLAY }
    if (replay.from && replay.to && replay.from.getTime() >= replay.to.getTime()) throw new HttpError(400, 'Field replay.from must be earlier than replay.to')
    const window = { from: replay.from ?? null, to: replay.to ?? null }
    const answer = await planPolicySet(ctx.deps.db, principal.organizationId, desired, { window, limit: replay.limit })
    if (!answer) throw new HttpError(404, ORGANIZATION_NOT_FOUND)
    return json(200, answer satisfies v.InferOutput<typeof PolicyPlanAnswerSchema>)
  }

  async function apply(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, withSetLimit(ctx), applyBody)
    const desired = desiredSet(ownPolicies(input.policies, principal))
    const answer = await withinCap(() => applyPolicySet(ctx.deps.db, principal.organizationId, desired, input.base, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal), policyCap(ctx)))
    return json(200, answer satisfies v.InferOutput<typeof PolicyApplyAnswerSchema>)
  }

  return [
    { method: 'POST', path: '/policies/plan', handler: guard.protect('policies:write', plan), doc: planDoc },
    { method: 'POST', path: '/policies/apply', handler: guard.protect('policies:write', apply), doc: applyDoc },
  ]
}

const SET_ERRORS = {
  404: 'A policy of the set names an organization other than the credential\'s ("Organization not found").',
  413: `Body larger than ${POLICY_SET_BODY_LIMIT} bytes (or BODY_LIMIT_BYTES when higher).`,
  415: 'Content-Type other than application/json.',
}

const planDoc: OperationDoc = {
  operationId: 'planPolicySet',
  summary: 'Compare a whole policy set with the policies in force',
  description:
    'Matches the set to the policies in force by name: a name not in force is created, a name in force with other content is changed (the fields that differ, each {from, to}), ' +
    'a policy in force the set does not name is archived. The change is replayed against the logged decisions as POST /policies/replay does. Writes nothing. ' +
    'Pass the answer\'s base to POST /policies/apply. Policies are validated like POST /policies; a problem is 400 naming the policy ("Policy 2: …" or "(at policies.2.condition)").',
  tags: ['Policies'],
  scopes: ['policies:write'],
  body: planBody,
  responses: {
    200: { description: 'The plan.', schema: PolicyPlanAnswerSchema },
    ...protectedErrors({ ...SET_ERRORS, 409: 'Two policies in force share a name: the answer names them; rename or archive all but one.' }),
  },
}

const applyDoc: OperationDoc = {
  operationId: 'applyPolicySet',
  summary: 'Apply a whole policy set as one ruleset revision',
  description:
    'Writes the change POST /policies/plan showed, in one transaction: every created, changed and archived policy gets its version and audit event, and the ruleset revision goes up once. ' +
    'Nothing to change writes nothing (applied: false). Refused with 409 when the set in force is no longer the one of base; of two applies from one plan, one succeeds.',
  tags: ['Policies'],
  scopes: ['policies:write'],
  body: applyBody,
  responses: {
    200: { description: 'Applied, or nothing to apply.', schema: PolicyApplyAnswerSchema },
    ...protectedErrors({
      ...SET_ERRORS,
      409: `The set changed since the plan ("${STALE_BASE}"), two policies in force share a name, or the set would exceed MAX_POLICIES_PER_ORG; nothing is written.`,
    }),
  },
}
