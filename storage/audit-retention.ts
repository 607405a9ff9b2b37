// Export bookkeeping and retention of the audit log. An export records how far it reached
// (audit_exports and an audit.exported event, in one transaction); prune deletes only events
// that are older than the organization's retention, inside ranges the sealer has closed, and
// covered by a complete export. Knows nothing of HTTP.
import { sql, type Kysely } from 'kysely'
import { OPERATOR } from '../domain/audit.ts'
import { eventBy, recordEvent } from './audit.ts'
import type { Database } from '../database/schema.ts'

export interface ExportRecord {
  organizationId: string
  /** The last event id written (0 when the export held no event). */
  throughEventId: number
  format: 'ndjson' | 'csv'
  /** Events written. */
  events: number
  /** Every event of the organization below `belowXid` was in range (no --from/--to). */
  complete: boolean
  /** The export read the events of transactions below this id (all of them ended). */
  belowXid: number
  from: Date | null
  to: Date | null
  exportedAt: Date
}

/** Records a finished export: its audit_exports row and its audit.exported event (actor: the operator). */
export async function recordExport(db: Kysely<Database>, record: ExportRecord): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('audit_exports')
      .values({ organization_id: record.organizationId, through_event_id: record.throughEventId, format: record.format, exported_at: record.exportedAt, exported_by: 'operator' })
      .execute()
    await recordEvent(
      trx,
      eventBy({ actor: OPERATOR, requestId: null }, record.organizationId, 'audit.exported', { type: 'audit', id: null }, {
        through_event_id: record.throughEventId,
        events: record.events,
        format: record.format,
        complete: record.complete,
        below_xid: record.belowXid,
        from: record.from?.toISOString() ?? null,
        to: record.to?.toISOString() ?? null,
      }, record.exportedAt),
    )
  })
}

export type PruneOutcome =
  /** No seal: nothing is deletable yet. */
  | { kind: 'no-seals' }
  /** Nothing older than the retention lies inside a sealed range. */
  | { kind: 'nothing'; retentionDays: number }
  /** Events that would go were not covered by a complete export: nothing was deleted. */
  | { kind: 'not-exported'; uncovered: number; retentionDays: number }
  | { kind: 'pruned'; deleted: number; throughSealId: number; retentionDays: number }

/**
 * Deletes, for one organization, the events of whole sealed ranges that are older than its
 * audit_retention_days: the newest seal whose range (every event with xid < its xid_to) holds
 * no event at or after the cutoff. Refuses (deletes nothing) when any of those events was not
 * covered by a complete export: event_id ≤ its through_event_id and written by a transaction
 * that had ended when it began. Records audit.pruned in the same transaction.
 */
export async function pruneAuditEvents(db: Kysely<Database>, organizationId: string, now: Date): Promise<PruneOutcome> {
  return db.transaction().execute(async (trx): Promise<PruneOutcome> => {
    // One prune per organization at a time.
    await sql`select pg_advisory_xact_lock(hashtext(${`audit-prune:${organizationId}`}))`.execute(trx)
    const org = await trx.selectFrom('organizations').select('audit_retention_days').where('id', '=', organizationId).executeTakeFirstOrThrow()
    const retentionDays = Number(org.audit_retention_days)
    const seals = await trx.selectFrom('audit_seals').select(['seal_id', 'xid_to']).where('organization_id', '=', organizationId).orderBy('seal_id', 'desc').execute()
    if (seals.length === 0) return { kind: 'no-seals' }
    const cutoff = new Date(now.getTime() - retentionDays * 86_400_000)
    // The oldest transaction that wrote an event still within the retention bounds the ranges.
    const young = await trx
      .selectFrom('audit_events')
      .select((eb) => eb.fn.min('xid').as('xid'))
      .where('organization_id', '=', organizationId)
      .where('occurred_at', '>=', cutoff)
      .executeTakeFirst()
    const youngXid = young?.xid === null || young?.xid === undefined ? Infinity : Number(young.xid)
    const seal = seals.find((candidate) => Number(candidate.xid_to) <= youngXid)
    if (!seal) return { kind: 'nothing', retentionDays }
    const sealXid = Number(seal.xid_to)
    const doomed = await trx
      .selectFrom('audit_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('organization_id', '=', organizationId)
      .where('xid', '<', sealXid)
      .executeTakeFirstOrThrow()
    if (Number(doomed.n) === 0) return { kind: 'nothing', retentionDays }
    const coverage = await trx
      .selectFrom('audit_events')
      .select(['data'])
      .where('organization_id', '=', organizationId)
      .where('type', '=', 'audit.exported')
      .where(sql<boolean>`(data->>'complete')::boolean`)
      .orderBy('event_id', 'desc')
      .limit(1)
      .executeTakeFirst()
    const covered = coverage ? (typeof coverage.data === 'string' ? JSON.parse(coverage.data) : coverage.data) as { through_event_id: number; below_xid: number } : null
    let uncoveredQuery = trx.selectFrom('audit_events').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', organizationId).where('xid', '<', sealXid)
    if (covered) uncoveredQuery = uncoveredQuery.where((eb) => eb.or([eb('event_id', '>', covered.through_event_id), eb('xid', '>=', covered.below_xid)]))
    const uncovered = Number((await uncoveredQuery.executeTakeFirstOrThrow()).n)
    if (uncovered > 0) return { kind: 'not-exported', uncovered, retentionDays }
    const deleted = await trx.deleteFrom('audit_events').where('organization_id', '=', organizationId).where('xid', '<', sealXid).executeTakeFirst()
    const count = Number(deleted.numDeletedRows)
    const throughSealId = Number(seal.seal_id)
    await recordEvent(trx, eventBy({ actor: OPERATOR, requestId: null }, organizationId, 'audit.pruned', { type: 'audit', id: null }, { through_seal_id: throughSealId, deleted: count, retention_days: retentionDays }, now))
    return { kind: 'pruned', deleted: count, throughSealId, retentionDays }
  })
}
