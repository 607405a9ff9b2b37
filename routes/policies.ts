// Policies (docs/api.md): GET/POST /policies, GET/PATCH/DELETE /policies/{policy_id}; their
// versions and rollback are in routes/policy-versions.ts. Always scoped by the credential's
// organization: another organization's policy, or one that does not exist, answer the same 404
// byte for byte (OWASP API1).
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { actorOf, changePolicy, createPolicyFrom, POLICY_NOT_FOUND } from '../services/policies.ts'
import { archivePolicy, findPolicy, listPolicies, type Policy, type PolicyCursor } from '../storage/policies.ts'
import { auditBy, protectedErrors, withinCap, type Guard } from './access.ts'
import { created, json, noContent, type Reply } from '../http/reply.ts'
import { bodyDoc, readInput } from '../http/body.ts'
import { UUID } from '../domain/uuid.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, PageSize, parseQuery } from './input.ts'
import { policyToJson, PolicySchema, PolicyWriteSchema, writeToJson } from './policy-json.ts'
import { CONDITIONS_REPLACED, PolicyCreateSchema, PolicyUpdateSchema } from './policy-schemas.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const ORGANIZATION_REQUIRED = 'organization_id is required'
export const ORGANIZATION_NOT_FOUND = 'Organization not found'
export const POLICY_ARCHIVED = 'Policy is archived; roll it back to a version to bring it back'
export const DEFAULT_PAGE = 50
export const MAX_PAGE = 100

export const PolicyListSchema = v.pipe(
  v.object({
    policies: v.array(PolicySchema),
    next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')),
  }),
  v.title('PolicyList'),
)

export const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const PolicyListQuerySchema = v.object({
  organization_id: v.pipe(v.string(ORGANIZATION_REQUIRED), v.check((text) => text.trim() !== '', ORGANIZATION_REQUIRED), v.description('Required: the organization the credential was issued for.')),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
  archived: v.optional(v.pipe(v.picklist(['true', 'false'], 'archived must be true or false'), v.description('true lists archived policies instead of those in force (default false).'))),
})

export const OrganizationQuerySchema = v.object({
  organization_id: v.optional(v.pipe(v.string(), v.description('The organization; may instead be given in the body (both given must agree).'))),
})

/** A retired field wins over other problems (strict objects name only the first unknown field sent). */
const createBody = bodyDoc(PolicyCreateSchema, ['application/json'], true, { precedence: [CONDITIONS_REPLACED] })
const updateBody = bodyDoc(PolicyUpdateSchema, ['application/json', 'application/merge-patch+json'], true, { precedence: [CONDITIONS_REPLACED] })

/** The organization a request names must be the credential's; any other answers like a missing one. */
function ownOrganization(named: string, principal: Principal): string {
  // UUIDs compare without regard to case (RFC 9562 §4).
  if (named.trim().toLowerCase() !== principal.organizationId) throw new HttpError(404, ORGANIZATION_NOT_FOUND)
  return principal.organizationId
}

/** The keyset position after a policy: its created_at and policy_id. */
const PolicyCursorSchema = v.strictTuple([CursorTimestamp, CursorUuid])

function cursorAfter(policy: Policy): string {
  return encodeCursor([policy.created_at.toISOString(), policy.policy_id])
}

function readCursor(cursor: string): PolicyCursor {
  const [createdAt, policyId] = decodeCursor(cursor, PolicyCursorSchema)
  return { createdAt, policyId }
}

/** The policy id of the path, lowercased; null when it is not a UUID (answered as a missing policy). */
export function policyIdOf(request: IRequest): string | null {
  const id = String(request.params.policy_id ?? '')
  return UUID.test(id) ? id.toLowerCase() : null
}

export function policyCap(ctx: RequestContext) {
  return { limit: ctx.config.maxPoliciesPerOrg, what: 'policies', setting: 'MAX_POLICIES_PER_ORG' }
}

export function policyRoutes(guard: Guard): Route[] {
  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = parseQuery(PolicyListQuerySchema, request)
    const organizationId = ownOrganization(query.organization_id, principal)
    const limit = query.limit ?? DEFAULT_PAGE
    const after = query.cursor === undefined || query.cursor === '' ? null : readCursor(query.cursor)
    const rows = await listPolicies(ctx.deps.db, organizationId, { after, limit: limit + 1, archived: query.archived === 'true' })
    const page = rows.slice(0, limit)
    return json(200, { policies: page.map(policyToJson), next_cursor: rows.length > limit ? cursorAfter(page[page.length - 1]!) : null })
  }

  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const { organization_id: fromBody, ...input } = await readInput(request, ctx, createBody)
    const { organization_id: fromQuery } = parseQuery(OrganizationQuerySchema, request)
    if (fromQuery !== undefined && fromBody !== undefined && fromQuery.trim().toLowerCase() !== fromBody.trim().toLowerCase()) {
      throw new HttpError(400, 'organization_id in the query and in the body differ')
    }
    const named = fromQuery ?? fromBody
    if (named === undefined || named.trim() === '') throw new HttpError(400, ORGANIZATION_REQUIRED)
    const organizationId = ownOrganization(named, principal)
    const write = await withinCap(() => createPolicyFrom(ctx.deps.db, organizationId, input, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal), policyCap(ctx)))
    return created(writeToJson(write), `${ctx.config.productApiUrl}/policies/${write.policy.policy_id}`)
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const policy = id ? await findPolicy(ctx.deps.db, principal.organizationId, id) : null
    if (!policy) throw new HttpError(404, POLICY_NOT_FOUND)
    return json(200, policyToJson(policy))
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, 'Request body names no field to change')
    const outcome = id ? await changePolicy(ctx.deps.db, principal.organizationId, id, changes, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal)) : 'missing'
    if (outcome === 'missing') throw new HttpError(404, POLICY_NOT_FOUND)
    if (outcome === 'archived') throw new HttpError(409, POLICY_ARCHIVED)
    return json(200, writeToJson(outcome))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const outcome = id ? await archivePolicy(ctx.deps.db, principal.organizationId, id, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal)) : 'missing'
    if (outcome === 'missing') throw new HttpError(404, POLICY_NOT_FOUND)
    return noContent()
  }

  return [
    { method: 'GET', path: '/policies', handler: guard.protect('policies:read', list), doc: listDoc },
    { method: 'POST', path: '/policies', handler: guard.protect('policies:write', create), doc: createDoc },
    { method: 'GET', path: '/policies/:policy_id', handler: guard.protect('policies:read', read), doc: readDoc },
    { method: 'PATCH', path: '/policies/:policy_id', handler: guard.protect('policies:write', update), doc: updateDoc },
    { method: 'DELETE', path: '/policies/:policy_id', handler: guard.protect('policies:write', remove), doc: deleteDoc },
  ]
}

export const POLICY_TAGS = ['Policies']
/** The 404 of a route under /policies/{policy_id}, as its doc says it. */
export const POLICY_NOT_FOUND_DOC = 'No such policy in the caller\'s organization ("Policy not found").'

const listDoc: OperationDoc = {
  operationId: 'listPolicies',
  summary: "List the organization's policies",
  description: 'Cursor-paginated, oldest first; policies in force by default, archived ones with archived=true. Another organization answers 404, never revealing that it exists.',
  tags: POLICY_TAGS,
  scopes: ['policies:read'],
  query: PolicyListQuerySchema,
  responses: {
    200: { description: 'A page of policies.', schema: PolicyListSchema },
    ...protectedErrors({ 404: 'The organization is not the credential\'s ("Organization not found").' }),
  },
}

const createDoc: OperationDoc = {
  operationId: 'createPolicy',
  summary: "Create a policy in the caller's organization",
  description:
    'organization_id travels in the query or the body; both given and different is 400. The condition is compiled: one that does not compile is 400 naming line and column. ' +
    'approval is accepted only for require_approval policies. policy_id, version, created_by and the timestamps are set by the server; version 1 is recorded.',
  tags: POLICY_TAGS,
  scopes: ['policies:write'],
  query: OrganizationQuerySchema,
  body: createBody,
  responses: {
    201: { description: 'Created.', schema: PolicyWriteSchema, headers: { Location: 'URL of the new policy.' } },
    ...protectedErrors({
      404: 'The organization is not the credential\'s ("Organization not found").',
      409: 'The organization has reached its cap of policies (MAX_POLICIES_PER_ORG).',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}

const readDoc: OperationDoc = {
  operationId: 'getPolicy',
  summary: 'Fetch a single policy rule',
  description: "An archived policy stays readable (archived: true). Another organization's policy, a malformed id and a missing one all answer the same 404.",
  tags: POLICY_TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The policy.', schema: PolicySchema },
    ...protectedErrors({ 404: POLICY_NOT_FOUND_DOC }),
  },
}

const updateDoc: OperationDoc = {
  operationId: 'updatePolicy',
  summary: 'Change a policy',
  description:
    'Changes the given fields, adds 1 to version and records that version. approval is replaced as a whole (fields left out take their defaults) and is dropped when the effect changes away from require_approval. ' +
    'Concurrent changes of one policy take turns: their versions are consecutive.',
  tags: POLICY_TAGS,
  scopes: ['policies:write'],
  body: updateBody,
  responses: {
    200: { description: 'The changed policy.', schema: PolicyWriteSchema },
    ...protectedErrors({ 404: POLICY_NOT_FOUND_DOC, 409: 'The policy is archived; roll it back to change it.', 413: 'Body larger than the limit.', 415: 'Content-Type other than JSON.' }),
  },
}

const deleteDoc: OperationDoc = {
  operationId: 'deletePolicy',
  summary: 'Archive a policy',
  description: 'The policy stops applying at once and a new version (archived) is recorded; it and its versions stay readable. Deleting an archived policy again changes nothing.',
  tags: POLICY_TAGS,
  scopes: ['policies:write'],
  responses: {
    204: { description: 'Archived.' },
    ...protectedErrors({ 404: POLICY_NOT_FOUND_DOC }),
  },
}
