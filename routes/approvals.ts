// Approvals (docs/governance.md#approvals): a require_approval decision creates one; signed-in
// people approve or deny it (POST /approvals/{id}/approve|deny); the agent waits on it
// (GET /approvals/{id}?wait=S), then asks again with approval_id (routes/decisions.ts) and gets
// allow once. The waiting and waking is the hub's (services/approvals.ts).
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { listApprovals, votesFor, type ApprovalCursor, type ApprovalRecord, type VoteOutcome, type VoteRecord } from '../storage/approvals.ts'
import type { ApprovalStatus } from '../database/schema.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import type { ApprovalHub } from '../services/approvals.ts'
import type { Principal } from '../services/credentials.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, PageSize, parseValue, pathId } from './input.ts'

export const APPROVAL_NOT_FOUND = 'Approval not found'
export const PEOPLE_ONLY = 'Only a signed-in person (a session from a user login) may approve or deny; API keys, agent keys and tokens minted from keys may not'
export const REPEAT_VOTE = 'You have already voted on this approval; each person counts once'
const CANCEL_REFUSED = "Only the requesting agent's key, an Admin or an Owner may cancel an approval"
const STATUSES = ['pending', 'approved', 'denied', 'expired', 'cancelled', 'consumed'] as const
const MAX_WAIT_SECONDS = 60
const DEFAULT_PAGE = 50
const PAGE_SIZE = PageSize(100, DEFAULT_PAGE)

const VoteSchema = v.pipe(
  v.object({ user_id: v.pipe(v.string(), v.uuid()), vote: v.picklist(['approve', 'deny']), note: v.nullable(v.string()), created_at: v.pipe(v.string(), v.isoTimestamp()) }),
  v.title('ApprovalVote'),
)

export const ApprovalSchema = v.pipe(
  v.object({
    approval_id: v.pipe(v.string(), v.uuid()),
    status: v.pipe(v.picklist(STATUSES), v.description('As of the answer: an overdue pending or approved approval is expired.')),
    decision_id: v.pipe(v.string(), v.uuid(), v.description('The require_approval decision that created it.')),
    agent_id: v.pipe(v.string(), v.uuid()),
    agent: v.string(),
    action: v.string(),
    resource: v.string(),
    args: v.record(v.string(), v.unknown()),
    context: v.record(v.string(), v.unknown()),
    args_sha256: v.pipe(v.string(), v.description('What the approval is bound to: a use with other args is denied (approval_mismatch).')),
    policies: v.array(v.object({ policy_id: v.string(), version: v.number() })),
    approvers_required: v.number(),
    approver_roles: v.array(v.string()),
    votes: v.array(VoteSchema),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    expires_at: v.pipe(v.string(), v.isoTimestamp(), v.description('Still pending then: expired (a timeout is a deny).')),
    use_by: v.pipe(v.nullable(v.string()), v.description('Set when approved: the agent must use it before then.')),
    decided_at: v.nullable(v.string()),
    consumed_at: v.nullable(v.string()),
    consumed_decision_id: v.nullable(v.string()),
    requested_by: v.string(),
    cancelled_by: v.nullable(v.string()),
  }),
  v.title('Approval'),
)

export const ApprovalListSchema = v.pipe(v.object({ approvals: v.array(ApprovalSchema), next_cursor: v.nullable(v.string()) }), v.title('ApprovalList'))

const NoteSchema = v.pipe(
  v.strictObject(
    {
      note: v.optional(
        v.nullable(
          v.pipe(
            v.string('Field note must be a string'),
            v.maxLength(1000, 'Field note is longer than 1000 characters'),
            v.check((text) => !text.includes('\u0000'), 'Field note holds a NUL character'),
          ),
        ),
        null,
      ),
    },
    unknownField(['status', 'approval_id', 'votes']),
  ),
  v.title('ApprovalVoteRequest'),
)
const voteBody = bodyDoc(NoteSchema, ['application/json'], false)

export const ApprovalListQuerySchema = v.object({
  status: v.optional(v.picklist(STATUSES)),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

export const ApprovalReadQuerySchema = v.object({
  wait: v.optional(v.pipe(v.string(), v.description(`Seconds (0–${MAX_WAIT_SECONDS}) to hold the answer while the approval is pending.`))),
})

const iso = (value: Date | null) => (value === null ? null : value.toISOString())

export function approvalToJson(record: ApprovalRecord, votes: readonly VoteRecord[]): v.InferOutput<typeof ApprovalSchema> {
  return {
    approval_id: record.approval_id,
    status: record.status,
    decision_id: record.decision_id,
    agent_id: record.agent_id,
    agent: record.agent_handle,
    action: record.action,
    resource: record.resource,
    args: record.args,
    context: record.context,
    args_sha256: record.args_sha256,
    policies: record.policies,
    approvers_required: record.approvers_required,
    approver_roles: record.approver_roles,
    votes: votes.filter((vote) => vote.approval_id === record.approval_id).map((vote) => ({ user_id: vote.user_id, vote: vote.vote, note: vote.note, created_at: vote.created_at.toISOString() })),
    created_at: record.created_at.toISOString(),
    expires_at: record.expires_at.toISOString(),
    use_by: iso(record.use_by),
    decided_at: iso(record.decided_at),
    consumed_at: iso(record.consumed_at),
    consumed_decision_id: record.consumed_decision_id,
    requested_by: record.requested_by,
    cancelled_by: record.cancelled_by,
  }
}

/** A signed-in person: a session from a user login, not a key, an agent key or a token minted from a key. */
function isPerson(principal: Principal): principal is Principal & { userId: string } {
  return principal.kind === 'session' && principal.userId !== null && principal.keyId === null && principal.agentId === null
}

async function answer(ctx: RequestContext, record: ApprovalRecord): Promise<Reply> {
  return json(200, approvalToJson(record, await votesFor(ctx.deps.db, [record.approval_id])))
}

function conclude(outcome: VoteOutcome, ctx: RequestContext): Promise<Reply> {
  if (outcome.kind === 'not_found') throw new HttpError(404, APPROVAL_NOT_FOUND)
  if (outcome.kind === 'closed') throw new HttpError(409, `This approval is no longer pending: it is ${outcome.approval.status}`)
  if (outcome.kind === 'repeat') throw new HttpError(409, REPEAT_VOTE)
  return answer(ctx, outcome.approval)
}

const ApprovalCursorSchema = v.strictTuple([CursorTimestamp, CursorUuid])

export function approvalRoutes(guard: Guard, hub: ApprovalHub): Route[] {
  const vote = (kind: 'approve' | 'deny') => async (request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> => {
    // The body first, as every route reads it (its published schema decides the 400).
    const input = await readInput(request, ctx, voteBody)
    if (!isPerson(principal)) throw new HttpError(403, PEOPLE_ONLY)
    const id = pathId(request, 'approval_id')
    if (id === null) throw new HttpError(404, APPROVAL_NOT_FOUND)
    const voter = { userId: principal.userId, role: principal.role, vote: kind, note: input.note }
    return conclude(await hub.vote(principal.organizationId, id, voter, new Date(ctx.now), auditBy(ctx, principal)), ctx)
  }

  async function cancel(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'approval_id')
    if (id === null) throw new HttpError(404, APPROVAL_NOT_FOUND)
    if (principal.agentId === null && principal.role !== 'admin' && principal.role !== 'owner') throw new HttpError(403, CANCEL_REFUSED)
    const by = principal.agentId !== null ? `agent-key:${principal.keyId}` : principal.subject
    return conclude(await hub.cancel(principal, id, by, new Date(ctx.now), auditBy(ctx, principal)), ctx)
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'approval_id')
    const raw = new URL(request.url).searchParams.get('wait')
    const wait = raw === null ? 0 : parseValue(v.pipe(v.string(), v.regex(/^\d{1,2}$/, `wait must be a whole number of seconds from 0 to ${MAX_WAIT_SECONDS}`), v.transform(Number), v.maxValue(MAX_WAIT_SECONDS, `wait must be a whole number of seconds from 0 to ${MAX_WAIT_SECONDS}`)), raw)
    if (id === null) throw new HttpError(404, APPROVAL_NOT_FOUND)
    const record = await hub.read(principal, id, { waitMs: wait * 1000, now: ctx.now, signal: (request as Request).signal ?? null })
    if (!record) throw new HttpError(404, APPROVAL_NOT_FOUND)
    return answer(ctx, record)
  }

  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = new URL(request.url).searchParams
    const status = query.get('status') === null ? null : (parseValue(v.picklist(STATUSES, `status must be one of ${STATUSES.join(', ')}`), query.get('status')) as ApprovalStatus)
    const rawLimit = query.get('limit')
    const limit = rawLimit === null ? DEFAULT_PAGE : parseValue(PAGE_SIZE, rawLimit)
    const cursor = query.get('cursor')
    let after: ApprovalCursor | null = null
    if (cursor !== null && cursor !== '') {
      const [createdAt, approvalId] = decodeCursor(cursor, ApprovalCursorSchema)
      after = { createdAt, approvalId }
    }
    const rows = await listApprovals(ctx.deps.db, principal.organizationId, { status, agentId: principal.agentId }, new Date(ctx.now), { after, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const votes = await votesFor(ctx.deps.db, page.map((row) => row.approval_id))
    const last = page[page.length - 1]
    return json(200, {
      approvals: page.map((row) => approvalToJson(row, votes)),
      next_cursor: rows.length > limit && last ? encodeCursor([last.created_at.toISOString(), last.approval_id]) : null,
    })
  }

  return [
    { method: 'GET', path: '/approvals', handler: guard.protect('decisions:read', list, { agentKeys: true }), doc: listDoc },
    { method: 'GET', path: '/approvals/:approval_id', handler: guard.protect('decisions:read', read, { agentKeys: true }), doc: readDoc },
    { method: 'POST', path: '/approvals/:approval_id/approve', handler: guard.protect('decisions:read', vote('approve')), doc: voteDoc('approve') },
    { method: 'POST', path: '/approvals/:approval_id/deny', handler: guard.protect('decisions:read', vote('deny')), doc: voteDoc('deny') },
    { method: 'POST', path: '/approvals/:approval_id/cancel', handler: guard.protect('decisions:read', cancel, { agentKeys: true }), doc: cancelDoc },
  ]
}

const TAGS = ['Approvals']
const NOT_FOUND_DOC = "No such approval in the caller's organization (or of the agent key's agent): the same answer as for an id that does not exist."

const listDoc: OperationDoc = {
  operationId: 'listApprovals',
  summary: 'List approvals, oldest first',
  description: 'With status=pending: what waits for a decision, with the full action (agent, action, resource, args, context), the policies and versions that asked for it, and expires_at. Overdue approvals are listed as expired. Viewer+; an agent key sees its own agent\'s approvals only.',
  tags: TAGS,
  scopes: ['decisions:read'],
  query: ApprovalListQuerySchema,
  responses: { 200: { description: 'A page of approvals.', schema: ApprovalListSchema }, ...protectedErrors() },
}

const readDoc: OperationDoc = {
  operationId: 'getApproval',
  summary: 'Fetch an approval, optionally waiting for its decision',
  description: `With wait=S (0–${MAX_WAIT_SECONDS}) a pending approval holds the answer until its state changes or S seconds pass (never past expires_at); otherwise it answers at once. Ask again while the status is pending. An agent key reads its own agent's approvals only.`,
  tags: TAGS,
  scopes: ['decisions:read'],
  query: ApprovalReadQuerySchema,
  responses: { 200: { description: 'The approval as of the answer.', schema: ApprovalSchema }, ...protectedErrors({ 404: NOT_FOUND_DOC }) },
}

function voteDoc(kind: 'approve' | 'deny'): OperationDoc {
  return {
    operationId: kind === 'approve' ? 'approveApproval' : 'denyApproval',
    summary: kind === 'approve' ? 'Approve a pending approval' : 'Deny a pending approval',
    description:
      (kind === 'approve'
        ? 'Counts one approving person; when approvers_required distinct people have approved, the approval is approved and use_by starts. '
        : 'One deny decides: the approval is denied. ') +
      "Only a signed-in person (a session from a user login) whose role is in approver_roles, who neither owns the agent nor is named in context.on_behalf_of. API keys and agent keys never vote. A second vote by the same person answers 409.",
    tags: TAGS,
    scopes: ['decisions:read'],
    body: voteBody,
    responses: {
      200: { description: 'The approval after the vote.', schema: ApprovalSchema },
      ...protectedErrors({
        403: 'Not a signed-in person, a role outside approver_roles, or self-approval (the agent\'s owner, or the person the action is on behalf of).',
        404: NOT_FOUND_DOC,
        409: 'The approval is no longer pending (the message names its state), or this person has already voted.',
        415: 'Content-Type other than application/json.',
      }),
    },
  }
}

const cancelDoc: OperationDoc = {
  operationId: 'cancelApproval',
  summary: 'Cancel a pending approval',
  description: "By the requesting agent's key (its own agent's approvals) or an Admin or Owner.",
  tags: TAGS,
  scopes: ['decisions:read'],
  responses: {
    200: { description: 'The cancelled approval.', schema: ApprovalSchema },
    ...protectedErrors({ 403: "Neither the agent's key nor an Admin or Owner.", 404: NOT_FOUND_DOC, 409: 'The approval is no longer pending (the message names its state).' }),
  },
}
