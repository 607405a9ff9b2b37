// Sessions: token families, access tokens and rotating refresh tokens, stored only as SHA-256.
// All times come from the caller's clock, never SQL now(), so tests can move time. Knows
// nothing of HTTP.
import { recordEvents, type AuditEventInput } from './audit.ts'
import type { Kysely } from 'kysely'
import type { Database, Role } from '../database/schema.ts'
import { lowerRole } from '../domain/roles.ts'
import { generateSecret, hashSecret } from '../auth/secrets.ts'

export interface FamilyOwner {
  organizationId: string
  /** A user session … */
  userId: string | null
  /** … or a token acting as an API key. */
  apiKeyId: string | null
  role: Role
}

/** Who an access token acts for, as of now. */
export interface TokenPrincipal {
  family_id: string
  organization_id: string
  user_id: string | null
  api_key_id: string | null
  role: Role
  /** The user whose current role caps the token's key; null for user sessions and operator keys. */
  key_creator_user_id: string | null
  /** The agent the token's key is bound to (a token minted from an agent key acts as that agent). */
  agent_id: string | null
  token_hash: string
  /** The earliest of the token's and its key's expiry, in ms. */
  expires_at: number
}

export interface IssuedTokens {
  familyId: string
  accessToken: string
  accessExpiresAt: Date
  refreshToken: string | null
  /** Older sessions of the same user ended to keep within the cap (see startSession). */
  endedFamilies?: string[]
}

/** Limits on a user's sign-ins, applied when a new one starts. */
export interface SessionLimits {
  /** Live sessions (families) a user may hold; starting one more ends the oldest. */
  readonly maxPerUser: number
  /** A family is dead this long after it started (its refresh tokens never outlive it). */
  readonly refreshSeconds: number
  readonly accessSeconds: number
}

export async function startSession(
  db: Kysely<Database>,
  owner: FamilyOwner,
  lifetimes: { accessSeconds: number; refreshSeconds: number | null },
  now: Date,
  limits: SessionLimits | null = null,
  /** Events recorded with the session (login.succeeded), in its transaction. */
  events: readonly AuditEventInput[] = [],
): Promise<IssuedTokens> {
  return db.transaction().execute(async (trx) => {
    await recordEvents(trx, events)
    const ended = owner.userId !== null && limits !== null ? await makeRoomForSession(trx, owner.userId, limits, now) : []
    const familyId = crypto.randomUUID()
    await trx
      .insertInto('token_families')
      .values({ id: familyId, organization_id: owner.organizationId, user_id: owner.userId, api_key_id: owner.apiKeyId, role: owner.role, created_at: now })
      .execute()
    return { ...(await issuePair(trx, familyId, lifetimes, now)), endedFamilies: ended }
  })
}

/**
 * Under a lock on the user's row: deletes the user's dead families (ended or revoked long enough
 * ago) and revokes the oldest live ones so the new one fits the cap. Returns the revoked ids.
 */
async function makeRoomForSession(trx: Kysely<Database>, userId: string, limits: SessionLimits, now: Date): Promise<string[]> {
  await trx.selectFrom('users').select('id').where('id', '=', userId).forUpdate().executeTakeFirst()
  const { endedBefore, revokedBefore } = deadline(limits, now)
  await trx
    .deleteFrom('token_families')
    .where('user_id', '=', userId)
    .where((eb) => eb.or([eb('created_at', '<', endedBefore), eb('revoked_at', '<', revokedBefore)]))
    .execute()
  const live = await trx
    .selectFrom('token_families')
    .select('id')
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where('created_at', '>=', endedBefore)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .execute()
  const oldest = live.slice(Math.max(0, limits.maxPerUser - 1)).map((row) => row.id)
  if (oldest.length > 0) await trx.updateTable('token_families').set({ revoked_at: now }).where('id', 'in', oldest).execute()
  return oldest
}

/**
 * A family started before `endedBefore` can hold no live token (rotation never extends it past its
 * first refresh expiry); a revoked one is kept a refresh lifetime for the record, then dropped.
 */
function deadline(limits: { refreshSeconds: number; accessSeconds: number }, now: Date): { endedBefore: Date; revokedBefore: Date } {
  return {
    endedBefore: new Date(now.getTime() - (limits.refreshSeconds + limits.accessSeconds) * 1000),
    revokedBefore: new Date(now.getTime() - limits.refreshSeconds * 1000),
  }
}

/** Deletes dead families of every user and key, with their tokens (the periodic sweep). */
export async function pruneTokenFamilies(db: Kysely<Database>, limits: { refreshSeconds: number; accessSeconds: number }, now: Date): Promise<number> {
  const { endedBefore, revokedBefore } = deadline(limits, now)
  const result = await db
    .deleteFrom('token_families')
    .where((eb) => eb.or([eb('created_at', '<', endedBefore), eb('revoked_at', '<', revokedBefore)]))
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

async function issuePair(
  db: Kysely<Database>,
  familyId: string,
  lifetimes: { accessSeconds: number; refreshSeconds: number | null },
  now: Date,
): Promise<IssuedTokens> {
  const accessToken = generateSecret('at')
  const accessExpiresAt = new Date(now.getTime() + lifetimes.accessSeconds * 1000)
  await db
    .insertInto('access_tokens')
    .values({ token_hash: hashSecret(accessToken), family_id: familyId, created_at: now, expires_at: accessExpiresAt })
    .execute()
  let refreshToken: string | null = null
  if (lifetimes.refreshSeconds !== null) {
    refreshToken = generateSecret('rt')
    await db
      .insertInto('refresh_tokens')
      .values({
        token_hash: hashSecret(refreshToken),
        family_id: familyId,
        created_at: now,
        expires_at: new Date(now.getTime() + lifetimes.refreshSeconds * 1000),
      })
      .execute()
  }
  return { familyId, accessToken, accessExpiresAt, refreshToken }
}

/**
 * The principal of a live access token: its family not revoked, its key (if any) neither revoked
 * nor expired and its key's creator (if a user) still a member, its user (if any) still a member.
 * A user session takes the member's current role; a key's token the lower of its role at minting
 * and the key creator's current role.
 */
export async function findPrincipalByAccessHash(db: Kysely<Database>, tokenHash: string, now: Date): Promise<TokenPrincipal | null> {
  const row = await db
    .selectFrom('access_tokens as a')
    .innerJoin('token_families as f', 'f.id', 'a.family_id')
    .leftJoin('api_keys as k', 'k.id', 'f.api_key_id')
    .leftJoin('memberships as m', (join) => join.onRef('m.user_id', '=', 'f.user_id').onRef('m.organization_id', '=', 'f.organization_id'))
    .leftJoin('memberships as c', (join) => join.onRef('c.user_id', '=', 'k.created_by_user_id').onRef('c.organization_id', '=', 'f.organization_id'))
    .select([
      'a.token_hash',
      'a.expires_at',
      'f.id as family_id',
      'f.organization_id',
      'f.user_id',
      'f.api_key_id',
      'f.role',
      'k.expires_at as key_expires_at',
      'k.created_by_user_id as key_creator_user_id',
      'k.agent_id',
      'm.role as member_role',
      'c.role as creator_role',
    ])
    .where('a.token_hash', '=', tokenHash)
    .where('a.expires_at', '>', now)
    .where('f.revoked_at', 'is', null)
    .where((eb) =>
      eb.or([
        eb('f.api_key_id', 'is', null),
        eb.and([
          eb('k.revoked_at', 'is', null),
          eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', now)]),
          eb.or([eb('k.created_by_user_id', 'is', null), eb('c.role', 'is not', null)]),
        ]),
      ]),
    )
    .where((eb) => eb.or([eb('f.user_id', 'is', null), eb('m.role', 'is not', null)]))
    .executeTakeFirst()
  if (!row) return null
  const tokenExpiry = row.expires_at.getTime()
  const keyExpiry = row.key_expires_at ? row.key_expires_at.getTime() : Infinity
  return {
    family_id: row.family_id,
    organization_id: row.organization_id,
    user_id: row.user_id,
    api_key_id: row.api_key_id,
    role: row.user_id ? (row.member_role as Role) : lowerRole(row.role, row.creator_role),
    key_creator_user_id: row.key_creator_user_id,
    agent_id: row.agent_id,
    token_hash: row.token_hash,
    expires_at: Math.min(tokenExpiry, keyExpiry),
  }
}

export type RefreshOutcome =
  | { outcome: 'rotated'; tokens: IssuedTokens; organizationId: string; role: Role; userId: string | null; apiKeyId: string | null }
  /** A spent token came back after the retry grace: its family is now revoked (RFC 9700 §4.14.2). */
  | { outcome: 'reused'; familyId: string }
  | { outcome: 'invalid' }

export interface RefreshLifetimes {
  accessSeconds: number
  refreshSeconds: number
  /** How long after it was spent a refresh token may be presented again as a client retry. */
  retryGraceSeconds: number
}

/**
 * Spends the refresh token and issues the next pair in its family, in one transaction. The
 * conditional UPDATE lets exactly one of several concurrent uses spend it. A spent token presented
 * again within the retry grace (a client that lost the response) gets a fresh pair in the same
 * family: secrets are stored hashed, so the first successor cannot be handed out again. Later, it
 * revokes the family. Either way every pair stays in the one family, revoked as a unit.
 */
export async function rotateRefreshToken(db: Kysely<Database>, tokenHash: string, lifetimes: RefreshLifetimes, now: Date): Promise<RefreshOutcome> {
  return db.transaction().execute(async (trx): Promise<RefreshOutcome> => {
    let spent = await trx
      .updateTable('refresh_tokens')
      .set({ spent_at: now })
      .where('token_hash', '=', tokenHash)
      .where('spent_at', 'is', null)
      .where('expires_at', '>', now)
      .returning(['family_id', 'expires_at'])
      .executeTakeFirst()
    if (!spent) {
      const known = await trx
        .selectFrom('refresh_tokens')
        .select(['family_id', 'spent_at', 'expires_at'])
        .where('token_hash', '=', tokenHash)
        .executeTakeFirst()
      if (!known?.spent_at) return { outcome: 'invalid' }
      const sinceSpent = now.getTime() - known.spent_at.getTime()
      const live = known.expires_at > now
      if (!live || sinceSpent >= lifetimes.retryGraceSeconds * 1000) {
        await revokeFamily(trx, known.family_id, now)
        return { outcome: 'reused', familyId: known.family_id }
      }
      spent = { family_id: known.family_id, expires_at: known.expires_at }
    }
    const family = await trx
      .selectFrom('token_families as f')
      .leftJoin('api_keys as k', 'k.id', 'f.api_key_id')
      .leftJoin('memberships as m', (join) => join.onRef('m.user_id', '=', 'f.user_id').onRef('m.organization_id', '=', 'f.organization_id'))
      .select(['f.id', 'f.organization_id', 'f.user_id', 'f.api_key_id', 'f.role', 'f.revoked_at', 'k.revoked_at as key_revoked_at', 'k.expires_at as key_expires_at', 'm.role as member_role'])
      .where('f.id', '=', spent.family_id)
      .executeTakeFirstOrThrow()
    const keyDead = family.api_key_id !== null && (family.key_revoked_at !== null || (family.key_expires_at !== null && family.key_expires_at <= now))
    const memberGone = family.user_id !== null && family.member_role === null
    if (family.revoked_at !== null || keyDead || memberGone) return { outcome: 'invalid' }
    // The family keeps its absolute end: rotation never extends a session past the first expiry.
    const remaining = Math.floor((spent.expires_at.getTime() - now.getTime()) / 1000)
    const tokens = await issuePair(trx, family.id, { accessSeconds: lifetimes.accessSeconds, refreshSeconds: Math.max(1, Math.min(remaining, lifetimes.refreshSeconds)) }, now)
    return {
      outcome: 'rotated',
      tokens,
      organizationId: family.organization_id,
      role: (family.user_id ? family.member_role : family.role) as Role,
      userId: family.user_id,
      apiKeyId: family.api_key_id,
    }
  })
}

async function revokeFamily(db: Kysely<Database>, familyId: string, now: Date): Promise<void> {
  await db.updateTable('token_families').set({ revoked_at: now }).where('id', '=', familyId).where('revoked_at', 'is', null).execute()
}

/** Deletes tokens that expired before `before` (housekeeping; expired ones never authenticate anyway). */
export async function deleteExpiredTokens(db: Kysely<Database>, before: Date): Promise<number> {
  const a = await db.deleteFrom('access_tokens').where('expires_at', '<', before).executeTakeFirst()
  const r = await db.deleteFrom('refresh_tokens').where('expires_at', '<', before).executeTakeFirst()
  return Number(a.numDeletedRows) + Number(r.numDeletedRows)
}
