// Agents (docs/api.md): GET/POST /agents, GET/PATCH/DELETE /agents/{agent_id}, agent-bound keys
// (POST /agents/{agent_id}/keys) and capabilities. Scoped by the credential's organization:
// another organization's agent answers the same 404 as one that does not exist.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { capabilitiesOf } from '../engine/index.ts'
import { agentKeyIds, createAgent, deleteAgent, findAgent, HandleTakenError, listAgents, OwnerNotMemberError, updateAgent, type Agent, type AgentCursor, type AgentFields } from '../storage/agents.ts'
import { createApiKey } from '../storage/keys.ts'
import type { PolicySetCache } from '../services/policyset-cache.ts'
import { agentCap } from '../services/decision-agents.ts'
import { readDecisionContext } from '../storage/decision-context.ts'
import { auditBy, protectedErrors, withinCap, type Guard } from './access.ts'
import { created, noContent, json, type Reply } from '../http/reply.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { UUID } from '../domain/uuid.ts'
import { HANDLE, HANDLE_MESSAGE } from '../domain/agents.ts'
import type { Credentials, Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, jsonObject, PageSize, parseValue, Timestamp } from './input.ts'
import { keyToJson, NewApiKeySchema } from './keys.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const AGENT_NOT_FOUND = 'Agent not found'
const DEFAULT_PAGE = 50
const MAX_PAGE = 100
const MAX_LABELS = 32
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/

export const HandleSchema = (field: string) =>
  v.pipe(v.string(`Field ${field} must be a string`), v.regex(HANDLE, `Field ${field} ${HANDLE_MESSAGE}`), v.description('Handle: 1–64 of [a-z0-9][a-z0-9._-]*, unique in the organization; what policies match.'))

const text = (field: string, max: number) =>
  v.pipe(
    v.string(`Field ${field} must be a string`),
    v.maxLength(max, `Field ${field} is longer than ${max} characters`),
    v.check((value) => NO_CONTROL.test(value), `Field ${field} holds a control character`),
  )

const LABELS_NOT_AN_OBJECT = 'Field labels must be a JSON object of strings'

const LabelsSchema = v.pipe(
  jsonObject(v.record(v.string(), v.unknown(), LABELS_NOT_AN_OBJECT), LABELS_NOT_AN_OBJECT),
  v.check((value) => Object.keys(value).length <= MAX_LABELS, `Field labels holds more than ${MAX_LABELS} entries`),
  v.check((value) => Object.entries(value).every(([key, item]) => key.length >= 1 && key.length <= 64 && typeof item === 'string' && item.length <= 256), 'Field labels must map keys of 1 to 64 characters to strings of at most 256 characters'),
  v.description(`string → string, at most ${MAX_LABELS} entries; conditions see them as agent.labels.`),
)

const StatusSchema = v.pipe(v.picklist(['active', 'suspended', 'discovered'], 'Field status must be active, suspended or discovered'), v.description('suspended: every decision is deny (agent_suspended); discovered: created by a decision naming a new handle, decided per the unknown_agents setting.'))

const OwnerSchema = v.pipe(v.nullable(v.pipe(v.string('Field owner_user_id must be a UUID or null'), v.uuid('Field owner_user_id must be a UUID or null'), v.transform((id) => id.toLowerCase()))), v.description('The accountable person (a member of the organization), or null.'))

const WRITABLE = ['handle', 'display_name', 'description', 'owner_user_id', 'labels', 'status'] as const
const READ_ONLY = ['agent_id', 'organization_id', 'created_at', 'updated_at', 'last_seen_at']

/** Strict: a field the server owns is "read-only", any other unknown field is refused. */
export const AgentCreateSchema = v.pipe(
  v.strictObject(
    {
      handle: HandleSchema('handle'),
      display_name: v.optional(text('display_name', 200), ''),
      description: v.optional(text('description', 2000), ''),
      owner_user_id: v.optional(OwnerSchema, null),
      labels: v.optional(LabelsSchema, {}),
      status: v.optional(StatusSchema, 'active'),
    },
    unknownField(READ_ONLY),
  ),
  v.title('AgentCreate'),
)

export const AgentUpdateSchema = v.pipe(
  v.strictObject(
    {
      handle: v.optional(HandleSchema('handle')),
      display_name: v.optional(text('display_name', 200)),
      description: v.optional(text('description', 2000)),
      owner_user_id: v.optional(OwnerSchema),
      labels: v.optional(LabelsSchema),
      status: v.optional(StatusSchema),
    },
    unknownField(READ_ONLY),
  ),
  v.title('AgentUpdate'),
)

export const AgentSchema = v.pipe(
  v.object({
    agent_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    handle: v.string(),
    display_name: v.string(),
    description: v.string(),
    owner_user_id: v.nullable(v.pipe(v.string(), v.uuid())),
    labels: v.record(v.string(), v.string()),
    status: StatusSchema,
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    updated_at: v.pipe(v.string(), v.isoTimestamp()),
    last_seen_at: v.pipe(v.nullable(v.pipe(v.string(), v.isoTimestamp())), v.description('Last decision asked for the agent; recorded at most once a minute.')),
  }),
  v.title('Agent'),
)

export const AgentListSchema = v.pipe(
  v.object({ agents: v.array(AgentSchema), next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')) }),
  v.title('AgentList'),
)

const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const AgentListQuerySchema = v.object({
  status: v.optional(StatusSchema),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

export const AgentKeyCreateSchema = v.pipe(
  v.strictObject(
    {
      name: v.optional(v.pipe(text('name', 100), v.trim(), v.nonEmpty('Field name must not be empty')), 'Agent key'),
      expires_at: v.optional(Timestamp('expires_at', 'When the key stops working; omitted: never.')),
    },
    unknownField(['key_id', 'organization_id', 'role', 'prefix', 'created_by', 'created_at', 'api_key', 'agent_id']),
  ),
  v.title('AgentKeyCreate'),
)

const createBody = bodyDoc(AgentCreateSchema, ['application/json'], true)
const updateBody = bodyDoc(AgentUpdateSchema, ['application/json', 'application/merge-patch+json'], true)
const createKeyBody = bodyDoc(AgentKeyCreateSchema, ['application/json'], false)

const CapabilityPolicySchema = v.object({
  policy_id: v.string(),
  version: v.number(),
  name: v.string(),
  effect: v.string(),
  condition: v.nullable(v.string()),
  resources: v.array(v.string()),
  limits: v.optional(
    v.pipe(
      v.array(v.object({ name: v.string(), kind: v.picklist(['count', 'spend']), max: v.number(), currency: v.nullable(v.string()), scope: v.string(), window: v.string(), mode: v.picklist(['enforce', 'monitor']) })),
      v.description('Present when the policy carries limits (docs/budgets.md): an allow under it is also counted against these; GET /agents/{agent_id}/usage says what is left.'),
    ),
  ),
})

export const CapabilitiesSchema = v.pipe(
  v.object({
    capabilities: v.array(
      v.object({
        action: v.pipe(v.string(), v.description('An action pattern the policies name.')),
        decision: v.pipe(v.picklist(['allow', 'deny', 'require_approval', 'conditional']), v.description('What the agent gets for it; conditional: a condition or a resource restriction decides at request time.')),
        condition: v.pipe(v.nullable(v.string()), v.description('For conditional: the conditions that can change the outcome.')),
        otherwise: v.pipe(v.nullable(v.picklist(['allow', 'deny', 'require_approval'])), v.description('For conditional: the decision when no condition holds.')),
        policies: v.array(CapabilityPolicySchema),
        rule: v.optional(v.pipe(v.string(), v.description('Set when a rule decides every action: agent_suspended or unknown_agent.'))),
      }),
    ),
  }),
  v.title('Capabilities'),
)

export function agentToJson(agent: Agent): v.InferOutput<typeof AgentSchema> {
  return {
    agent_id: agent.agent_id,
    organization_id: agent.organization_id,
    handle: agent.handle,
    display_name: agent.display_name,
    description: agent.description,
    owner_user_id: agent.owner_user_id,
    labels: agent.labels,
    status: agent.status,
    created_at: agent.created_at.toISOString(),
    updated_at: agent.updated_at.toISOString(),
    last_seen_at: agent.last_seen_at ? agent.last_seen_at.toISOString() : null,
  }
}

const AgentCursorSchema = v.strictTuple([CursorTimestamp, CursorUuid])

function readCursor(cursor: string): AgentCursor {
  const [createdAt, agentId] = decodeCursor(cursor, AgentCursorSchema)
  return { createdAt, agentId }
}

function agentIdOf(request: IRequest): string | null {
  const id = String(request.params.agent_id ?? '')
  return UUID.test(id) ? id.toLowerCase() : null
}

/** Storage's refusals as answers: a taken handle is 409, an owner from elsewhere 400. */
async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await withinCap(work)
  } catch (error) {
    if (error instanceof HandleTakenError) throw new HttpError(409, error.message)
    if (error instanceof OwnerNotMemberError) throw new HttpError(400, 'Field owner_user_id is not a member of this organization')
    throw error
  }
}

export function agentRoutes(guard: Guard, credentials: Credentials, sets: PolicySetCache): Route[] {
  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = new URL(request.url).searchParams
    const rawStatus = query.get('status')
    const status = rawStatus === null ? null : parseValue(v.picklist(['active', 'suspended', 'discovered'], 'status must be active, suspended or discovered'), rawStatus)
    const rawLimit = query.get('limit')
    const limit = rawLimit === null ? DEFAULT_PAGE : parseValue(PAGE_SIZE, rawLimit)
    const cursor = query.get('cursor')
    const after = cursor === null || cursor === '' ? null : readCursor(cursor)
    const rows = await listAgents(ctx.deps.db, principal.organizationId, { status, after, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return json(200, { agents: page.map(agentToJson), next_cursor: rows.length > limit && last ? encodeCursor([last.created_at.toISOString(), last.agent_id]) : null })
  }

  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, createBody)
    const fields: AgentFields = { ...input, labels: input.labels as Record<string, string> }
    const agent = await mapped(() => createAgent(ctx.deps.db, principal.organizationId, fields, new Date(ctx.now), agentCap(ctx), auditBy(ctx, principal)))
    return created(agentToJson(agent), `${ctx.config.productApiUrl}/agents/${agent.agent_id}`)
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = agentIdOf(request)
    const agent = id ? await findAgent(ctx.deps.db, principal.organizationId, id) : null
    if (!agent) throw new HttpError(404, AGENT_NOT_FOUND)
    return json(200, agentToJson(agent))
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = agentIdOf(request)
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, 'Request body names no field to change')
    const patch: Partial<AgentFields> = {}
    for (const key of WRITABLE) if (key in changes) (patch as Record<string, unknown>)[key] = changes[key]
    const agent = id ? await mapped(() => updateAgent(ctx.deps.db, principal.organizationId, id, patch, new Date(ctx.now), auditBy(ctx, principal))) : null
    if (!agent) throw new HttpError(404, AGENT_NOT_FOUND)
    return json(200, agentToJson(agent))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = agentIdOf(request)
    const keys = id ? await agentKeyIds(ctx.deps.db, id) : []
    const deleted = id ? await deleteAgent(ctx.deps.db, principal.organizationId, id, new Date(ctx.now), auditBy(ctx, principal)) : false
    if (!deleted) throw new HttpError(404, AGENT_NOT_FOUND)
    // Its keys went with it (cascade): they stop on the next request, here and in peers.
    await credentials.agentChanged(id!)
    for (const keyId of keys) await credentials.keyChanged(keyId)
    return noContent()
  }

  async function createKey(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = agentIdOf(request)
    const agent = id ? await findAgent(ctx.deps.db, principal.organizationId, id) : null
    if (!agent) throw new HttpError(404, AGENT_NOT_FOUND)
    const input = await readInput(request, ctx, createKeyBody)
    const expiresAt = input.expires_at ?? null
    if (expiresAt && expiresAt.getTime() <= ctx.now) throw new HttpError(400, 'Field expires_at must be in the future')
    const creator = principal.userId ? { createdByUserId: principal.userId, createdByKeyId: null } : { createdByUserId: principal.keyCreatorUserId, createdByKeyId: principal.keyId }
    const cap = { limit: ctx.config.maxKeysPerOrg, what: 'active API keys', setting: 'MAX_KEYS_PER_ORG' }
    // The role only bounds what the key could do; an agent key may only ask decisions for its agent.
    const { key, secret } = await withinCap(() =>
      createApiKey(ctx.deps.db, { organizationId: principal.organizationId, name: input.name, role: 'member', ...creator, expiresAt, agentId: agent.agent_id }, new Date(ctx.now), auditBy(ctx, principal), cap),
    )
    return created({ ...keyToJson(key), agent_id: agent.agent_id, api_key: secret }, `${ctx.config.productApiUrl}/keys/${key.id}`)
  }

  async function capabilitiesFor(ctx: RequestContext, principal: Principal, agentId: string | null): Promise<Reply> {
    const found = agentId ? await readDecisionContext(ctx.deps.db, principal.organizationId, { agentId }) : null
    if (!found || !found.agent) throw new HttpError(404, AGENT_NOT_FOUND)
    const set = await sets.get(principal.organizationId, found.settings.ruleset_revision)
    if (!set) throw new HttpError(404, AGENT_NOT_FOUND)
    return json(200, { capabilities: capabilitiesOf(set, found.settings, { handle: found.agent.handle, status: found.agent.status }) })
  }

  async function capabilities(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return capabilitiesFor(ctx, principal, agentIdOf(request))
  }

  async function ownCapabilities(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    if (principal.agentId === null) throw new HttpError(404, 'Only a key bound to an agent has /agents/me; name the agent: /agents/{agent_id}/capabilities')
    return capabilitiesFor(ctx, principal, principal.agentId)
  }

  return [
    { method: 'GET', path: '/agents', handler: guard.protect('agents:read', list), doc: listDoc },
    { method: 'POST', path: '/agents', handler: guard.protect('agents:write', create), doc: createDoc },
    { method: 'GET', path: '/agents/me/capabilities', handler: guard.protect('agents:read', ownCapabilities, { agentKeys: true }), doc: ownCapabilitiesDoc },
    { method: 'GET', path: '/agents/:agent_id', handler: guard.protect('agents:read', read), doc: readDoc },
    { method: 'PATCH', path: '/agents/:agent_id', handler: guard.protect('agents:write', update), doc: updateDoc },
    { method: 'DELETE', path: '/agents/:agent_id', handler: guard.protect('agents:write', remove), doc: deleteDoc },
    { method: 'POST', path: '/agents/:agent_id/keys', handler: guard.protect('keys:manage', createKey), doc: createKeyDoc },
    { method: 'GET', path: '/agents/:agent_id/capabilities', handler: guard.protect('agents:read', capabilities), doc: capabilitiesDoc },
  ]
}

const TAGS = ['Agents']
const NOT_FOUND = { 404: 'No such agent in the caller\'s organization ("Agent not found").' }

const listDoc: OperationDoc = {
  operationId: 'listAgents',
  summary: "List the organization's agents",
  description: 'Cursor-paginated, newest first; status=discovered lists agents first seen in a decision.',
  tags: TAGS,
  scopes: ['agents:read'],
  query: AgentListQuerySchema,
  responses: { 200: { description: 'A page of agents.', schema: AgentListSchema }, ...protectedErrors() },
}

const createDoc: OperationDoc = {
  operationId: 'createAgent',
  summary: 'Register an agent',
  description: 'Agents created here start active (unless status says otherwise). The handle is unique in the organization.',
  tags: TAGS,
  scopes: ['agents:write'],
  body: createBody,
  responses: {
    201: { description: 'Created.', schema: AgentSchema, headers: { Location: 'URL of the new agent.' } },
    ...protectedErrors({ 409: 'The handle is taken, or the organization has reached its cap of agents (MAX_AGENTS_PER_ORG).', 413: 'Body larger than the limit.', 415: 'Content-Type other than application/json.' }),
  },
}

const readDoc: OperationDoc = {
  operationId: 'getAgent',
  summary: 'Fetch one agent',
  tags: TAGS,
  scopes: ['agents:read'],
  responses: { 200: { description: 'The agent.', schema: AgentSchema }, ...protectedErrors(NOT_FOUND) },
}

const updateDoc: OperationDoc = {
  operationId: 'updateAgent',
  summary: 'Change an agent (suspend it with status=suspended)',
  description: 'A status change applies from the very next decision, in every process.',
  tags: TAGS,
  scopes: ['agents:write'],
  body: updateBody,
  responses: { 200: { description: 'The changed agent.', schema: AgentSchema }, ...protectedErrors({ ...NOT_FOUND, 409: 'The handle is taken.' }) },
}

const deleteDoc: OperationDoc = {
  operationId: 'deleteAgent',
  summary: 'Delete an agent and its keys',
  description: 'Its keys stop on the next request; its logged decisions stay.',
  tags: TAGS,
  scopes: ['agents:write'],
  responses: { 204: { description: 'Deleted.' }, ...protectedErrors(NOT_FOUND) },
}

const createKeyDoc: OperationDoc = {
  operationId: 'createAgentKey',
  summary: 'Create a key bound to the agent',
  description:
    'The key may only ask decisions for this agent (POST /decisions), read its own decisions and its own capabilities (GET /agents/me/capabilities); every other route answers 403. The secret is in the response this once.',
  tags: TAGS,
  scopes: ['keys:manage'],
  body: createKeyBody,
  responses: {
    201: { description: 'Created; api_key holds the secret.', schema: NewApiKeySchema, headers: { Location: 'URL of the new key.' } },
    ...protectedErrors({ ...NOT_FOUND, 409: 'The organization has reached its cap of active keys (MAX_KEYS_PER_ORG).' }),
  },
}

const capabilitiesDoc: OperationDoc = {
  operationId: 'getAgentCapabilities',
  summary: 'What the agent may do, per action pattern the policies name',
  tags: TAGS,
  scopes: ['agents:read'],
  responses: { 200: { description: 'The capabilities.', schema: CapabilitiesSchema }, ...protectedErrors(NOT_FOUND) },
}

const ownCapabilitiesDoc: OperationDoc = {
  operationId: 'getOwnCapabilities',
  summary: "An agent key's own capabilities",
  tags: TAGS,
  scopes: ['agents:read'],
  responses: { 200: { description: 'The capabilities.', schema: CapabilitiesSchema }, ...protectedErrors({ 404: 'The credential is not bound to an agent.' }) },
}
