// Users and their memberships (user, organization, role). Knows nothing of HTTP.
import { sql, type Kysely, type Selectable } from 'kysely'
import { normalizeEmail } from '../domain/email.ts'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import type { Database, MembershipTable, Role, UserTable } from '../database/schema.ts'

export type User = Pick<Selectable<UserTable>, 'id' | 'email' | 'password_hash'>

export type Membership = Pick<Selectable<MembershipTable>, 'organization_id' | 'role'>

/** A membership with its organization's name, as a person choosing where to sign in reads it. */
export type NamedMembership = Membership & { name: string }

/** Creates the user, or returns the existing one with that email (its password unchanged). */
export async function createUserUnlessExists(
  db: Kysely<Database>,
  email: string,
  passwordHash: string,
  now: Date,
): Promise<{ user: User; created: boolean }> {
  const inserted = await db
    .insertInto('users')
    .values({ id: crypto.randomUUID(), email: email.trim(), email_normalized: normalizeEmail(email), password_hash: passwordHash, created_at: now })
    .onConflict((oc) => oc.column('email_normalized').doNothing())
    .returning(['id', 'email', 'password_hash'])
    .executeTakeFirst()
  if (inserted) return { user: inserted, created: true }
  const existing = await findUserByEmail(db, email)
  if (!existing) throw new Error('user vanished between insert and select')
  return { user: existing, created: false }
}

export async function findUserByEmail(db: Kysely<Database>, email: string): Promise<User | null> {
  const row = await db
    .selectFrom('users')
    .select(['id', 'email', 'password_hash'])
    .where('email_normalized', '=', normalizeEmail(email))
    .executeTakeFirst()
  return row ?? null
}


/** Runs `work` in `db` when it is already a transaction, else in a new one. */
export function inTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work)
}

/** Adds the membership, or changes its role when it exists. */
export async function setMembership(db: Kysely<Database>, userId: string, organizationId: string, role: Role, now: Date, by: AuditBy): Promise<void> {
  await inTransaction(db, async (trx) => {
    const before = await trx.selectFrom('memberships').select('role').where('organization_id', '=', organizationId).where('user_id', '=', userId).forUpdate().executeTakeFirst()
    await trx
      .insertInto('memberships')
      .values({ user_id: userId, organization_id: organizationId, role, created_at: now })
      .onConflict((oc) => oc.columns(['organization_id', 'user_id']).doUpdateSet({ role }))
      .execute()
    if (!before) await recordEvent(trx, eventBy(by, organizationId, 'member.added', { type: 'user', id: userId }, { user_id: userId, role }, now))
    else if (before.role !== role) await recordEvent(trx, eventBy(by, organizationId, 'member.changed', { type: 'user', id: userId }, { user_id: userId, role_from: before.role, role }, now))
  })
}

export async function listMembershipsOfUser(db: Kysely<Database>, userId: string): Promise<NamedMembership[]> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('organizations as o', 'o.id', 'm.organization_id')
    .select(['m.organization_id', 'm.role', 'o.name'])
    .where('m.user_id', '=', userId)
    .orderBy('m.created_at')
    .orderBy('m.organization_id')
    .execute()
}

/** A membership with the member's email. */
export type Member = Pick<Selectable<MembershipTable>, 'user_id' | 'role' | 'created_at'> & Pick<Selectable<UserTable>, 'email'>

export async function listMembers(db: Kysely<Database>, organizationId: string): Promise<Member[]> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.user_id', 'u.email', 'm.role', 'm.created_at'])
    .where('m.organization_id', '=', organizationId)
    .orderBy('m.created_at')
    .orderBy('m.user_id')
    .limit(1000)
    .execute()
}

export async function findMember(db: Kysely<Database>, organizationId: string, userId: string): Promise<Member | null> {
  const row = await db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.user_id', 'u.email', 'm.role', 'm.created_at'])
    .where('m.organization_id', '=', organizationId)
    .where('m.user_id', '=', userId)
    .executeTakeFirst()
  return row ?? null
}

/**
 * Changes a member's role, or removes them (role null), unless that would leave the
 * organization without an Owner. Returns 'last-owner' in that case, 'missing' when not a member.
 */
export async function changeMembership(
  db: Kysely<Database>,
  organizationId: string,
  userId: string,
  role: Role | null,
  now: Date,
  by: AuditBy,
): Promise<'changed' | 'missing' | 'last-owner'> {
  return db.transaction().execute((trx) => changeMembershipIn(trx, organizationId, userId, role, now, by))
}

/**
 * Adds the user to the organization with the role, or changes the role they have there, under
 * the same rule as changeMembership (an organization always keeps an Owner), in one transaction.
 */
export async function addOrChangeMembership(
  db: Kysely<Database>,
  organizationId: string,
  userId: string,
  role: Role,
  now: Date,
  by: AuditBy,
): Promise<'added' | 'changed' | 'missing' | 'last-owner'> {
  return db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto('memberships')
      .values({ user_id: userId, organization_id: organizationId, role, created_at: now })
      .onConflict((oc) => oc.columns(['organization_id', 'user_id']).doNothing())
      .returning('user_id')
      .executeTakeFirst()
    if (!inserted) return changeMembershipIn(trx, organizationId, userId, role, now, by)
    await recordEvent(trx, eventBy(by, organizationId, 'member.added', { type: 'user', id: userId }, { user_id: userId, role }, now))
    return 'added'
  })
}

/** Runs inside the caller's transaction, so the Owner count it checks cannot change before the write. */
async function changeMembershipIn(
  trx: Kysely<Database>,
  organizationId: string,
  userId: string,
  role: Role | null,
  now: Date,
  by: AuditBy,
): Promise<'changed' | 'missing' | 'last-owner'> {
  // Lock the organization's owner rows so two concurrent demotions cannot both pass the check.
  const owners = await trx
    .selectFrom('memberships')
    .select('user_id')
    .where('organization_id', '=', organizationId)
    .where('role', '=', 'owner')
    .forUpdate()
    .execute()
  const current = await trx
    .selectFrom('memberships')
    .select('role')
    .where('organization_id', '=', organizationId)
    .where('user_id', '=', userId)
    .forUpdate()
    .executeTakeFirst()
  if (!current) return 'missing'
  if (current.role === 'owner' && role !== 'owner' && owners.length <= 1) return 'last-owner'
  const target = { type: 'user', id: userId }
  if (role === null) {
    await trx.deleteFrom('memberships').where('organization_id', '=', organizationId).where('user_id', '=', userId).execute()
    await recordEvent(trx, eventBy(by, organizationId, 'member.removed', target, { user_id: userId, role: current.role }, now))
  } else {
    await trx.updateTable('memberships').set({ role }).where('organization_id', '=', organizationId).where('user_id', '=', userId).execute()
    if (current.role !== role) await recordEvent(trx, eventBy(by, organizationId, 'member.changed', target, { user_id: userId, role_from: current.role, role }, now))
  }
  return 'changed'
}

/** The emails of these users (those that still exist), by id. */
export async function findUserEmails(db: Kysely<Database>, userIds: readonly string[]): Promise<Map<string, string>> {
  if (userIds.length === 0) return new Map()
  const rows = await db.selectFrom('users').select(['id', 'email']).where('id', 'in', [...userIds]).execute()
  return new Map(rows.map((row) => [row.id, row.email]))
}

/**
 * A failed password sign-in of an existing account: one login.failed event in each organization
 * the user belongs to (an unknown email records nothing: it has no organization). No password,
 * ever: the reason only says which check failed.
 */
export async function recordLoginFailure(db: Kysely<Database>, userId: string, reason: 'password' | 'organization', clientAddress: string, by: AuditBy, now: Date): Promise<void> {
  await sql`
    insert into audit_events (organization_id, occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id)
    select m.organization_id, ${now}, ${by.actor.type}, ${by.actor.id}, 'login.failed', 'user', ${userId}, ${JSON.stringify({ user_id: userId, method: 'password', reason, client_address: clientAddress })}::jsonb, ${by.requestId}
    from memberships m where m.user_id = ${userId}
  `.execute(db)
}
