// Invitations: how a user joins an organization. The inviter gets a one-time secret (stw_inv_…),
// shown once and kept only as SHA-256, to pass on out of band; the invitee accepts with it.
// Nothing here looks at whether the email has an account until the invitee accepts, so an
// invitation tells the inviter nothing about other organizations. Knows nothing of HTTP.
import type { Kysely, Selectable } from 'kysely'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import type { Database, InvitationTable, Role } from '../database/schema.ts'
import { generateSecret, hashSecret } from '../auth/secrets.ts'
import { normalizeEmail } from '../domain/email.ts'
import { createUserUnlessExists, type Member } from './users.ts'

const COLUMNS = ['id', 'organization_id', 'email', 'role', 'invited_by', 'created_at', 'expires_at'] as const

/** What an inviter sees: only what they typed, and the invitation's own dates. */
export type Invitation = Pick<Selectable<InvitationTable>, (typeof COLUMNS)[number]>

/** Wrong passwords one invitation tolerates before it is revoked (bounds guessing through it). */
const MAX_ACCEPT_FAILURES = 5

export type InviteOutcome = { outcome: 'created'; invitation: Invitation; secret: string } | { outcome: 'member' } | { outcome: 'pending' }

/**
 * Creates an invitation, unless the email is already a member of this organization or has an open
 * invitation to it. Members plus open invitations count against the cap, under the
 * organization's lock. An expired open invitation for the same email is closed first.
 */
export async function createInvitation(
  db: Kysely<Database>,
  input: { organizationId: string; email: string; role: Role; invitedBy: string; ttlSeconds: number },
  cap: Cap,
  now: Date,
  by: AuditBy,
): Promise<InviteOutcome> {
  const email = input.email.trim()
  const normalized = normalizeEmail(email)
  return db.transaction().execute(async (trx): Promise<InviteOutcome> => {
    await lockOrganization(trx, input.organizationId)
    await trx
      .updateTable('invitations')
      .set({ revoked_at: now })
      .where('organization_id', '=', input.organizationId)
      .where('email_normalized', '=', normalized)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .where('expires_at', '<=', now)
      .execute()
    // The organization's own members are the inviter's to see (GET /members); nothing else is looked up.
    const member = await trx
      .selectFrom('memberships as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select('m.user_id')
      .where('m.organization_id', '=', input.organizationId)
      .where('u.email_normalized', '=', normalized)
      .executeTakeFirst()
    if (member) return { outcome: 'member' }
    const open = await trx
      .selectFrom('invitations')
      .select('id')
      .where('organization_id', '=', input.organizationId)
      .where('email_normalized', '=', normalized)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .executeTakeFirst()
    if (open) return { outcome: 'pending' }
    assertBelowCap(await countSeats(trx, input.organizationId, now), cap)
    const secret = generateSecret('inv')
    const invitation = await trx
      .insertInto('invitations')
      .values({
        id: crypto.randomUUID(),
        organization_id: input.organizationId,
        email,
        email_normalized: normalized,
        role: input.role,
        secret_hash: hashSecret(secret),
        invited_by: input.invitedBy,
        created_at: now,
        expires_at: new Date(now.getTime() + input.ttlSeconds * 1000),
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    await recordEvent(
      trx,
      eventBy(by, input.organizationId, 'invitation.created', { type: 'invitation', id: invitation.id }, { invitation_id: invitation.id, email: invitation.email, role: invitation.role, expires_at: invitation.expires_at.toISOString() }, now),
    )
    return { outcome: 'created', invitation, secret }
  })
}

/** Members plus open (unexpired, unrevoked, unaccepted) invitations. */
async function countSeats(db: Kysely<Database>, organizationId: string, now: Date): Promise<number> {
  const members = await db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('organization_id', '=', organizationId)
    .executeTakeFirstOrThrow()
  const open = await db
    .selectFrom('invitations')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('organization_id', '=', organizationId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirstOrThrow()
  return Number(members.n) + Number(open.n)
}

/** Open invitations of the organization, oldest first. */
export async function listOpenInvitations(db: Kysely<Database>, organizationId: string, now: Date, limit = 1000): Promise<Invitation[]> {
  return db
    .selectFrom('invitations')
    .select(COLUMNS)
    .where('organization_id', '=', organizationId)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .orderBy('created_at')
    .orderBy('id')
    .limit(limit)
    .execute()
}

export async function findOpenInvitation(db: Kysely<Database>, organizationId: string, id: string, now: Date): Promise<Invitation | null> {
  const row = await db
    .selectFrom('invitations')
    .select(COLUMNS)
    .where('organization_id', '=', organizationId)
    .where('id', '=', id)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst()
  return row ?? null
}

/** Revokes an open invitation; false when it was not open (already used, revoked or missing). */
export async function revokeInvitation(db: Kysely<Database>, organizationId: string, id: string, now: Date, by: AuditBy): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable('invitations')
      .set({ revoked_at: now })
      .where('organization_id', '=', organizationId)
      .where('id', '=', id)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .returning(['id', 'email', 'role'])
      .executeTakeFirst()
    if (!row) return false
    await recordEvent(trx, eventBy(by, organizationId, 'invitation.revoked', { type: 'invitation', id }, { invitation_id: id, email: row.email, role: row.role }, now))
    return true
  })
}

/** An open invitation found by its secret's hash, with the account its email has, if any. */
export interface OpenInvitation extends Invitation {
  /** The existing account's id and password hash; null when the email has no account yet. */
  account: { id: string; password_hash: string } | null
}

export async function findInvitationBySecret(db: Kysely<Database>, secretHash: string, now: Date): Promise<OpenInvitation | null> {
  const row = await db
    .selectFrom('invitations as i')
    .leftJoin('users as u', 'u.email_normalized', 'i.email_normalized')
    .select(['i.id', 'i.organization_id', 'i.email', 'i.role', 'i.invited_by', 'i.created_at', 'i.expires_at', 'u.id as user_id', 'u.password_hash'])
    .where('i.secret_hash', '=', secretHash)
    .where('i.accepted_at', 'is', null)
    .where('i.revoked_at', 'is', null)
    .where('i.expires_at', '>', now)
    .executeTakeFirst()
  if (!row) return null
  const { user_id: userId, password_hash: passwordHash, ...invitation } = row
  return { ...invitation, account: userId && passwordHash ? { id: userId, password_hash: passwordHash } : null }
}

/** Counts a wrong password against the invitation; the MAX_ACCEPT_FAILURES-th revokes it. */
export async function recordAcceptFailure(db: Kysely<Database>, id: string, now: Date): Promise<void> {
  await db
    .updateTable('invitations')
    .set((eb) => ({ failed_attempts: eb('failed_attempts', '+', 1) }))
    .where('id', '=', id)
    .execute()
  await db
    .updateTable('invitations')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .where('failed_attempts', '>=', MAX_ACCEPT_FAILURES)
    .execute()
}

export type AcceptOutcome = { outcome: 'accepted'; member: Member } | { outcome: 'invalid' }

/**
 * Spends the invitation and makes the membership, in one transaction. The conditional UPDATE lets
 * exactly one of several concurrent accepts through. `account` is what the caller verified: the
 * existing user (password checked), or a new account's email and password hash. If an account
 * appeared for the email since (a race), nothing is attached: the caller did not verify it.
 */
export async function acceptInvitation(
  db: Kysely<Database>,
  invitation: Invitation,
  account: { userId: string } | { passwordHash: string },
  now: Date,
  requestId: string | null,
): Promise<AcceptOutcome> {
  return db
    .transaction()
    .execute(async (trx): Promise<AcceptOutcome> => {
      const spent = await trx
        .updateTable('invitations')
        .set({ accepted_at: now })
        .where('id', '=', invitation.id)
        .where('accepted_at', 'is', null)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now)
        .returning(['id'])
        .executeTakeFirst()
      if (!spent) return { outcome: 'invalid' }
      let userId: string
      if ('userId' in account) userId = account.userId
      else {
        const made = await createUserUnlessExists(trx, invitation.email, account.passwordHash, now)
        if (!made.created) throw new AcceptRace()
        userId = made.user.id
      }
      await trx.updateTable('invitations').set({ accepted_user_id: userId }).where('id', '=', invitation.id).execute()
      // Already a member (e.g. the operator added them meanwhile): the existing role stands.
      const added = await trx
        .insertInto('memberships')
        .values({ user_id: userId, organization_id: invitation.organization_id, role: invitation.role, created_at: now })
        .onConflict((oc) => oc.columns(['organization_id', 'user_id']).doNothing())
        .returning('user_id')
        .executeTakeFirst()
      // The invitee acts: accepting makes them a member.
      if (added) {
        const by: AuditBy = { actor: { type: 'user', id: userId }, requestId }
        await recordEvent(
          trx,
          eventBy(by, invitation.organization_id, 'member.added', { type: 'user', id: userId }, { user_id: userId, role: invitation.role, email: invitation.email, invitation_id: invitation.id }, now),
        )
      }
      const member = await trx
        .selectFrom('memberships as m')
        .innerJoin('users as u', 'u.id', 'm.user_id')
        .select(['m.user_id', 'u.email', 'm.role', 'm.created_at'])
        .where('m.organization_id', '=', invitation.organization_id)
        .where('m.user_id', '=', userId)
        .executeTakeFirstOrThrow()
      return { outcome: 'accepted', member }
    })
    .catch((error: unknown) => {
      if (error instanceof AcceptRace) return { outcome: 'invalid' } as const
      throw error
    })
}

/** Thrown inside the accept transaction to roll it back. */
class AcceptRace extends Error {}
