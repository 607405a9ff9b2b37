// Decisions (docs/api.md): POST /decisions asks whether an agent may do something now, and
// answers 200 with allow, deny or require_approval and why; the answer is sent only once its
// row is committed (group commit, services/decision-writer.ts). POST /decisions/simulate answers
// the same without writing anything. GET /decisions and GET /decisions/{decision_id} read the log.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { argsSha256, canonicalSha256, CanonicalJsonError, compileCondition, compilePolicySet, decide, type CompiledPolicySet, type DecisionOutcome, type PolicyInput, type Reason } from '../engine/index.ts'
import { SYSTEM } from '../domain/audit.ts'
import { discoverAgent, touchAgents, type Agent } from '../storage/agents.ts'
import type { DecisionWriter } from '../services/decision-writer.ts'
import { createDecisionContextCache, type AgentRef } from '../services/decision-contexts.ts'
import { asOf, findApproval, type ApprovalRecord, type NewApproval } from '../storage/approvals.ts'
import { findDecision, findIdempotent, listDecisions, readDecisionContext, type DecisionContext, type DecisionCursor, type DecisionRecord } from '../storage/decisions.ts'
import type { PolicySetCache } from '../services/policyset-cache.ts'
import { agentCap } from './agents.ts'
import { HANDLE } from '../domain/agents.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import type { BodyDoc } from '../http/pipeline.ts'
import { UUID } from '../domain/uuid.ts'
import { INVALID_CREDENTIAL, type Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, PageSize, jsonObject, parseValue, Timestamp } from './input.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const DECISION_NOT_FOUND = 'Decision not found'
export const MAX_PAYLOAD_BYTES = 16_384
export const IDEMPOTENCY_CONFLICT = 'idempotency_key was already used by this credential for a different request within the last 24 hours; use a new key'
export const NOT_RECORDED = 'The decision could not be recorded, so none is given; retry'
const DEFAULT_PAGE = 50
const MAX_PAGE = 100
const MAX_DRAFTS = 1000
const TOUCH_INTERVAL_MS = 60_000
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
const DECISIONS = ['allow', 'deny', 'require_approval'] as const

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
    rule: v.optional(v.pipe(v.string(), v.description('default_decision, agent_suspended, unknown_agent, approval (an approval was used), approval_mismatch or approval_unusable when no policy decided.'))),
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
  }),
  v.title('Decision'),
)

export const DecisionListSchema = v.pipe(v.object({ decisions: v.array(DecisionSchema), next_cursor: v.nullable(v.string()) }), v.title('DecisionList'))

const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const DecisionListQuerySchema = v.object({
  agent: v.optional(v.pipe(v.string(), v.description('Agent handle.'))),
  action: v.optional(v.string()),
  decision: v.optional(v.picklist(DECISIONS)),
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
  }
}

type DecisionInput = v.InferOutput<typeof DecisionRequestSchema>

/** Who asked, as logged and as the scope of idempotency keys. */
function requesterOf(principal: Principal): string {
  if (principal.agentId !== null) return `agent-key:${principal.keyId}`
  return principal.userId ? `user:${principal.userId}` : `key:${principal.keyId}`
}

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8')
}

const decisionBody = bodyDoc(DecisionRequestSchema, ['application/json'], true)
const simulateBody = bodyDoc(SimulateRequestSchema, ['application/json'], true)

/** Reads a decision or simulation body through its published doc, then bounds args and context together. */
async function readDecisionInput<S extends v.GenericSchema>(request: Request, ctx: RequestContext, doc: BodyDoc<S>): Promise<v.InferOutput<S>> {
  const input = (await readInput(request, ctx, doc)) as DecisionInput
  if (byteLength(input.args) + byteLength(input.context) > MAX_PAYLOAD_BYTES) throw new HttpError(400, `Fields args and context together are larger than ${MAX_PAYLOAD_BYTES} bytes`)
  return input as v.InferOutput<S>
}

function hashOf(value: unknown): string {
  try {
    return canonicalSha256(value)
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new HttpError(400, 'Fields args and context must hold JSON that has a canonical form (finite numbers only)')
    throw error
  }
}

function boundHash(organizationId: string, handle: string, input: DecisionInput): string {
  try {
    return argsSha256({ organization_id: organizationId, agent: handle, action: input.action, resource: input.resource, args: input.args })
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new HttpError(400, 'Field args must hold JSON that has a canonical form (finite numbers only)')
    throw error
  }
}

type ApprovalRef = { approval_id: string; status: string; expires_at: string } | null

function answerOf(decisionId: string | null, outcome: Pick<DecisionOutcome, 'decision' | 'reasons' | 'monitor' | 'errors' | 'ruleset_revision'>, argsHash: string, evaluatedAt: Date, approval: ApprovalRef = null) {
  return {
    decision_id: decisionId,
    decision: outcome.decision,
    reasons: outcome.reasons,
    monitor: outcome.monitor,
    errors: outcome.errors,
    approval,
    args_sha256: argsHash,
    ruleset_revision: outcome.ruleset_revision,
    evaluated_at: evaluatedAt.toISOString(),
  }
}

function draftsToSet(drafts: readonly v.InferOutput<typeof DraftSchema>[], revision: number): CompiledPolicySet {
  const inputs: PolicyInput[] = drafts.map((draft, index) => {
    if (draft.condition !== null) {
      const compiled = compileCondition(draft.condition)
      if (!compiled.ok) throw new HttpError(400, `policies.${index}.condition does not compile (line ${compiled.error.line}, column ${compiled.error.column}): ${compiled.error.message}`)
    }
    return { ...draft, policy_id: draft.policy_id ?? '00000000-0000-0000-0000-000000000000', archived: false, approval: null }
  })
  return compilePolicySet(inputs, revision)
}

interface Settled {
  decision: DecisionOutcome['decision']
  reasons: readonly Reason[]
  ref: ApprovalRef
  create: NewApproval | null
  /** The approved approval this allow uses: consumed in the decision's own transaction. */
  consume: string | null
}

const refOf = (approval: Pick<ApprovalRecord, 'approval_id' | 'status' | 'expires_at'>): ApprovalRef => ({ approval_id: approval.approval_id, status: approval.status, expires_at: approval.expires_at.toISOString() })

/** A require_approval decision creates its approval, bound to the exact action; written with the decision. */
function createApproval(principal: Principal, agent: Agent, input: DecisionInput, outcome: DecisionOutcome, decisionId: string, argsHash: string, now: Date): Settled {
  if (outcome.decision !== 'require_approval' || outcome.approval === null) return { decision: outcome.decision, reasons: outcome.reasons, ref: null, create: null, consume: null }
  const requirement = outcome.approval
  const create: NewApproval = {
    approval_id: crypto.randomUUID(),
    organization_id: principal.organizationId,
    decision_id: decisionId,
    agent_id: agent.agent_id,
    agent_handle: agent.handle,
    action: input.action,
    resource: input.resource,
    args: input.args,
    context: input.context,
    args_sha256: argsHash,
    policies: requirement.policies.map((p) => ({ policy_id: p.policy_id, version: p.version })),
    approvers_required: requirement.approvers_required,
    approver_roles: [...requirement.approver_roles],
    use_within_seconds: requirement.use_within_seconds,
    created_at: now,
    expires_at: new Date(now.getTime() + requirement.timeout_seconds * 1000),
    requested_by: requesterOf(principal),
  }
  return { decision: outcome.decision, reasons: outcome.reasons, ref: refOf({ ...create, status: 'pending' }), create, consume: null }
}

/**
 * A request naming an approval: a deny of the policies stands (the approval is left alone);
 * otherwise the approval decides. Unknown, another organization's, used, expired, denied or
 * cancelled: deny approval_unusable. Bound to another action or args: deny approval_mismatch.
 * Still pending: require_approval with the same approval. Approved: allow, and the approval is
 * consumed by one conditional update in the decision's own transaction (storage/decisions.ts),
 * so of concurrent uses exactly one is allowed and the others decide again (approval_unusable).
 */
async function useApproval(ctx: RequestContext, principal: Principal, agent: Agent, approvalId: string, outcome: DecisionOutcome, argsHash: string, now: Date): Promise<Settled> {
  if (outcome.decision === 'deny') return { decision: 'deny', reasons: outcome.reasons, ref: null, create: null, consume: null }
  const deny = (rule: Reason, ref: ApprovalRef = null): Settled => ({ decision: 'deny', reasons: [rule], ref, create: null, consume: null })
  const found = await findApproval(ctx.deps.db, principal.organizationId, approvalId, null)
  if (!found) return deny({ rule: 'approval_unusable' })
  const current = asOf(found, now)
  if (found.agent_id !== agent.agent_id || found.args_sha256 !== argsHash) return deny({ rule: 'approval_mismatch' }, refOf(current))
  if (current.status === 'pending') return { decision: 'require_approval', reasons: outcome.reasons, ref: refOf(current), create: null, consume: null }
  if (current.status !== 'approved') return deny({ rule: 'approval_unusable' }, refOf(current))
  return { decision: 'allow', reasons: [{ rule: 'approval' }], ref: refOf({ ...current, status: 'consumed' }), create: null, consume: approvalId }
}

/** Another use consumed the approval first: this decision is a deny, with the approval as it now stands. */
async function lostUse(ctx: RequestContext, principal: Principal, approvalId: string, now: Date): Promise<Settled> {
  const found = await findApproval(ctx.deps.db, principal.organizationId, approvalId, null)
  return { decision: 'deny', reasons: [{ rule: 'approval_unusable' }], ref: found ? refOf(asOf(found, now)) : null, create: null, consume: null }
}

export interface DecisionServices {
  readonly sets: PolicySetCache
  readonly writer: DecisionWriter
}

/** The agent a request is about, as the context cache names it: an agent key's own, or the handle. */
const agentRefOf = (principal: Principal, handle: string): AgentRef => (principal.agentId !== null ? { agentId: principal.agentId } : { handle })

/** What decideAndLog answers when its cached context turned out stale (nothing was written). */
const STALE: unique symbol = Symbol('stale context')

export function decisionRoutes(guard: Guard, services: DecisionServices): Route[] {
  const { sets, writer } = services
  const contexts = createDecisionContextCache()
  // One in-flight answer per idempotency key in this process; others in other processes meet in the database.
  const inflight = new Map<string, Promise<{ sha: string; body: unknown }>>()
  const lastTouched = new Map<string, number>()

  /** The settings, revision and agent; an agent key's own agent, or the handle named. */
  async function contextFor(ctx: RequestContext, principal: Principal, named: string | undefined): Promise<{ found: DecisionContext; handle: string }> {
    if (principal.agentId !== null) {
      const found = await readDecisionContext(ctx.deps.db, principal.organizationId, { agentId: principal.agentId })
      if (!found || !found.agent) throw INVALID_CREDENTIAL
      if (named !== undefined && named !== found.agent.handle) throw new HttpError(403, `This key is bound to agent ${found.agent.handle}; it may not ask for another agent`)
      return { found, handle: found.agent.handle }
    }
    if (named === undefined) throw new HttpError(400, 'Field agent is required')
    const found = await readDecisionContext(ctx.deps.db, principal.organizationId, { handle: named })
    if (!found) throw INVALID_CREDENTIAL
    return { found, handle: named }
  }

  function touch(ctx: RequestContext, agent: Agent): void {
    const last = lastTouched.get(agent.agent_id) ?? agent.last_seen_at?.getTime() ?? 0
    if (ctx.now - last < TOUCH_INTERVAL_MS) return
    lastTouched.set(agent.agent_id, ctx.now)
    if (lastTouched.size > 100_000) lastTouched.delete(lastTouched.keys().next().value!)
    touchAgents(ctx.deps.db, [agent.agent_id], new Date(ctx.now)).catch((error: { code?: string }) =>
      ctx.deps.logger.log('warn', 'could not record agent last_seen_at', { code: error.code ?? null }),
    )
  }

  /**
   * The context a decision may start from without reading it: one this process cached. Null when
   * none is cached, or when the cached one would refuse the request: a fresh read then answers that.
   */
  function cachedContextFor(principal: Principal, input: DecisionInput): { found: DecisionContext; handle: string } | null {
    if (principal.agentId !== null) {
      const found = contexts.get(principal.organizationId, { agentId: principal.agentId })
      if (!found?.agent || (input.agent !== undefined && input.agent !== found.agent.handle)) return null
      return { found, handle: found.agent.handle }
    }
    if (input.agent === undefined) return null
    const found = contexts.get(principal.organizationId, { handle: input.agent })
    return found?.agent ? { found, handle: input.agent } : null
  }

  async function evaluateAndLog(ctx: RequestContext, principal: Principal, input: DecisionInput, requestSha: string | null): Promise<unknown> {
    // Requests with an idempotency key or an approval write in a transaction with more than the
    // decision: they always read afresh, and their contexts are not kept.
    const cacheable = input.idempotency_key === null && input.approval_id === null
    const cached = cacheable ? cachedContextFor(principal, input) : null
    if (cached) {
      const answer = await decideAndLog(ctx, principal, input, requestSha, cached, true)
      if (answer !== STALE) return answer
    }
    const fresh = await contextFor(ctx, principal, input.agent)
    if (cacheable) contexts.remember(principal.organizationId, agentRefOf(principal, fresh.handle), fresh.found)
    return decideAndLog(ctx, principal, input, requestSha, fresh, false)
  }

  /**
   * Decides from the context and logs the decision. From a cached context (`cached`), the row is
   * written only if the organization is still at the context's revision (the guard, checked by
   * the insert; every agent change bumps it too); STALE when not, with nothing written, or when the
   * decision creates an approval (a transaction): the caller then reads the context afresh.
   */
  async function decideAndLog(ctx: RequestContext, principal: Principal, input: DecisionInput, requestSha: string | null, context: { found: DecisionContext; handle: string }, cached: boolean): Promise<unknown> {
    const { found, handle } = context
    const now = new Date(ctx.now)
    let agent = found.agent
    if (agent === null) {
      agent = await discoverAgent(ctx.deps.db, principal.organizationId, handle, now, agentCap(ctx), { actor: SYSTEM, requestId: ctx.requestId })
      if (agent === null) throw new HttpError(409, `This organization has reached its limit of ${ctx.config.maxAgentsPerOrg} agents (MAX_AGENTS_PER_ORG); agent ${handle} cannot be discovered`)
    }
    const set = await sets.get(principal.organizationId, found.settings.ruleset_revision)
    if (!set) throw INVALID_CREDENTIAL
    const outcome = decide(set, found.settings, {
      agent: { id: agent.agent_id, handle: agent.handle, labels: agent.labels, status: agent.status },
      action: input.action,
      resource: input.resource,
      args: input.args,
      context: input.context,
      now,
    })
    // A newer policy set than the cached context: the context is behind.
    if (cached && outcome.ruleset_revision !== found.settings.ruleset_revision) {
      contexts.forget(principal.organizationId, agentRefOf(principal, handle))
      return STALE
    }
    const argsHash = boundHash(principal.organizationId, handle, input)
    let decisionId = crypto.randomUUID()
    let settled = input.approval_id === null
      ? createApproval(principal, agent, input, outcome, decisionId, argsHash, now)
      : await useApproval(ctx, principal, agent, input.approval_id, outcome, argsHash, now)
    if (cached && settled.create !== null) return STALE
    const guard = cached ? { revision: found.settings.ruleset_revision } : null
    for (;;) {
      const answer = answerOf(decisionId, { ...outcome, decision: settled.decision, reasons: settled.reasons }, argsHash, now, settled.ref)
      const record: DecisionRecord = {
        decision_id: decisionId,
        organization_id: principal.organizationId,
        agent_id: agent.agent_id,
        agent_handle: agent.handle,
        action: input.action,
        resource: input.resource,
        args: input.args,
        context: input.context,
        args_sha256: argsHash,
        decision: settled.decision,
        policy_decision: outcome.decision,
        reasons: [...settled.reasons],
        monitor: outcome.monitor,
        errors: [...outcome.errors],
        approval_id: settled.ref?.approval_id ?? input.approval_id,
        ruleset_revision: outcome.ruleset_revision,
        requested_by: requesterOf(principal),
        evaluated_at: now,
      }
      const idempotency = input.idempotency_key !== null && requestSha !== null ? { key: input.idempotency_key, request_sha256: requestSha, response: answer } : null
      let written
      try {
        written = await writer.write({ record, idempotency, approval: settled.create, consume: settled.consume, audit: auditBy(ctx, principal), guard })
      } catch (error) {
        ctx.deps.logger.log('warn', 'decision not recorded', { requestId: ctx.requestId, code: (error as { code?: string }).code ?? null })
        throw new HttpError(503, NOT_RECORDED, { headers: { 'Retry-After': '1' } })
      }
      if (written.kind === 'stale') {
        contexts.forget(principal.organizationId, agentRefOf(principal, handle))
        return STALE
      }
      if (written.kind === 'consume_lost') {
        // Nothing was logged: decide again, as the deny this use now is.
        settled = await lostUse(ctx, principal, settled.consume!, now)
        decisionId = crypto.randomUUID()
        continue
      }
      touch(ctx, agent)
      if (written.kind === 'duplicate') {
        if (written.request_sha256 !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
        return written.response
      }
      return answer
    }
  }

  async function check(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readDecisionInput(request, ctx, decisionBody)
    if (input.idempotency_key === null) return json(200, await evaluateAndLog(ctx, principal, input, null))
    const requester = requesterOf(principal)
    const requestSha = hashOf({ agent: input.agent ?? null, action: input.action, resource: input.resource, args: input.args, context: input.context })
    const slot = `${principal.organizationId}|${requester}|${input.idempotency_key}`
    const running = inflight.get(slot)
    if (running) {
      const first = await running
      if (first.sha !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
      return json(200, first.body, { 'Idempotent-Replayed': 'true' })
    }
    const stored = await findIdempotent(ctx.deps.db, principal.organizationId, requester, input.idempotency_key, new Date(ctx.now))
    if (stored) {
      if (stored.request_sha256 !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
      return json(200, stored.response, { 'Idempotent-Replayed': 'true' })
    }
    const work = evaluateAndLog(ctx, principal, input, requestSha).then((body) => ({ sha: requestSha, body }))
    inflight.set(slot, work)
    try {
      return json(200, (await work).body)
    } finally {
      inflight.delete(slot)
    }
  }

  async function simulate(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readDecisionInput(request, ctx, simulateBody)
    const { found, handle } = await contextFor(ctx, principal, input.agent)
    const stored = input.policies === undefined ? await sets.get(principal.organizationId, found.settings.ruleset_revision) : null
    const set = input.policies === undefined ? stored : draftsToSet(input.policies, found.settings.ruleset_revision)
    if (!set) throw INVALID_CREDENTIAL
    const agent = found.agent
    const now = new Date(ctx.now)
    const outcome = decide(set, found.settings, {
      // An unknown handle is simulated as a discovered agent, without creating it.
      agent: agent ? { id: agent.agent_id, handle: agent.handle, labels: agent.labels, status: agent.status } : { id: '', handle, labels: {}, status: 'discovered' },
      action: input.action,
      resource: input.resource,
      args: input.args,
      context: input.context,
      now,
    })
    return json(200, answerOf(null, outcome, boundHash(principal.organizationId, handle, input), now))
  }

  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = new URL(request.url).searchParams
    const filter = {
      agentHandle: query.get('agent'),
      agentId: principal.agentId,
      action: query.get('action'),
      decision: query.get('decision') === null ? null : parseValue(v.picklist(DECISIONS, 'decision must be allow, deny or require_approval'), query.get('decision')),
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
