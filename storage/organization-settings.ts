// An organization's settings: its name and how decisions are made where no policy decides.
// Every change bumps the ruleset revision in the same transaction, so no process keeps deciding
// with settings older than the last committed change. Knows nothing of HTTP.
import type { Kysely } from 'kysely'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import { bumpRulesetRevision } from './ruleset.ts'
import type { Database, DefaultDecision } from '../database/schema.ts'

export type UnknownAgents = 'deny' | 'evaluate'

export interface OrganizationSettings {
  id: string
  name: string
  default_decision: DefaultDecision
  unknown_agents: UnknownAgents
  decision_retention_days: number
  audit_retention_days: number
  ruleset_revision: number
  created_at: Date
  /** Null until the settings are first changed. */
  updated_at: Date | null
}

export interface SettingsChanges {
  name?: string
  default_decision?: DefaultDecision
  unknown_agents?: UnknownAgents
  decision_retention_days?: number
  audit_retention_days?: number
}

function toSettings(row: Record<string, unknown>): OrganizationSettings {
  return {
    id: row.id as string,
    name: row.name as string,
    default_decision: row.default_decision as DefaultDecision,
    unknown_agents: row.unknown_agents as UnknownAgents,
    decision_retention_days: Number(row.decision_retention_days),
    audit_retention_days: Number(row.audit_retention_days),
    ruleset_revision: Number(row.ruleset_revision),
    created_at: new Date(row.created_at as Date),
    updated_at: row.updated_at ? new Date(row.updated_at as Date) : null,
  }
}

export async function findOrganizationSettings(db: Kysely<Database>, organizationId: string): Promise<OrganizationSettings | null> {
  const row = await db.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirst()
  return row ? toSettings(row) : null
}

/** Applies the changes and bumps the ruleset revision, in one transaction; null when there is no such organization. */
export async function updateOrganizationSettings(db: Kysely<Database>, organizationId: string, changes: SettingsChanges, now: Date, by: AuditBy): Promise<OrganizationSettings | null> {
  return db.transaction().execute(async (trx) => {
    const updated = await trx.updateTable('organizations').set({ ...changes, updated_at: now }).where('id', '=', organizationId).returning('id').executeTakeFirst()
    if (!updated) return null
    await bumpRulesetRevision(trx, organizationId)
    const row = await trx.selectFrom('organizations').selectAll().where('id', '=', organizationId).executeTakeFirstOrThrow()
    await recordEvent(trx, eventBy(by, organizationId, 'settings.changed', { type: 'organization', id: organizationId }, { changed: Object.keys(changes), changes }, now))
    return toSettings(row)
  })
}
