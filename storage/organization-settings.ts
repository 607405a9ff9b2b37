// An organization's settings: its name and how decisions are made where no policy decides.
// Every change bumps the ruleset revision in the same transaction, so no process keeps deciding
// with settings older than the last committed change. Knows nothing of HTTP.
import type { Kysely, Selectable, Updateable } from 'kysely'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import { bumpRulesetRevision } from './ruleset.ts'
import type { Database, OrganizationTable } from '../database/schema.ts'

/** The organization's row; updated_at is null until the settings are first changed. */
export type OrganizationSettings = Selectable<OrganizationTable>

export type UnknownAgents = OrganizationSettings['unknown_agents']

export type SettingsChanges = Pick<Updateable<OrganizationTable>, 'name' | 'default_decision' | 'unknown_agents' | 'decision_retention_days' | 'audit_retention_days'>

export async function findOrganizationSettings(db: Kysely<Database>, organizationId: string): Promise<OrganizationSettings | null> {
  const row = await db.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirst()
  return row ?? null
}

/** Applies the changes and bumps the ruleset revision, in one transaction; null when there is no such organization. */
export async function updateOrganizationSettings(db: Kysely<Database>, organizationId: string, changes: SettingsChanges, now: Date, by: AuditBy): Promise<OrganizationSettings | null> {
  return db.transaction().execute(async (trx) => {
    const updated = await trx.updateTable('organizations').set({ ...changes, updated_at: now }).where('id', '=', organizationId).returning('id').executeTakeFirst()
    if (!updated) return null
    await bumpRulesetRevision(trx, organizationId)
    const row = await trx.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirstOrThrow()
    await recordEvent(trx, eventBy(by, organizationId, 'settings.changed', { type: 'organization', id: organizationId }, { changed: Object.keys(changes), changes }, now))
    return row
  })
}
