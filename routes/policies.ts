// Policies (docs/api.md): GET/POST /policies, GET/PATCH/DELETE /policies/{policy_id}.
// Always scoped by the credential's organization: another organization's policy, or one that
// does not exist, answer the same 404 byte for byte (OWASP API1).
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { createPolicy, deletePolicy, findPolicy, listPolicies, updatePolicy, type Policy, type PolicyCursor, type PolicyFields } from '../storage/policies.ts'
import { protectedErrors, refuseFields, withinCap, type Guard } from './access.ts'
import { created, noContent } from '../http/reply.ts'
import { parseWith, readJsonBody } from '../http/body.ts'
import { UUID } from '../domain/uuid.ts'
import type { Principal } from './credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, PageSize, parseValue } from './input.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import type { Route } from './deps.ts'

export const ORGANIZATION_REQUIRED = 'organization_id is required'
export const ORGANIZATION_NOT_FOUND = 'Organization not found'
export const POLICY_NOT_FOUND = 'Policy not found'
export const DEFAULT_PAGE = 50
export const MAX_PAGE = 100
const MAX_CONDITIONS_BYTES = 4096
const MAX_CONDITIONS_DEPTH = 8

const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/

const patternList = (name: string, description: string) =>
  v.pipe(
    v.array(
      v.pipe(
        v.string(`Field ${name} must hold strings`),
        v.trim(),
        v.nonEmpty(`Field ${name} must not hold empty strings`),
        v.maxLength(200, `Field ${name} holds a string longer than 200 characters`),
        v.check((text) => NO_CONTROL.test(text), `Field ${name} holds a control character`),
      ),
      `Field ${name} must be an array of strings`,
    ),
    v.minLength(1, `Field ${name} must hold at least one entry`),
    v.maxLength(100, `Field ${name} holds more than 100 entries`),
    v.description(description),
  )

function depthOf(value: unknown): number {
  let deepest = 0
  const stack: Array<[unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!
    if (typeof item === 'object' && item !== null) {
      deepest = Math.max(deepest, depth)
      for (const child of Object.values(item)) stack.push([child, depth + 1])
    }
  }
  return deepest
}

const ConditionsSchema = v.pipe(
  v.nullable(v.record(v.string(), v.unknown(), 'Field conditions must be a JSON object or null')),
  v.check((value) => value === null || JSON.stringify(value).length <= MAX_CONDITIONS_BYTES, `Field conditions is larger than ${MAX_CONDITIONS_BYTES} bytes`),
  v.check((value) => value === null || depthOf(value) <= MAX_CONDITIONS_DEPTH, `Field conditions is nested more than ${MAX_CONDITIONS_DEPTH} levels deep`),
  v.description(`Optional JSON object narrowing when the policy applies (at most ${MAX_CONDITIONS_BYTES} bytes, ${MAX_CONDITIONS_DEPTH} levels).`),
)

const fields = {
  name: v.pipe(
    v.string('Field name must be a string'),
    v.trim(),
    v.nonEmpty('Field name is required'),
    v.maxLength(200, 'Field name is longer than 200 characters'),
    v.check((text) => NO_CONTROL.test(text), 'Field name holds a control character'),
    v.description('Short human name of the policy.'),
  ),
  description: v.pipe(v.string('Field description must be a string'), v.maxLength(2000, 'Field description is longer than 2000 characters'), v.description('What the policy is for.')),
  effect: v.pipe(v.picklist(['allow', 'deny', 'require_approval'], 'Field effect must be allow, deny or require_approval'), v.description('What happens to a matching agent action.')),
  agents: patternList('agents', 'Agent ids the policy governs, or "*" for all.'),
  actions: patternList('actions', 'Action patterns such as "email.send" or "payments.*".'),
  resources: patternList('resources', 'Resource patterns, or "*" for all.'),
  conditions: ConditionsSchema,
  mode: v.pipe(v.picklist(['enforce', 'monitor'], 'Field mode must be enforce or monitor'), v.description('enforce applies the effect; monitor only records what would happen.')),
  enabled: v.pipe(v.boolean('Field enabled must be a boolean'), v.description('Disabled policies are kept but not applied.')),
}

const OrganizationIdSchema = v.pipe(v.string('organization_id must be a string'), v.description('The organization the credential was issued for.'))

/** POST /policies body. */
export const PolicyCreateSchema = v.pipe(
  v.object(
    {
      organization_id: v.optional(OrganizationIdSchema),
      name: fields.name,
      description: v.optional(fields.description, ''),
      effect: fields.effect,
      agents: v.optional(fields.agents, ['*']),
      actions: fields.actions,
      resources: v.optional(fields.resources, ['*']),
      conditions: v.optional(fields.conditions, null),
      mode: v.optional(fields.mode, 'enforce'),
      enabled: v.optional(fields.enabled, true),
    },
    'Request body must be a JSON object',
  ),
  v.title('PolicyCreate'),
)

/** PATCH /policies/{policy_id} body: any subset of the writable fields. */
export const PolicyUpdateSchema = v.pipe(
  v.object(
    {
      name: v.optional(fields.name),
      description: v.optional(fields.description),
      effect: v.optional(fields.effect),
      agents: v.optional(fields.agents),
      actions: v.optional(fields.actions),
      resources: v.optional(fields.resources),
      conditions: v.optional(fields.conditions),
      mode: v.optional(fields.mode),
      enabled: v.optional(fields.enabled),
    },
    'Request body must be a JSON object',
  ),
  v.title('PolicyUpdate'),
)

const WRITABLE = ['name', 'description', 'effect', 'agents', 'actions', 'resources', 'conditions', 'mode', 'enabled'] as const
const READ_ONLY = ['policy_id', 'version', 'created_at', 'updated_at', 'created_by'] as const

export const PolicySchema = v.pipe(
  v.object({
    policy_id: v.pipe(v.string(), v.uuid(), v.description('Identifier of the policy.')),
    organization_id: v.pipe(v.string(), v.uuid()),
    name: v.string(),
    description: v.string(),
    effect: fields.effect,
    agents: v.array(v.string()),
    actions: v.array(v.string()),
    resources: v.array(v.string()),
    conditions: v.nullable(v.record(v.string(), v.unknown())),
    mode: fields.mode,
    enabled: v.boolean(),
    version: v.pipe(v.number(), v.integer(), v.description('Starts at 1; each change adds 1.')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    updated_at: v.pipe(v.string(), v.isoTimestamp()),
    created_by: v.pipe(v.string(), v.description('"user:<uuid>", "key:<uuid>" or "operator".')),
  }),
  v.title('Policy'),
)

export const PolicyListSchema = v.pipe(
  v.object({
    policies: v.array(PolicySchema),
    next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')),
  }),
  v.title('PolicyList'),
)

const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const PolicyListQuerySchema = v.object({
  organization_id: v.pipe(v.string(), v.description('Required: the organization the credential was issued for.')),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

export const OrganizationQuerySchema = v.object({
  organization_id: v.optional(v.pipe(v.string(), v.description('The organization; may instead be given in the body (both given must agree).'))),
})

export function policyToJson(policy: Policy): v.InferOutput<typeof PolicySchema> {
  return {
    policy_id: policy.policy_id,
    organization_id: policy.organization_id,
    name: policy.name,
    description: policy.description,
    effect: policy.effect,
    agents: policy.agents,
    actions: policy.actions,
    resources: policy.resources,
    conditions: policy.conditions,
    mode: policy.mode,
    enabled: policy.enabled,
    version: policy.version,
    created_at: policy.created_at.toISOString(),
    updated_at: policy.updated_at.toISOString(),
    created_by: policy.created_by,
  }
}

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

function createdBy(principal: Principal): string {
  return principal.userId ? `user:${principal.userId}` : `key:${principal.keyId}`
}

/** valibot's record accepts (and copies) an array; conditions must be a JSON object. */
function refuseArrayConditions(body: Record<string, unknown>): void {
  if (Array.isArray(body.conditions)) throw new HttpError(400, 'Field conditions must be a JSON object or null')
}

function policyIdOf(request: IRequest): string | null {
  const id = String(request.params.policy_id ?? '')
  return UUID.test(id) ? id.toLowerCase() : null
}

export function policyRoutes(guard: Guard): Route[] {
  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = new URL(request.url).searchParams
    const named = query.get('organization_id')
    if (named === null || named.trim() === '') throw new HttpError(400, ORGANIZATION_REQUIRED)
    const organizationId = ownOrganization(named, principal)
    const rawLimit = query.get('limit')
    const limit = rawLimit === null ? DEFAULT_PAGE : parseValue(PAGE_SIZE, rawLimit)
    const cursor = query.get('cursor')
    const after = cursor === null || cursor === '' ? null : readCursor(cursor)
    const rows = await listPolicies(ctx.deps.db, organizationId, { after, limit: limit + 1 })
    const page = rows.slice(0, limit)
    return json(200, { policies: page.map(policyToJson), next_cursor: rows.length > limit ? cursorAfter(page[page.length - 1]!) : null })
  }

  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const body = await readJsonBody(request, ctx)
    refuseFields(body, ['organization_id', ...WRITABLE], READ_ONLY)
    const fromQuery = new URL(request.url).searchParams.get('organization_id')
    const fromBody = body.organization_id
    if (fromBody !== undefined && typeof fromBody !== 'string') throw new HttpError(400, 'organization_id must be a string')
    if (fromQuery !== null && fromBody !== undefined && fromQuery.trim().toLowerCase() !== fromBody.trim().toLowerCase()) {
      throw new HttpError(400, 'organization_id in the query and in the body differ')
    }
    const named = fromQuery ?? fromBody
    if (named === undefined || named.trim() === '') throw new HttpError(400, ORGANIZATION_REQUIRED)
    const organizationId = ownOrganization(named, principal)
    refuseArrayConditions(body)
    const input = parseWith(PolicyCreateSchema, body)
    const policyFields: PolicyFields = {
      name: input.name,
      description: input.description,
      effect: input.effect,
      agents: input.agents,
      actions: input.actions,
      resources: input.resources,
      conditions: input.conditions,
      mode: input.mode,
      enabled: input.enabled,
    }
    const cap = { limit: ctx.config.maxPoliciesPerOrg, what: 'policies', setting: 'MAX_POLICIES_PER_ORG' }
    const policy = await withinCap(() => createPolicy(ctx.deps.db, organizationId, policyFields, createdBy(principal), new Date(ctx.now), cap))
    return created(policyToJson(policy), `${ctx.config.productApiUrl}/policies/${policy.policy_id}`)
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const policy = id ? await findPolicy(ctx.deps.db, principal.organizationId, id) : null
    if (!policy) throw new HttpError(404, POLICY_NOT_FOUND)
    return json(200, policyToJson(policy))
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const body = await readJsonBody(request, ctx)
    refuseFields(body, WRITABLE, [...READ_ONLY, 'organization_id'])
    refuseArrayConditions(body)
    const changes = parseWith(PolicyUpdateSchema, body)
    if (Object.keys(body).length === 0) throw new HttpError(400, 'Request body names no field to change')
    const patch: Partial<PolicyFields> = {}
    for (const key of WRITABLE) if (key in body) (patch as Record<string, unknown>)[key] = changes[key]
    const policy = id ? await updatePolicy(ctx.deps.db, principal.organizationId, id, patch, new Date(ctx.now)) : null
    if (!policy) throw new HttpError(404, POLICY_NOT_FOUND)
    return json(200, policyToJson(policy))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const deleted = id ? await deletePolicy(ctx.deps.db, principal.organizationId, id) : false
    if (!deleted) throw new HttpError(404, POLICY_NOT_FOUND)
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

const TAGS = ['Policies']

const listDoc: OperationDoc = {
  operationId: 'listPolicies',
  summary: "List the organization's policies",
  description: 'Cursor-paginated, oldest first. Another organization answers 404, never revealing that it exists.',
  tags: TAGS,
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
  description: 'organization_id travels in the query or the body; both given and different is 400. policy_id, version, created_by and the timestamps are set by the server.',
  tags: TAGS,
  scopes: ['policies:write'],
  query: OrganizationQuerySchema,
  body: { schema: PolicyCreateSchema, mediaTypes: ['application/json'], required: true },
  responses: {
    201: { description: 'Created.', schema: PolicySchema, headers: { Location: 'URL of the new policy.' } },
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
  description: "Another organization's policy, a malformed id and a missing one all answer the same 404.",
  tags: TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The policy.', schema: PolicySchema },
    ...protectedErrors({ 404: 'No such policy in the caller\'s organization ("Policy not found").' }),
  },
}

const updateDoc: OperationDoc = {
  operationId: 'updatePolicy',
  summary: 'Change a policy',
  description: 'Changes the given fields and adds 1 to version.',
  tags: TAGS,
  scopes: ['policies:write'],
  body: { schema: PolicyUpdateSchema, mediaTypes: ['application/json', 'application/merge-patch+json'], required: true },
  responses: {
    200: { description: 'The changed policy.', schema: PolicySchema },
    ...protectedErrors({ 404: 'No such policy in the caller\'s organization.', 413: 'Body larger than the limit.', 415: 'Content-Type other than JSON.' }),
  },
}

const deleteDoc: OperationDoc = {
  operationId: 'deletePolicy',
  summary: 'Delete a policy',
  tags: TAGS,
  scopes: ['policies:write'],
  responses: {
    204: { description: 'Deleted.' },
    ...protectedErrors({ 404: 'No such policy in the caller\'s organization.' }),
  },
}
