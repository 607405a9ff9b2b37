// Decisions (docs/api.md): POST /decisions asks whether an agent may do something now, and
// answers 200 with allow, deny or require_approval and why; the answer is sent only once its
// row is committed (the use case: services/decisions.ts). POST /decisions/simulate answers the
// same without writing anything. GET /decisions and GET /decisions/{decision_id} read the log.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { HANDLE } from '../domain/agents.ts'
import { UUID } from '../domain/uuid.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { Principal } from '../services/credentials.ts'
import { MAX_PAYLOAD_BYTES, type DecisionService } from '../services/decisions.ts'
import { findDecision, listDecisions, type DecisionCursor } from '../storage/decision-log.ts'
import type { DecisionRecord } from '../storage/decisions.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { LimitsSchema } from './limit-schemas.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, PageSize, jsonObject, parseValue, Timestamp } from './input.ts'

export const DECISION_NOT_FOUND = 'Decision not found'
const DEFAULT_PAGE = 50
const MAX_PAGE = 100
const MAX_DRAFTS = 1000
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
const DECISIONS = ['allow', 'deny', 'require_approval'] as const
/** Where a decision was asked: POST /decisions, the MCP gateway (/mcp), ToolHive's authorizer (POST /toolhive/decision). */
const VIAS = ['api', 'mcp', 'toolhive'] as const

const line = (field: string, max: number) =>
  v.pipe(
    v.string(`Field ${field} must be a string`),
    v.maxLength(max, `Field ${field} is longer than ${max} characters`),
    v.check((text) => NO_CONTROL.test(text), `Field ${field} holds a control character`),
  )

const JsonObject = (field: string) =>
  v.pipe(
    v.record(v.string(), v.unknown(), `Field ${field} must be a JSON object`),
    v.description(`A JSON object; ${field} and the other object together at most ${MAX_PAYLOAD_BYTES} bytes.`),
  )

/** Fields of a decision answer: a request that sends one is refused as read-only. */
const READ_ONLY = ['decision_id', 'decision', 'reasons', 'args_sha256', 'evaluated_at']
const NOT_AN_OBJECT = 'Request body must be a JSON object'

const requestFields = {
  agent: v.optional(
    v.pipe(
      v.string('Field agent must be a string'),
      v.regex(HANDLE, 'Field agent must be an agent handle: 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'),
      v.description('The agent handle. Implied by an agent key (another handle → 403); required otherwise.'),
    ),
  ),
  action: v.pipe(line('action', 200), v.nonEmpty('Field action must not be empty'), v.description('What the agent is about to do, such as payments.refund.')),
  resource: v.optional(v.pipe(line('resource', 1000), v.description('What it acts on; default "".')), ''),
  // valibot's record accepts (and copies) an array: args and context must be JSON objects.
  args: v.optional(jsonObject(JsonObject('args'), 'Field args must be a JSON object'), {}),
  context: v.optional(jsonObject(JsonObject('context'), 'Field context must be a JSON object'), {}),
  approval_id: v.optional(
    v.nullable(
      v.pipe(
        v.string('Field approval_id must be a UUID or null'),
        v.uuid('Field approval_id must be a UUID or null'),
        v.transform((id) => id.toLowerCase()),
        v.description('The approval to use: with the same agent, action, resource and args, an approved approval turns this decision into allow, once.'),
      ),
    ),
    null,
  ),
  idempotency_key: v.optional(
    v.nullable(v.pipe(line('idempotency_key', 200), v.nonEmpty('Field idempotency_key must not be empty'), v.description('The same key from the same credential within 24 hours returns the first answer.'))),
    null,
  ),
}

export const DecisionRequestSchema = v.pipe(v.strictObject(requestFields, unknownField(READ_ONLY, { notAnObject: NOT_AN_OBJECT })), v.title('DecisionRequest'))

const DraftSchema = v.pipe(
  v.object(
    {
      policy_id: v.optional(v.pipe(v.string('Field policy_id must be a string'), v.uuid('Field policy_id must be a UUID'))),
      version: v.optional(v.pipe(v.number('Field version must be a number'), v.integer('Field version must be a whole number'), v.minValue(1, 'Field version must be at least 1')), 1),
      name: v.optional(line('name', 200), 'draft'),
      effect: v.picklist(DECISIONS, 'Field effect must be allow, deny or require_approval'),
      agents: v.optional(v.array(line('agents', 200), 'Field agents must be an array of strings'), ['*']),
      actions: v.pipe(v.array(line('actions', 200), 'Field actions must be an array of strings'), v.minLength(1, 'Field actions must hold at least one entry')),
      resources: v.optional(v.array(line('resources', 200), 'Field resources must be an array of strings'), ['*']),
      condition: v.optional(v.nullable(v.pipe(v.string('Field condition must be a string or null'), v.maxLength(4096, 'Field condition is longer than 4096 bytes'))), null),
      mode: v.optional(v.picklist(['enforce', 'monitor'], 'Field mode must be enforce or monitor'), 'enforce'),
      enabled: v.optional(v.boolean('Field enabled must be a boolean'), true),
      limits: v.optional(LimitsSchema, []),
    },
    'Each draft policy must be a JSON object',
  ),
  v.title('DraftPolicy'),
)

export const SimulateRequestSchema = v.pipe(
  v.strictObject(
    {
      ...requestFields,
      policies: v.optional(
        v.pipe(v.array(DraftSchema, 'Field policies must be an array of draft policies'), v.maxLength(MAX_DRAFTS, `Field policies holds more than ${MAX_DRAFTS} drafts`), v.description('Drafts that replace the stored policies for this call.')),
      ),
    },
    unknownField(READ_ONLY, { notAnObject: NOT_AN_OBJECT }),
  ),
  v.title('SimulateRequest'),
)

const ReasonSchema = v.pipe(
  v.object({
    policy_id: v.optional(v.string()),
    version: v.optional(v.number()),
    name: v.optional(v.string()),
    effect: v.optional(v.string()),
    mode: v.optional(v.string()),
    rule: v.optional(
      v.pipe(
        v.string(),
        v.description('default_decision, agent_suspended, unknown_agent, approval (an approval was used), approval_mismatch or approval_unusable when no policy decided; limit_exceeded or limit_error when a limit refused (docs/budgets.md).'),
      ),
    ),
    limit: v.optional(v.pipe(v.string(), v.description('limit_exceeded, limit_error: the limit\'s name; policy_id, version and policy_name name its policy.'))),
    policy_name: v.optional(v.string()),
    window: v.optional(v.pipe(v.string(), v.description('The limit\'s window: "day (Europe/Paris)", "rolling 3600 s", "all_time", "per_call".'))),
    kind: v.optional(v.picklist(['count', 'spend'])),
    max: v.optional(v.number()),
    used: v.optional(v.pipe(v.number(), v.description('Used in the window before this request.'))),
    remaining: v.optional(v.number()),
    requested: v.optional(v.nullable(v.number())),
    currency: v.optional(v.nullable(v.string())),
    resets_at: v.optional(v.nullable(v.string())),
    message: v.optional(v.pipe(v.string(), v.description('The limit reason as one sentence.'))),
  }),
  v.title('Reason'),
)
const ViewSchema = v.object({ decision: v.picklist(DECISIONS), reasons: v.array(ReasonSchema) })
const ErrorsSchema = v.array(v.object({ policy_id: v.string(), version: v.number(), mode: v.string(), message: v.string() }))

export const DecisionAnswerSchema = v.pipe(
  v.object({
    decision_id: v.pipe(v.nullable(v.pipe(v.string(), v.uuid())), v.description('null in a simulation.')),
    decision: v.picklist(DECISIONS),
    reasons: v.array(ReasonSchema),
    monitor: v.pipe(ViewSchema, v.description('The decision with monitor-mode policies enforced too (shadow mode).')),
    errors: v.pipe(ErrorsSchema, v.description('Conditions that failed at run time: they count as true for deny and require_approval, false for allow.')),
    approval: v.pipe(
      v.nullable(v.object({ approval_id: v.pipe(v.string(), v.uuid()), status: v.string(), expires_at: v.pipe(v.string(), v.isoTimestamp()) })),
      v.description('For require_approval: the approval to wait on (GET /approvals/{approval_id}?wait=60), then to pass as approval_id. Also the approval a request named, when found.'),
    ),
    args_sha256: v.pipe(v.string(), v.description('SHA-256 (hex) of the RFC 8785 canonical JSON of {organization_id, agent, action, resource, args}.')),
    ruleset_revision: v.number(),
    evaluated_at: v.pipe(v.string(), v.isoTimestamp()),
  }),
  v.title('DecisionAnswer'),
)

export const DecisionSchema = v.pipe(
  v.object({
    decision_id: v.pipe(v.string(), v.uuid()),
    agent_id: v.pipe(v.string(), v.uuid()),
    agent: v.string(),
    action: v.string(),
    resource: v.string(),
    args: v.record(v.string(), v.unknown()),
    context: v.record(v.string(), v.unknown()),
    decision: v.picklist(DECISIONS),
    policy_decision: v.pipe(v.picklist(DECISIONS), v.description('What the policies alone decided.')),
    reasons: v.array(ReasonSchema),
    monitor: ViewSchema,
    errors: ErrorsSchema,
    approval_id: v.nullable(v.string()),
    args_sha256: v.string(),
    ruleset_revision: v.number(),
    requested_by: v.pipe(v.string(), v.description('"key:<uuid>", "user:<uuid>" or "agent-key:<uuid>".')),
    evaluated_at: v.pipe(v.string(), v.isoTimestamp()),
    via: v.pipe(v.picklist(VIAS), v.description('Where it was asked: api (POST /decisions), mcp (a tools/call through the MCP gateway) or toolhive (POST /toolhive/decision).')),
  }),
  v.title('Decision'),
)

export const DecisionListSchema = v.pipe(v.object({ decisions: v.array(DecisionSchema), next_cursor: v.nullable(v.string()) }), v.title('DecisionList'))

const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const DecisionListQuerySchema = v.object({
  agent: v.optional(v.pipe(v.string(), v.description('Agent handle.'))),
  action: v.optional(v.string()),
  decision: v.optional(v.picklist(DECISIONS)),
  via: v.optional(v.pipe(v.picklist(VIAS), v.description('Only decisions asked there: api, mcp (gateway traffic) or toolhive.'))),
  from: v.optional(Timestamp('from', 'Earliest evaluated_at (inclusive).')),
  to: v.optional(Timestamp('to', 'Latest evaluated_at (exclusive).')),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

export function decisionToJson(record: DecisionRecord): v.InferOutput<typeof DecisionSchema> {
  return {
    decision_id: record.decision_id,
    agent_id: record.agent_id,
    agent: record.agent_handle,
    action: record.action,
    resource: record.resource,
    args: record.args,
    context: record.context,
    decision: record.decision,
    policy_decision: record.policy_decision,
    reasons: record.reasons as never,
    monitor: record.monitor as never,
    errors: record.errors as never,
    approval_id: record.approval_id,
    args_sha256: record.args_sha256,
    ruleset_revision: record.ruleset_revision,
    requested_by: record.requested_by,
    evaluated_at: record.evaluated_at.toISOString(),
    via: (record.via ?? 'api') as (typeof VIAS)[number],
  }
}

const decisionBody = bodyDoc(DecisionRequestSchema, ['application/json'], true)
const simulateBody = bodyDoc(SimulateRequestSchema, ['application/json'], true)

export function decisionRoutes(guard: Guard, decisions: DecisionService): Route[] {
  async function check(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, decisionBody)
    const { answer, replayed } = await decisions.decide(principal, input, { requestId: ctx.requestId, now: ctx.now })
    return replayed ? json(200, answer, { 'Idempotent-Replayed': 'true' }) : json(200, answer)
  }

  async function simulate(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, simulateBody)
    return json(200, await decisions.simulate(principal, input, { requestId: ctx.requestId, now: ctx.now }))
  }

  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = new URL(request.url).searchParams
    const filter = {
      agentHandle: query.get('agent'),
      agentId: principal.agentId,
      action: query.get('action'),
      decision: query.get('decision') === null ? null : parseValue(v.picklist(DECISIONS, 'decision must be allow, deny or require_approval'), query.get('decision')),
      via: query.get('via') === null ? null : parseValue(v.picklist(VIAS, 'via must be api, mcp or toolhive'), query.get('via')),
      from: query.get('from') === null ? null : parseValue(Timestamp('from'), query.get('from')),
      to: query.get('to') === null ? null : parseValue(Timestamp('to'), query.get('to')),
    }
    for (const [name, value] of [['agent', filter.agentHandle], ['action', filter.action]] as const) {
      if (value !== null && (value.length > 200 || !NO_CONTROL.test(value))) throw new HttpError(400, `${name} must be at most 200 characters without control characters`)
    }
    const rawLimit = query.get('limit')
    const limit = rawLimit === null ? DEFAULT_PAGE : parseValue(PAGE_SIZE, rawLimit)
    const cursor = query.get('cursor')
    const after = cursor === null || cursor === '' ? null : readCursor(cursor)
    const rows = await listDecisions(ctx.deps.db, principal.organizationId, filter, { after, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return json(200, { decisions: page.map(decisionToJson), next_cursor: rows.length > limit && last ? encodeCursor([last.evaluated_at.toISOString(), last.decision_id]) : null })
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = String(request.params.decision_id ?? '')
    const record = UUID.test(id) ? await findDecision(ctx.deps.db, principal.organizationId, id.toLowerCase(), principal.agentId) : null
    if (!record) throw new HttpError(404, DECISION_NOT_FOUND)
    return json(200, decisionToJson(record))
  }

  return [
    { method: 'POST', path: '/decisions', handler: guard.protect('decisions:check', check, { agentKeys: true }), doc: checkDoc },
    { method: 'POST', path: '/decisions/simulate', handler: guard.protect('decisions:check', simulate), doc: simulateDoc },
    { method: 'GET', path: '/decisions', handler: guard.protect('decisions:read', list, { agentKeys: true }), doc: listDoc },
    { method: 'GET', path: '/decisions/:decision_id', handler: guard.protect('decisions:read', read, { agentKeys: true }), doc: readDoc },
  ]
}

const DecisionCursorSchema = v.strictTuple([CursorTimestamp, CursorUuid])

function readCursor(cursor: string): DecisionCursor {
  const [evaluatedAt, decisionId] = decodeCursor(cursor, DecisionCursorSchema)
  return { evaluatedAt, decisionId }
}

const TAGS = ['Decisions']

const checkDoc: OperationDoc = {
  operationId: 'decide',
  summary: 'Ask whether an agent may do something now',
  description:
    'Every decision answers 200 (a deny is an answer, not an error), with the reasons. The answer is sent only after the decision is durably logged; if it cannot be logged the answer is 503 and no decision is given. An unknown handle creates a discovered agent, decided by the organization setting unknown_agents. A suspended agent is denied (agent_suspended). An agent key asks for its own agent only.',
  tags: TAGS,
  scopes: ['decisions:check'],
  body: decisionBody,
  responses: {
    200: { description: 'The decision.', schema: DecisionAnswerSchema, headers: { 'Idempotent-Replayed': 'true when this is the stored first answer to the idempotency_key.' } },
    ...protectedErrors({
      403: "The credential's role lacks decisions:check, or an agent key named another agent.",
      409: 'The idempotency_key was used for a different request within 24 hours, or a new agent would exceed MAX_AGENTS_PER_ORG.',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
    503: { description: 'The decision could not be recorded (or the database is unavailable): no decision is given; retry.', schema: protectedErrors()[503]!.schema!, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
  },
}

const simulateDoc: OperationDoc = {
  operationId: 'simulateDecision',
  summary: 'Evaluate a decision without recording it, optionally against draft policies',
  description: 'Writes nothing: no log row, no discovered agent, no last_seen_at, no idempotency key. decision_id is null.',
  tags: TAGS,
  scopes: ['decisions:check'],
  body: simulateBody,
  responses: { 200: { description: 'What the decision would be.', schema: DecisionAnswerSchema }, ...protectedErrors({ 413: 'Body larger than the limit.', 415: 'Content-Type other than application/json.' }) },
}

const listDoc: OperationDoc = {
  operationId: 'listDecisions',
  summary: 'Read the decision log',
  description: 'Newest first. An agent key sees its own agent\'s decisions only.',
  tags: TAGS,
  scopes: ['decisions:read'],
  query: DecisionListQuerySchema,
  responses: { 200: { description: 'A page of decisions.', schema: DecisionListSchema }, ...protectedErrors() },
}

const readDoc: OperationDoc = {
  operationId: 'getDecision',
  summary: 'Fetch one logged decision',
  tags: TAGS,
  scopes: ['decisions:read'],
  responses: { 200: { description: 'The decision.', schema: DecisionSchema }, ...protectedErrors({ 404: 'No such decision in the caller\'s organization (or of the agent key\'s agent).' }) },
}
