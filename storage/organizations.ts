// Organizations: the tenant every product row belongs to. Knows nothing of HTTP.
import type { Kysely, Selectable } from 'kysely'
import type { Database, OrganizationTable } from '../database/schema.ts'

export type Organization = Pick<Selectable<OrganizationTable>, 'id' | 'name' | 'created_at'>

export async function createOrganization(db: Kysely<Database>, name: string, now: Date): Promise<Organization> {
  const org = { id: crypto.randomUUID(), name, created_at: now }
  await db.insertInto('organizations').values(org).execute()
  return org
}

export async function findOrganization(db: Kysely<Database>, id: string): Promise<Organization | null> {
  const row = await db.selectFrom('organizations').select(['id', 'name', 'created_at']).where('id', '=', id).executeTakeFirst()
  return row ?? null
}

/** The organization created first (ties broken by id): whose Admins read the leads by default. */
export async function findOldestOrganizationId(db: Kysely<Database>): Promise<string | null> {
  const row = await db.selectFrom('organizations').select('id').orderBy('created_at').orderBy('id').limit(1).executeTakeFirst()
  return row?.id ?? null
}
