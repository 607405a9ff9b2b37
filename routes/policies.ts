// Policies (docs/api.md): GET/POST /policies, GET/PATCH/DELETE /policies/{policy_id}, their
// versions and rollback. Always scoped by the credential's organization: another organization's
// policy, or one that does not exist, answer the same 404 byte for byte (OWASP API1).
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { compileCondition, MAX_CONDITION_BYTES, normalizeApproval } from '../engine/index.ts'
import {
  archivePolicy,
  createPolicy,
  findPolicy,
  findPolicyVersion,
  listPolicies,
  listPolicyVersions,
  rollbackPolicy,
  updatePolicy,
  type Approval,
  type Effect,
  type Policy,
  type PolicyCursor,
  type PolicyFields,
  type PolicyVersion,
  type PolicyWrite,
} from '../storage/policies.ts'
import { auditBy, protectedErrors, withinCap, type Guard } from './access.ts'
import { created, noContent } from '../http/reply.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { UUID } from '../domain/uuid.ts'
import { ROLES } from '../domain/roles.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, decodeCursor, encodeCursor, jsonObject, PageSize, parseQuery } from './input.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const ORGANIZATION_REQUIRED = 'organization_id is required'
export const ORGANIZATION_NOT_FOUND = 'Organization not found'
export const POLICY_NOT_FOUND = 'Policy not found'
export const VERSION_NOT_FOUND = 'Policy version not found'
export const POLICY_ARCHIVED = 'Policy is archived; roll it back to a version to bring it back'
export const APPROVAL_ONLY_FOR_REQUIRE_APPROVAL = 'Field approval is only for require_approval policies'
export const CONDITIONS_REPLACED = 'Field conditions was replaced by condition: a CEL expression (string) or null'
export const DEFAULT_PAGE = 50
export const MAX_PAGE = 100
export const MAX_USE_WITHIN_SECONDS = 86_400

const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
// A condition may span lines (errors name line and column); other control characters are refused.
const NO_CONTROL_BUT_LINES = /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$/

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
    v.description(`${description} Patterns: \`*\` matches any run of characters (none included); every other character is literal and case-sensitive.`),
  )

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length
}

function compileMessage(text: string): string {
  const compiled = compileCondition(text)
  if (compiled.ok) return 'Field condition does not compile'
  const { line, column, message } = compiled.error
  return `Field condition does not compile (line ${line}, column ${column}): ${message}`
}

/** A CEL expression, compiled when the policy is written: one that does not compile is a 400 naming line and column. */
const ConditionSchema = v.pipe(
  v.nullable(
    v.pipe(
      v.string('Field condition must be a string (a CEL expression) or null'),
      v.check((text) => text.trim() !== '', 'Field condition must not be empty; send null for no condition'),
      v.check((text) => utf8Length(text) <= MAX_CONDITION_BYTES, `Field condition is longer than ${MAX_CONDITION_BYTES} bytes`),
      v.check((text) => NO_CONTROL_BUT_LINES.test(text), 'Field condition holds a control character'),
      v.check((text) => compileCondition(text).ok, (issue) => compileMessage(String(issue.input))),
      v.maxLength(MAX_CONDITION_BYTES),
    ),
  ),
  v.description(
    `A CEL expression that must hold for the policy to apply, or null (always applies). At most ${MAX_CONDITION_BYTES} bytes. ` +
      'Variables: agent {id, handle, labels}, action, resource, args, context, now (timestamp). See docs/api.md.',
  ),
)

const wholeNumber = (name: string, min: number, max: number, description: string) => {
  const message = `Field approval.${name} must be a whole number from ${min} to ${max}`
  return v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message), v.description(description))
}

const APPROVAL_NOT_AN_OBJECT = 'Field approval must be a JSON object or null'

/** The approval block of a require_approval policy; fields left out take their defaults. */
export const ApprovalSchema = v.pipe(
  jsonObject(
    v.strictObject(
      {
        approvers_required: v.optional(wholeNumber('approvers_required', 1, 5, 'Distinct people who must approve (default 1).')),
        approver_roles: v.optional(
          v.pipe(
            v.array(v.picklist(ROLES, 'Field approval.approver_roles must hold roles: owner, admin, manager, member, viewer'), 'Field approval.approver_roles must be an array of roles'),
            v.minLength(1, 'Field approval.approver_roles must name at least one role'),
            v.check((roles) => new Set(roles).size === roles.length, 'Field approval.approver_roles names a role twice'),
            v.description('Roles whose members may approve (default ["owner","admin","manager"]).'),
          ),
        ),
        timeout_seconds: v.optional(wholeNumber('timeout_seconds', 30, 604_800, 'Seconds approvers have to decide before the request expires as denied (default 900).')),
        use_within_seconds: v.optional(
          wholeNumber('use_within_seconds', 1, MAX_USE_WITHIN_SECONDS, 'Seconds the agent has to use a granted approval, from when it was granted (default 300).'),
        ),
      },
      unknownField([], { notAnObject: APPROVAL_NOT_AN_OBJECT }),
    ),
    APPROVAL_NOT_AN_OBJECT,
  ),
  v.description('Only for require_approval policies: who approves and how long approvals last. Fields left out take their defaults.'),
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
  agents: patternList('agents', 'Agent handles the policy governs, or "*" for all.'),
  actions: patternList('actions', 'Action patterns such as "email.send" or "payments.*".'),
  resources: patternList('resources', 'Resource patterns, or "*" for all.'),
  condition: ConditionSchema,
  approval: v.nullable(ApprovalSchema),
  mode: v.pipe(v.picklist(['enforce', 'monitor'], 'Field mode must be enforce or monitor'), v.description('enforce applies the effect; monitor only records what would happen.')),
  enabled: v.pipe(v.boolean('Field enabled must be a boolean'), v.description('Disabled policies are kept but not applied.')),
}

const OrganizationIdSchema = v.pipe(v.string('organization_id must be a string'), v.description('The organization the credential was issued for.'))

const createEntries = {
  name: fields.name,
  description: v.optional(fields.description, ''),
  effect: fields.effect,
  agents: v.optional(fields.agents, ['*']),
  actions: fields.actions,
  resources: v.optional(fields.resources, ['*']),
  condition: v.optional(fields.condition, null),
  approval: v.optional(fields.approval, null),
  mode: v.optional(fields.mode, 'enforce'),
  enabled: v.optional(fields.enabled, true),
}

const WRITABLE = ['name', 'description', 'effect', 'agents', 'actions', 'resources', 'condition', 'approval', 'mode', 'enabled'] as const
const READ_ONLY = ['policy_id', 'version', 'archived', 'archived_at', 'created_at', 'updated_at', 'created_by', 'ruleset_revision']
/** The pre-governance `conditions` object is gone: say what replaced it rather than "Unknown field". */
const RETIRED = { conditions: CONDITIONS_REPLACED }

/** POST /policies body. Strict: a field the server owns is "read-only", any other unknown field is refused. */
export const PolicyCreateSchema = v.pipe(
  v.strictObject({ organization_id: v.optional(OrganizationIdSchema), ...createEntries }, unknownField(READ_ONLY, { retired: RETIRED })),
  v.title('PolicyCreate'),
)

const DRAFT_NOT_AN_OBJECT = 'A draft must be a JSON object'

/**
 * A draft policy for a replay: a POST /policies body, or, with policy_id, a new version of that
 * stored policy standing in for it.
 */
export const PolicyDraftSchema = v.pipe(
  jsonObject(
    v.strictObject(
      { policy_id: v.optional(v.pipe(v.string('Field policy_id must be a UUID'), v.uuid('Field policy_id must be a UUID'), v.description('A stored policy this draft replaces; omit for a new policy.'))), ...createEntries },
      unknownField(READ_ONLY.filter((field) => field !== 'policy_id'), { notAnObject: DRAFT_NOT_AN_OBJECT, retired: RETIRED }),
    ),
    DRAFT_NOT_AN_OBJECT,
  ),
  v.title('PolicyDraft'),
)

/** PATCH /policies/{policy_id} body: any subset of the writable fields; organization_id is read-only here. */
export const PolicyUpdateSchema = v.pipe(
  v.strictObject(
    {
      name: v.optional(fields.name),
      description: v.optional(fields.description),
      effect: v.optional(fields.effect),
      agents: v.optional(fields.agents),
      actions: v.optional(fields.actions),
      resources: v.optional(fields.resources),
      condition: v.optional(fields.condition),
      approval: v.optional(fields.approval),
      mode: v.optional(fields.mode),
      enabled: v.optional(fields.enabled),
    },
    unknownField([...READ_ONLY, 'organization_id'], { retired: RETIRED }),
  ),
  v.title('PolicyUpdate'),
)

const ApprovalAnswerSchema = v.pipe(
  v.nullable(
    v.object({
      approvers_required: v.number(),
      approver_roles: v.array(v.string()),
      timeout_seconds: v.number(),
      use_within_seconds: v.number(),
    }),
  ),
  v.description('The approval settings with every default filled in; null unless effect is require_approval.'),
)

const contentEntries = {
  name: v.string(),
  description: v.string(),
  effect: fields.effect,
  agents: v.array(v.string()),
  actions: v.array(v.string()),
  resources: v.array(v.string()),
  condition: v.pipe(v.nullable(v.string()), v.description('CEL expression, or null.')),
  approval: ApprovalAnswerSchema,
  mode: fields.mode,
  enabled: v.boolean(),
}

const policyEntries = {
  policy_id: v.pipe(v.string(), v.uuid(), v.description('Identifier of the policy.')),
  organization_id: v.pipe(v.string(), v.uuid()),
  ...contentEntries,
  archived: v.pipe(v.boolean(), v.description('True once deleted: an archived policy never applies, and stays readable.')),
  archived_at: v.pipe(v.nullable(v.pipe(v.string(), v.isoTimestamp())), v.description('When it was archived, or null.')),
  version: v.pipe(v.number(), v.integer(), v.description('Starts at 1; each change, archive or rollback adds 1.')),
  created_at: v.pipe(v.string(), v.isoTimestamp()),
  updated_at: v.pipe(v.string(), v.isoTimestamp()),
  created_by: v.pipe(v.string(), v.description('"user:<uuid>", "key:<uuid>" or "operator".')),
}

export const PolicySchema = v.pipe(v.object(policyEntries), v.title('Policy'))

/** The answer of a write: the policy and the organization's ruleset revision after it. */
export const PolicyWriteSchema = v.pipe(
  v.object({ ...policyEntries, ruleset_revision: v.pipe(v.number(), v.integer(), v.description("The organization's ruleset revision after this change.")) }),
  v.title('PolicyWrite'),
)

export const PolicyVersionSchema = v.pipe(
  v.object({
    policy_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    version: v.pipe(v.number(), v.integer()),
    ...contentEntries,
    archived: v.boolean(),
    created_at: v.pipe(v.string(), v.isoTimestamp(), v.description('When this version was written.')),
    created_by: v.pipe(v.string(), v.description('Who wrote this version: "user:<uuid>", "key:<uuid>" or "operator".')),
  }),
  v.title('PolicyVersion'),
)

export const PolicyListSchema = v.pipe(
  v.object({
    policies: v.array(PolicySchema),
    next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')),
  }),
  v.title('PolicyList'),
)

export const PolicyVersionListSchema = v.pipe(
  v.object({
    versions: v.array(PolicyVersionSchema),
    next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')),
  }),
  v.title('PolicyVersionList'),
)

export const RollbackSchema = v.pipe(
  v.strictObject(
    { version: v.pipe(v.number('Field version must be a whole number from 1'), v.integer('Field version must be a whole number from 1'), v.minValue(1, 'Field version must be a whole number from 1'), v.maxValue(2_147_483_647, 'Field version must be a whole number from 1'), v.description('The version whose content becomes the new version.')) },
    unknownField(),
  ),
  v.title('PolicyRollback'),
)

const PAGE_SIZE = PageSize(MAX_PAGE, DEFAULT_PAGE)

export const PolicyListQuerySchema = v.object({
  organization_id: v.pipe(v.string(ORGANIZATION_REQUIRED), v.check((text) => text.trim() !== '', ORGANIZATION_REQUIRED), v.description('Required: the organization the credential was issued for.')),
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
  archived: v.optional(v.pipe(v.picklist(['true', 'false'], 'archived must be true or false'), v.description('true lists archived policies instead of those in force (default false).'))),
})

const VersionListQuerySchema = v.object({
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

export const OrganizationQuerySchema = v.object({
  organization_id: v.optional(v.pipe(v.string(), v.description('The organization; may instead be given in the body (both given must agree).'))),
})

/** A retired field wins over other problems (strict objects name only the first unknown field sent). */
const createBody = bodyDoc(PolicyCreateSchema, ['application/json'], true, { precedence: [CONDITIONS_REPLACED] })
const updateBody = bodyDoc(PolicyUpdateSchema, ['application/json', 'application/merge-patch+json'], true, { precedence: [CONDITIONS_REPLACED] })
const rollbackBody = bodyDoc(RollbackSchema, ['application/json'], true)

type ApprovalInput = v.InferOutput<typeof ApprovalSchema>

/** The stored approval block: every default filled in for require_approval, null for other effects. */
export function approvalFor(effect: Effect, given: ApprovalInput | null | undefined): Approval | null {
  if (effect !== 'require_approval') return null
  const filled = normalizeApproval(given ?? null)
  return {
    approvers_required: filled.approvers_required,
    approver_roles: ROLES.filter((role) => filled.approver_roles.includes(role)),
    timeout_seconds: filled.timeout_seconds,
    use_within_seconds: filled.use_within_seconds,
  }
}

type DraftInput = Omit<v.InferOutput<typeof PolicyCreateSchema>, 'organization_id'>

/** The stored fields of a parsed create body or draft; `where` prefixes the message of a refusal. */
export function fieldsFromInput(input: DraftInput, where = ''): PolicyFields {
  if (input.approval !== null && input.effect !== 'require_approval') throw new HttpError(400, `${where}${APPROVAL_ONLY_FOR_REQUIRE_APPROVAL}`)
  return {
    name: input.name,
    description: input.description,
    effect: input.effect,
    agents: input.agents,
    actions: input.actions,
    resources: input.resources,
    condition: input.condition,
    approval: approvalFor(input.effect, input.approval),
    mode: input.mode,
    enabled: input.enabled,
  }
}

function contentToJson(content: PolicyFields): Pick<v.InferOutput<typeof PolicySchema>, keyof typeof contentEntries> {
  return {
    name: content.name,
    description: content.description,
    effect: content.effect,
    agents: content.agents,
    actions: content.actions,
    resources: content.resources,
    condition: content.condition,
    // Policies written before approval blocks existed have none stored: they get the defaults.
    approval: content.approval ?? approvalFor(content.effect, null),
    mode: content.mode,
    enabled: content.enabled,
  }
}

export function policyToJson(policy: Policy): v.InferOutput<typeof PolicySchema> {
  return {
    policy_id: policy.policy_id,
    organization_id: policy.organization_id,
    ...contentToJson(policy),
    archived: policy.archived_at !== null,
    archived_at: policy.archived_at?.toISOString() ?? null,
    version: policy.version,
    created_at: policy.created_at.toISOString(),
    updated_at: policy.updated_at.toISOString(),
    created_by: policy.created_by,
  }
}

function writeToJson(write: PolicyWrite): v.InferOutput<typeof PolicyWriteSchema> {
  return { ...policyToJson(write.policy), ruleset_revision: write.rulesetRevision }
}

export function versionToJson(version: PolicyVersion): v.InferOutput<typeof PolicyVersionSchema> {
  return {
    policy_id: version.policy_id,
    organization_id: version.organization_id,
    version: version.version,
    ...contentToJson(version),
    archived: version.archived,
    created_at: version.created_at.toISOString(),
    created_by: version.created_by,
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
/** The keyset position after a version: its number. */
const VersionCursorSchema = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,9}$/), v.transform(Number))])

function cursorAfter(policy: Policy): string {
  return encodeCursor([policy.created_at.toISOString(), policy.policy_id])
}

function readCursor(cursor: string): PolicyCursor {
  const [createdAt, policyId] = decodeCursor(cursor, PolicyCursorSchema)
  return { createdAt, policyId }
}

export function actorOf(principal: Principal): string {
  return principal.userId ? `user:${principal.userId}` : `key:${principal.keyId}`
}

function policyIdOf(request: IRequest): string | null {
  const id = String(request.params.policy_id ?? '')
  return UUID.test(id) ? id.toLowerCase() : null
}

function versionOf(text: unknown): number | null {
  const raw = String(text ?? '')
  return /^[1-9]\d{0,8}$/.test(raw) ? Number(raw) : null
}

/** The new content of a PATCH: the given fields over the current ones, the approval block following the effect. */
function mergeChanges(current: Policy, changes: v.InferOutput<typeof PolicyUpdateSchema>): PolicyFields {
  const next: PolicyFields = { ...current }
  for (const key of WRITABLE) if (key in changes && key !== 'approval') (next as unknown as Record<string, unknown>)[key] = changes[key]
  const given = 'approval' in changes ? (changes.approval ?? null) : undefined
  if (given !== undefined && given !== null && next.effect !== 'require_approval') throw new HttpError(400, APPROVAL_ONLY_FOR_REQUIRE_APPROVAL)
  next.approval = given !== undefined ? approvalFor(next.effect, given) : next.effect === 'require_approval' ? (current.approval ?? approvalFor(next.effect, null)) : null
  return next
}

function policyCap(ctx: RequestContext) {
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
    const policyFields = fieldsFromInput(input)
    const write = await withinCap(() => createPolicy(ctx.deps.db, organizationId, policyFields, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal), policyCap(ctx)))
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
    const outcome = id ? await updatePolicy(ctx.deps.db, principal.organizationId, id, (current) => mergeChanges(current, changes), actorOf(principal), new Date(ctx.now), auditBy(ctx, principal)) : 'missing'
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

  async function versions(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const query = parseQuery(VersionListQuerySchema, request)
    const limit = query.limit ?? DEFAULT_PAGE
    const before = query.cursor === undefined || query.cursor === '' ? null : decodeCursor(query.cursor, VersionCursorSchema)[0]
    const policy = id ? await findPolicy(ctx.deps.db, principal.organizationId, id) : null
    if (!policy) throw new HttpError(404, POLICY_NOT_FOUND)
    const rows = await listPolicyVersions(ctx.deps.db, principal.organizationId, policy.policy_id, { before, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const next = rows.length > limit ? encodeCursor([String(page[page.length - 1]!.version)]) : null
    return json(200, { versions: page.map(versionToJson), next_cursor: next })
  }

  async function version(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const policy = id ? await findPolicy(ctx.deps.db, principal.organizationId, id) : null
    if (!policy) throw new HttpError(404, POLICY_NOT_FOUND)
    const n = versionOf(request.params.version)
    const found = n === null ? null : await findPolicyVersion(ctx.deps.db, principal.organizationId, policy.policy_id, n)
    if (!found) throw new HttpError(404, VERSION_NOT_FOUND)
    return json(200, versionToJson(found))
  }

  async function rollback(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = policyIdOf(request)
    const { version: target } = await readInput(request, ctx, rollbackBody)
    const outcome = id
      ? await withinCap(() => rollbackPolicy(ctx.deps.db, principal.organizationId, id, target, actorOf(principal), new Date(ctx.now), auditBy(ctx, principal), policyCap(ctx)))
      : 'missing'
    if (outcome === 'missing') throw new HttpError(404, POLICY_NOT_FOUND)
    if (outcome === 'no-version') throw new HttpError(404, VERSION_NOT_FOUND)
    return json(200, writeToJson(outcome))
  }

  return [
    { method: 'GET', path: '/policies', handler: guard.protect('policies:read', list), doc: listDoc },
    { method: 'POST', path: '/policies', handler: guard.protect('policies:write', create), doc: createDoc },
    { method: 'GET', path: '/policies/:policy_id', handler: guard.protect('policies:read', read), doc: readDoc },
    { method: 'PATCH', path: '/policies/:policy_id', handler: guard.protect('policies:write', update), doc: updateDoc },
    { method: 'DELETE', path: '/policies/:policy_id', handler: guard.protect('policies:write', remove), doc: deleteDoc },
    { method: 'GET', path: '/policies/:policy_id/versions', handler: guard.protect('policies:read', versions), doc: versionsDoc },
    { method: 'GET', path: '/policies/:policy_id/versions/:version', handler: guard.protect('policies:read', version), doc: versionDoc },
    { method: 'POST', path: '/policies/:policy_id/rollback', handler: guard.protect('policies:write', rollback), doc: rollbackDoc },
  ]
}

const TAGS = ['Policies']
const NOT_FOUND = 'No such policy in the caller\'s organization ("Policy not found").'

const listDoc: OperationDoc = {
  operationId: 'listPolicies',
  summary: "List the organization's policies",
  description: 'Cursor-paginated, oldest first; policies in force by default, archived ones with archived=true. Another organization answers 404, never revealing that it exists.',
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
  description:
    'organization_id travels in the query or the body; both given and different is 400. The condition is compiled: one that does not compile is 400 naming line and column. ' +
    'approval is accepted only for require_approval policies. policy_id, version, created_by and the timestamps are set by the server; version 1 is recorded.',
  tags: TAGS,
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
  tags: TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The policy.', schema: PolicySchema },
    ...protectedErrors({ 404: NOT_FOUND }),
  },
}

const updateDoc: OperationDoc = {
  operationId: 'updatePolicy',
  summary: 'Change a policy',
  description:
    'Changes the given fields, adds 1 to version and records that version. approval is replaced as a whole (fields left out take their defaults) and is dropped when the effect changes away from require_approval. ' +
    'Concurrent changes of one policy take turns: their versions are consecutive.',
  tags: TAGS,
  scopes: ['policies:write'],
  body: updateBody,
  responses: {
    200: { description: 'The changed policy.', schema: PolicyWriteSchema },
    ...protectedErrors({ 404: NOT_FOUND, 409: 'The policy is archived; roll it back to change it.', 413: 'Body larger than the limit.', 415: 'Content-Type other than JSON.' }),
  },
}

const deleteDoc: OperationDoc = {
  operationId: 'deletePolicy',
  summary: 'Archive a policy',
  description: 'The policy stops applying at once and a new version (archived) is recorded; it and its versions stay readable. Deleting an archived policy again changes nothing.',
  tags: TAGS,
  scopes: ['policies:write'],
  responses: {
    204: { description: 'Archived.' },
    ...protectedErrors({ 404: NOT_FOUND }),
  },
}

const versionsDoc: OperationDoc = {
  operationId: 'listPolicyVersions',
  summary: "List a policy's versions, newest first",
  description: 'Every create, change, archive and rollback recorded one immutable version.',
  tags: TAGS,
  scopes: ['policies:read'],
  query: VersionListQuerySchema,
  responses: {
    200: { description: 'A page of versions.', schema: PolicyVersionListSchema },
    ...protectedErrors({ 404: NOT_FOUND }),
  },
}

const versionDoc: OperationDoc = {
  operationId: 'getPolicyVersion',
  summary: 'Fetch one version of a policy',
  tags: TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The version.', schema: PolicyVersionSchema },
    ...protectedErrors({ 404: `${NOT_FOUND} Or no such version ("Policy version not found").` }),
  },
}

const rollbackDoc: OperationDoc = {
  operationId: 'rollbackPolicy',
  summary: 'Roll a policy back to an earlier version',
  description: 'Records a new version whose content equals the given one (archived or not included): rolling an archived policy back to a version in force restores it.',
  tags: TAGS,
  scopes: ['policies:write'],
  body: rollbackBody,
  responses: {
    200: { description: 'The policy at its new version.', schema: PolicyWriteSchema },
    ...protectedErrors({
      404: `${NOT_FOUND} Or no such version ("Policy version not found").`,
      409: 'Restoring an archived policy would pass the cap of policies (MAX_POLICIES_PER_ORG).',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}
