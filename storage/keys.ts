// Organization-owned API keys. The secret is shown once, at creation; only its SHA-256 and a
// display prefix are kept. Knows nothing of HTTP.
import { sql, type Kysely, type Selectable } from 'kysely'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import { lowerRole, type Role } from '../domain/roles.ts'
import { ROLE_SCOPES } from '../domain/scopes.ts'
import { eventBy, executeWithEvents, recordEvent, type AuditBy, type AuditEventInput } from './audit.ts'
import type { ApiKeyTable, Database } from '../database/schema.ts'
import { displayPrefix, generateSecret, hashSecret } from '../auth/secrets.ts'

export interface NewApiKey {
  organizationId: string
  name: string
  role: Role
  /** The user whose current role caps the key: its creator, or the user a creating key answers to. */
  createdByUserId: string | null
  /** The key that created it, when a key did. */
  createdByKeyId: string | null
  expiresAt: Date | null
  /** Set for a key bound to one agent (it may then only act as that agent). */
  agentId?: string | null
}

/**
 * A key that currently authenticates. Its role is the effective one: the key's own, lowered to its
 * creator's current role (see lowerRole).
 */
export type ActiveKey = Pick<Selectable<ApiKeyTable>, 'id' | 'organization_id' | 'role' | 'secret_hash' | 'expires_at' | 'created_by_user_id' | 'agent_id'>

const COLUMNS = [
  'id',
  'organization_id',
  'name',
  'role',
  'display_prefix',
  'created_by_user_id',
  'created_by_key_id',
  'created_at',
  'expires_at',
  'revoked_at',
  'last_used_at',
  'replaced_by',
] as const

/** A key as stored, without its hash: what listings and lookups return. */
export type ApiKeyRow = Pick<Selectable<ApiKeyTable>, (typeof COLUMNS)[number]>

async function insertApiKey(
  db: Kysely<Database>,
  input: NewApiKey,
  issuerKeyId: string | null,
  now: Date,
  event: ((key: ApiKeyRow) => AuditEventInput) | null = null,
): Promise<{ key: ApiKeyRow; secret: string }> {
  const secret = generateSecret('key')
  const id = crypto.randomUUID()
  const query = db
    .insertInto('api_keys')
    .values({
      id,
      organization_id: input.organizationId,
      name: input.name,
      role: input.role,
      secret_hash: hashSecret(secret),
      display_prefix: displayPrefix(secret),
      created_by_user_id: input.createdByUserId,
      created_by_key_id: input.createdByKeyId,
      issuer_key_id: issuerKeyId,
      agent_id: input.agentId ?? null,
      created_at: now,
      expires_at: input.expiresAt,
    })
    .returning(COLUMNS)
  // The event is known before the insert (the id is made here): both go in one statement.
  const expected: ApiKeyRow = {
    id,
    organization_id: input.organizationId,
    name: input.name,
    role: input.role,
    display_prefix: displayPrefix(secret),
    created_by_user_id: input.createdByUserId,
    created_by_key_id: input.createdByKeyId,
    created_at: now,
    expires_at: input.expiresAt,
    revoked_at: null,
    last_used_at: null,
    replaced_by: null,
  }
  const rows = await executeWithEvents(db, query.compile(), event ? [event(expected)] : [])
  return { key: rows[0]!, secret }
}

/** What a key event says about a key: never its secret or hash. */
function keyData(key: ApiKeyRow & { agent_id?: string | null }): Record<string, unknown> {
  return {
    key_id: key.id,
    name: key.name,
    role: key.role,
    scopes: ROLE_SCOPES[key.role],
    prefix: key.display_prefix,
    expires_at: key.expires_at?.toISOString() ?? null,
    agent_id: key.agent_id ?? null,
  }
}

/** Active keys of the organization: not revoked and not expired. */
async function countActiveKeys(db: Kysely<Database>, organizationId: string, now: Date): Promise<number> {
  const row = await db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('organization_id', '=', organizationId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Creates a key. With a cap, the organization is locked while active keys are counted, so
 * parallel creations cannot overshoot it. A key created by a key is issued by it: revoking the
 * issuer revokes it (see revokeApiKey).
 */
export async function createApiKey(
  db: Kysely<Database>,
  input: NewApiKey,
  now: Date,
  by: AuditBy,
  cap: Cap | null = null,
): Promise<{ key: ApiKeyRow; secret: string }> {
  return db.transaction().execute(async (trx) => {
    if (cap !== null) {
      await lockOrganization(trx, input.organizationId)
      assertBelowCap(await countActiveKeys(trx, input.organizationId, now), cap)
    }
    return insertApiKey(trx, input, input.createdByKeyId, now, (key) => eventBy(by, input.organizationId, 'key.created', { type: 'key', id: key.id }, keyData({ ...key, agent_id: input.agentId ?? null }), now))
  })
}

export async function listApiKeys(db: Kysely<Database>, organizationId: string, limit = 1000): Promise<ApiKeyRow[]> {
  return db
    .selectFrom('api_keys')
    .select(COLUMNS)
    .where('organization_id', '=', organizationId)
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .execute()
}

/** The key, only when it belongs to this organization. */
export async function findApiKey(db: Kysely<Database>, organizationId: string, keyId: string): Promise<ApiKeyRow | null> {
  const row = await db
    .selectFrom('api_keys')
    .select(COLUMNS)
    .where('organization_id', '=', organizationId)
    .where('id', '=', keyId)
    .executeTakeFirst()
  return row ?? null
}

/** Finds the key by any id, whatever its organization (operator commands only). */
export async function findApiKeyById(db: Kysely<Database>, keyId: string): Promise<ApiKeyRow | null> {
  const row = await db.selectFrom('api_keys').select(COLUMNS).where('id', '=', keyId).executeTakeFirst()
  return row ?? null
}

/**
 * The key behind a secret, if it authenticates now: not revoked, not expired, and its creator
 * (when a user) still a member of the organization. One query: the creator's membership is joined
 * so a demotion or removal applies on the very next lookup, with no stored copy to fall behind.
 */
export async function findActiveKeyByHash(db: Kysely<Database>, secretHash: string, now: Date): Promise<ActiveKey | null> {
  const row = await db
    .selectFrom('api_keys as k')
    .leftJoin('memberships as c', (join) => join.onRef('c.user_id', '=', 'k.created_by_user_id').onRef('c.organization_id', '=', 'k.organization_id'))
    .select(['k.id', 'k.organization_id', 'k.role', 'k.secret_hash', 'k.expires_at', 'k.created_by_user_id', 'k.agent_id', 'c.role as creator_role'])
    .where('k.secret_hash', '=', secretHash)
    .where('k.revoked_at', 'is', null)
    .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', now)]))
    .where((eb) => eb.or([eb('k.created_by_user_id', 'is', null), eb('c.role', 'is not', null)]))
    .executeTakeFirst()
  if (!row) return null
  return {
    id: row.id,
    organization_id: row.organization_id,
    role: lowerRole(row.role, row.creator_role),
    secret_hash: row.secret_hash,
    expires_at: row.expires_at,
    created_by_user_id: row.created_by_user_id,
    agent_id: row.agent_id,
  }
}

/**
 * Revokes the key and, in the same transaction, every key it issued, transitively (a stolen key
 * must not buy persistence through keys minted with it), and every session minted from any of
 * them. Walks already-revoked keys too, so revoking again reaches anything still alive below.
 * Returns the ids of the keys this call revoked (empty: nothing was active).
 */
export async function revokeApiKey(db: Kysely<Database>, organizationId: string, keyId: string, now: Date, by: AuditBy): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const revoked = await sql<{ id: string }>`
      with recursive tree(id) as (
        select id from api_keys where id = ${keyId} and organization_id = ${organizationId}
        union
        select k.id from api_keys k join tree t on k.issuer_key_id = t.id
      )
      update api_keys set revoked_at = ${now}
      where id in (select id from tree) and revoked_at is null
      returning id, name, role, display_prefix
    `.execute(trx)
    const ids = revoked.rows.map((row) => row.id)
    for (const row of revoked.rows as unknown as { id: string; name: string; role: Role; display_prefix: string }[]) {
      const data: Record<string, unknown> = { key_id: row.id, name: row.name, role: row.role, prefix: row.display_prefix }
      // A key revoked because the key that issued it was: says which revocation took it.
      if (row.id !== keyId) data.revoked_with = keyId
      await recordEvent(trx, eventBy(by, organizationId, 'key.revoked', { type: 'key', id: row.id }, data, now))
    }
    if (ids.length > 0) {
      await trx.updateTable('token_families').set({ revoked_at: now }).where('api_key_id', 'in', ids).where('revoked_at', 'is', null).execute()
    }
    return ids
  })
}

/**
 * Issues a successor with the same organization, name and role. The old key stops now, or keeps
 * working until `oldKeyUntil` (Stripe's "roll" with an overlap). Null when the key is not an
 * active key of the organization.
 *
 * Rotation is a continuation, not a new branch: the successor takes the old key's place in the
 * issuing lineage (same issuer, unless another key did the rotating, which then issues it), and
 * the keys the old one issued move under the successor. So ending the old key, at once or after
 * the overlap, never revokes the successor or those keys; revoking the successor (or its issuer)
 * does. With a cap, an overlap needs a free slot (both keys work for a while); an immediate
 * rotation swaps one active key for another.
 */
export async function rotateApiKey(
  db: Kysely<Database>,
  organizationId: string,
  keyId: string,
  creator: { userId: string | null; keyId: string | null },
  oldKeyUntil: Date | null,
  now: Date,
  by: AuditBy,
  cap: Cap | null = null,
): Promise<{ key: ApiKeyRow; secret: string } | null> {
  return db.transaction().execute(async (trx) => {
    if (cap !== null) await lockOrganization(trx, organizationId)
    const old = await trx
      .selectFrom('api_keys')
      .select(['id', 'name', 'role', 'expires_at', 'issuer_key_id', 'agent_id'])
      .where('organization_id', '=', organizationId)
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .forUpdate()
      .executeTakeFirst()
    if (!old) return null
    if (cap !== null && oldKeyUntil !== null) assertBelowCap(await countActiveKeys(trx, organizationId, now), cap)
    const issuer = creator.keyId !== null && creator.keyId !== old.id ? creator.keyId : old.issuer_key_id
    const created = await insertApiKey(
      trx,
      {
        organizationId,
        name: old.name,
        role: old.role,
        createdByUserId: creator.userId,
        createdByKeyId: creator.keyId,
        expiresAt: old.expires_at,
        // A key bound to an agent stays bound to it.
        agentId: old.agent_id,
      },
      issuer,
      now,
    )
    await trx.updateTable('api_keys').set({ issuer_key_id: created.key.id }).where('issuer_key_id', '=', old.id).execute()
    const oldExpiry = old.expires_at
    const until = oldKeyUntil && (!oldExpiry || oldKeyUntil < oldExpiry) ? oldKeyUntil : oldExpiry
    await trx
      .updateTable('api_keys')
      .set(oldKeyUntil ? { replaced_by: created.key.id, expires_at: until } : { replaced_by: created.key.id, revoked_at: now })
      .where('id', '=', keyId)
      .execute()
    await recordEvent(
      trx,
      eventBy(by, organizationId, 'key.rotated', { type: 'key', id: keyId }, { ...keyData({ ...created.key, agent_id: old.agent_id }), key_id: keyId, new_key_id: created.key.id, old_key_until: oldKeyUntil ? until?.toISOString() ?? null : now.toISOString() }, now),
    )
    return created
  })
}

/** Writes last-use times gathered in memory: one statement per key per flush, not per request. */
export async function recordKeyUses(db: Kysely<Database>, uses: ReadonlyMap<string, number>): Promise<void> {
  for (const [keyId, at] of uses) {
    await db
      .updateTable('api_keys')
      .set({ last_used_at: new Date(at) })
      .where('id', '=', keyId)
      .where((eb) => eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', new Date(at))]))
      .execute()
  }
}
