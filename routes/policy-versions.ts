// A policy's versions (docs/api.md): GET /policies/{policy_id}/versions[/{version}] and
// POST /policies/{policy_id}/rollback. Every create, change, archive and rollback recorded one
// immutable version; a rollback records a new one with an earlier one's content. Scoped like
// routes/policies.ts: another organization's policy answers the same 404 as a missing one.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { actorOf, POLICY_NOT_FOUND } from '../services/policies.ts'
import { findPolicy, findPolicyVersion, listPolicyVersions, rollbackPolicy } from '../storage/policies.ts'
import { auditBy, protectedErrors, withinCap, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { decodeCursor, encodeCursor, parseQuery } from './input.ts'
import { DEFAULT_PAGE, PAGE_SIZE, policyCap, policyIdOf, POLICY_NOT_FOUND_DOC, POLICY_TAGS } from './policies.ts'
import { PolicyVersionSchema, PolicyWriteSchema, versionToJson, writeToJson } from './policy-json.ts'
import type { OperationDoc } from '../http/pipeline.ts'

export const VERSION_NOT_FOUND = 'Policy version not found'

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

const VersionListQuerySchema = v.object({
  limit: v.optional(PAGE_SIZE),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

const rollbackBody = bodyDoc(RollbackSchema, ['application/json'], true)

/** The keyset position after a version: its number. */
const VersionCursorSchema = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,9}$/), v.transform(Number))])

function versionOf(text: unknown): number | null {
  const raw = String(text ?? '')
  return /^[1-9]\d{0,8}$/.test(raw) ? Number(raw) : null
}

export function policyVersionRoutes(guard: Guard): Route[] {
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
    { method: 'GET', path: '/policies/:policy_id/versions', handler: guard.protect('policies:read', versions), doc: versionsDoc },
    { method: 'GET', path: '/policies/:policy_id/versions/:version', handler: guard.protect('policies:read', version), doc: versionDoc },
    { method: 'POST', path: '/policies/:policy_id/rollback', handler: guard.protect('policies:write', rollback), doc: rollbackDoc },
  ]
}

const versionsDoc: OperationDoc = {
  operationId: 'listPolicyVersions',
  summary: "List a policy's versions, newest first",
  description: 'Every create, change, archive and rollback recorded one immutable version.',
  tags: POLICY_TAGS,
  scopes: ['policies:read'],
  query: VersionListQuerySchema,
  responses: {
    200: { description: 'A page of versions.', schema: PolicyVersionListSchema },
    ...protectedErrors({ 404: POLICY_NOT_FOUND_DOC }),
  },
}

const versionDoc: OperationDoc = {
  operationId: 'getPolicyVersion',
  summary: 'Fetch one version of a policy',
  tags: POLICY_TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The version.', schema: PolicyVersionSchema },
    ...protectedErrors({ 404: `${POLICY_NOT_FOUND_DOC} Or no such version ("Policy version not found").` }),
  },
}

const rollbackDoc: OperationDoc = {
  operationId: 'rollbackPolicy',
  summary: 'Roll a policy back to an earlier version',
  description: 'Records a new version whose content equals the given one (archived or not included): rolling an archived policy back to a version in force restores it.',
  tags: POLICY_TAGS,
  scopes: ['policies:write'],
  body: rollbackBody,
  responses: {
    200: { description: 'The policy at its new version.', schema: PolicyWriteSchema },
    ...protectedErrors({
      404: `${POLICY_NOT_FOUND_DOC} Or no such version ("Policy version not found").`,
      409: 'Restoring an archived policy would pass the cap of policies (MAX_POLICIES_PER_ORG).',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}
