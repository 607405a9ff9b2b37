// API key management for Admins and Owners (docs/api.md): list, create, rotate,
// revoke. A key's role never exceeds its creator's; the secret is returned once, at creation.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { createApiKey, findApiKey, listApiKeys, revokeApiKey, rotateApiKey, type ApiKeyRow } from '../storage/keys.ts'
import type { Role } from '../database/schema.ts'
import type { Cap } from '../storage/caps.ts'
import { auditBy, protectedErrors, RoleSchema, withinCap, type Guard } from './access.ts'
import { created, noContent } from '../http/reply.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { ROLE_RANK } from '../domain/roles.ts'
import type { Credentials, Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { pathId, Timestamp } from './input.ts'
import { creatorString } from '../domain/creator.ts'
import type { OperationDoc } from '../http/pipeline.ts'

const KEY_NOT_FOUND = 'API key not found'
const MAX_GRACE_SECONDS = 7 * 86_400

const ApiKeySchema = v.pipe(
  v.object({
    key_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    name: v.string(),
    role: RoleSchema,
    prefix: v.pipe(v.string(), v.description('First characters of the secret, to recognise the key. The secret itself is never shown again.')),
    created_by: v.pipe(v.string(), v.description('"user:<uuid>", "key:<uuid>" or "operator".')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    expires_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    revoked_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    last_used_at: v.pipe(v.nullable(v.pipe(v.string(), v.isoTimestamp())), v.description('Recorded in batches: may lag by up to a minute.')),
    replaced_by: v.pipe(v.nullable(v.pipe(v.string(), v.uuid())), v.description('The key that replaced this one on rotation.')),
  }),
  v.title('ApiKey'),
)

export const NewApiKeySchema = v.pipe(
  v.object({
    ...ApiKeySchema.entries,
    api_key: v.pipe(v.string(), v.description('The secret (stw_key_…): shown this once, stored only as a SHA-256 hash.')),
  }),
  v.title('NewApiKey'),
)

const ApiKeyListSchema = v.pipe(v.object({ keys: v.array(ApiKeySchema) }), v.title('ApiKeyList'))

const ApiKeyCreateSchema = v.pipe(
  v.strictObject({
    name: v.optional(
      v.pipe(v.string('Field name must be a string'), v.trim(), v.nonEmpty('Field name must not be empty'), v.maxLength(100, 'Field name is longer than 100 characters'), v.check((text) => !/[\u0000-\u001f\u007f]/.test(text), 'Field name holds a control character')),
      'API key',
    ),
    role: RoleSchema,
    expires_at: v.optional(Timestamp('expires_at', 'When the key stops working; omitted: never.')),
  }, unknownField(['key_id', 'organization_id', 'prefix', 'created_by', 'created_at', 'revoked_at', 'last_used_at', 'api_key'])),
  v.title('ApiKeyCreate'),
)

const ApiKeyRotateSchema = v.pipe(
  v.strictObject({
    expires_in: v.optional(
      v.pipe(
        v.number('Field expires_in must be a number of seconds'),
        v.integer('Field expires_in must be a whole number of seconds'),
        v.minValue(0, 'Field expires_in must not be negative'),
        v.maxValue(MAX_GRACE_SECONDS, `Field expires_in must be at most ${MAX_GRACE_SECONDS} seconds`),
        v.description('Seconds the old key keeps working (a "roll"); 0 or omitted: it stops at once.'),
      ),
    ),
  }, unknownField()),
  v.title('ApiKeyRotate'),
)

const createBody = bodyDoc(ApiKeyCreateSchema, ['application/json'], true)
const rotateBody = bodyDoc(ApiKeyRotateSchema, ['application/json'], false)

export function keyToJson(key: ApiKeyRow): v.InferOutput<typeof ApiKeySchema> {
  const iso = (date: Date | null) => (date ? date.toISOString() : null)
  return {
    key_id: key.id,
    organization_id: key.organization_id,
    name: key.name,
    role: key.role,
    prefix: key.display_prefix,
    // A key made by a key also records the user it answers to; the key is the direct creator.
    created_by: creatorString(key.created_by_user_id, key.created_by_key_id),
    created_at: key.created_at.toISOString(),
    expires_at: iso(key.expires_at),
    revoked_at: iso(key.revoked_at),
    last_used_at: iso(key.last_used_at),
    replaced_by: key.replaced_by,
  }
}

/**
 * Who a new or rotated key answers to. A key made by a key (or a key's token) inherits that key's
 * capping user, so it cannot outlive a demotion of the person behind the chain.
 */
function creatorOf(principal: Principal): { userId: string | null; keyId: string | null } {
  return principal.userId ? { userId: principal.userId, keyId: null } : { userId: principal.keyCreatorUserId, keyId: principal.keyId }
}

function assertRoleWithin(principal: Principal, role: Role, what: string): void {
  if (ROLE_RANK[role] > ROLE_RANK[principal.role]) throw new HttpError(403, `Cannot ${what} a key whose role (${role}) is above your own (${principal.role})`)
}

async function targetKey(request: IRequest, ctx: RequestContext, principal: Principal): Promise<ApiKeyRow> {
  const id = pathId(request, 'key_id')
  const key = id ? await findApiKey(ctx.deps.db, principal.organizationId, id) : null
  if (!key) throw new HttpError(404, KEY_NOT_FOUND)
  return key
}

export function keyRoutes(guard: Guard, credentials: Credentials): Route[] {
  async function list(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const keys = await listApiKeys(ctx.deps.db, principal.organizationId)
    return json(200, { keys: keys.map(keyToJson) })
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, keyToJson(await targetKey(request, ctx, principal)))
  }

  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, createBody)
    assertRoleWithin(principal, input.role, 'create')
    const expiresAt = input.expires_at ?? null
    if (expiresAt && expiresAt.getTime() <= ctx.now) throw new HttpError(400, 'Field expires_at must be in the future')
    const { key, secret } = await withinCap(() =>
      createApiKey(
        ctx.deps.db,
        { organizationId: principal.organizationId, name: input.name, role: input.role, ...prefixCreator(principal), expiresAt },
        new Date(ctx.now),
        auditBy(ctx, principal),
        keyCap(ctx),
      ),
    )
    return created({ ...keyToJson(key), api_key: secret }, `${ctx.config.productApiUrl}/keys/${key.id}`)
  }

  async function rotate(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const old = await targetKey(request, ctx, principal)
    if (old.revoked_at) throw new HttpError(400, 'This API key is revoked; create a new one instead')
    const input = await readInput(request, ctx, rotateBody)
    assertRoleWithin(principal, old.role, 'rotate')
    const grace = input.expires_in ?? 0
    const until = grace > 0 ? new Date(ctx.now + grace * 1000) : null
    const rotated = await withinCap(() => rotateApiKey(ctx.deps.db, principal.organizationId, old.id, creatorOf(principal), until, new Date(ctx.now), auditBy(ctx, principal), keyCap(ctx)))
    if (!rotated) throw new HttpError(404, KEY_NOT_FOUND)
    await credentials.keyChanged(old.id)
    return created({ ...keyToJson(rotated.key), api_key: rotated.secret }, `${ctx.config.productApiUrl}/keys/${rotated.key.id}`)
  }

  async function revoke(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const key = await targetKey(request, ctx, principal)
    assertRoleWithin(principal, key.role, 'revoke')
    const revoked = await revokeApiKey(ctx.deps.db, principal.organizationId, key.id, new Date(ctx.now), auditBy(ctx, principal))
    // The key and every key it issued (and their tokens) stop on the next request, here and in peers.
    for (const id of new Set([key.id, ...revoked])) await credentials.keyChanged(id)
    return noContent()
  }

  return [
    { method: 'GET', path: '/keys', handler: guard.protect('keys:manage', list), doc: listDoc },
    { method: 'POST', path: '/keys', handler: guard.protect('keys:manage', create), doc: createDoc },
    { method: 'GET', path: '/keys/:key_id', handler: guard.protect('keys:manage', read), doc: readDoc },
    { method: 'DELETE', path: '/keys/:key_id', handler: guard.protect('keys:manage', revoke), doc: revokeDoc },
    { method: 'POST', path: '/keys/:key_id/rotate', handler: guard.protect('keys:manage', rotate), doc: rotateDoc },
  ]
}

function keyCap(ctx: RequestContext): Cap {
  return { limit: ctx.config.maxKeysPerOrg, what: 'active API keys', setting: 'MAX_KEYS_PER_ORG' }
}

function prefixCreator(principal: Principal): { createdByUserId: string | null; createdByKeyId: string | null } {
  const creator = creatorOf(principal)
  return { createdByUserId: creator.userId, createdByKeyId: creator.keyId }
}

const TAGS = ['API keys']
const NOT_FOUND = { 404: 'No such key in the caller\'s organization ("API key not found").' }

const listDoc: OperationDoc = {
  operationId: 'listApiKeys',
  summary: "List the organization's API keys",
  description: 'Revoked and expired keys included. Secrets and hashes are never returned.',
  tags: TAGS,
  scopes: ['keys:manage'],
  responses: { 200: { description: 'The keys, oldest first.', schema: ApiKeyListSchema }, ...protectedErrors() },
}

const readDoc: OperationDoc = {
  operationId: 'getApiKey',
  summary: 'Fetch one API key (without its secret)',
  tags: TAGS,
  scopes: ['keys:manage'],
  responses: { 200: { description: 'The key.', schema: ApiKeySchema }, ...protectedErrors(NOT_FOUND) },
}

const createDoc: OperationDoc = {
  operationId: 'createApiKey',
  summary: 'Create an API key',
  description:
    "The role may not exceed the caller's, and for as long as the key lives it acts with the lower of its role and its creating user's current role; it stops (401) if that user leaves the organization. A key created with a key is issued by it: revoking the issuing key revokes this one too. The secret is in the response this once.",
  tags: TAGS,
  scopes: ['keys:manage'],
  body: createBody,
  responses: {
    201: { description: 'Created; api_key holds the secret.', schema: NewApiKeySchema, headers: { Location: 'URL of the new key.' } },
    ...protectedErrors({ 409: 'The organization has reached its cap of active keys (MAX_KEYS_PER_ORG).', 413: 'Body larger than the limit.', 415: 'Content-Type other than application/json.' }),
  },
}

const rotateDoc: OperationDoc = {
  operationId: 'rotateApiKey',
  summary: 'Rotate an API key',
  description:
    'Issues a successor with the same name and role. The old key, and every token minted from it, stops at once, or after expires_in seconds. Rotation is a continuation: the successor, and the keys the old key issued, are not revoked when the old key ends; revoking the successor revokes them.',
  tags: TAGS,
  scopes: ['keys:manage'],
  body: rotateBody,
  responses: {
    201: { description: 'The new key; api_key holds its secret.', schema: NewApiKeySchema, headers: { Location: 'URL of the new key.' } },
    ...protectedErrors({ ...NOT_FOUND, 409: 'With expires_in, both keys stay active for a while and the organization has no free slot (MAX_KEYS_PER_ORG).' }),
  },
}

const revokeDoc: OperationDoc = {
  operationId: 'revokeApiKey',
  summary: 'Revoke an API key',
  description:
    'The key, every key it issued (transitively, including keys those issued), and every token minted from any of them, fail with 401 from the next request on. Revoking a revoked key revokes anything it issued that is still active.',
  tags: TAGS,
  scopes: ['keys:manage'],
  responses: { 204: { description: 'Revoked.' }, ...protectedErrors(NOT_FOUND) },
}
