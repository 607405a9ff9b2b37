// A person's data in lead capture (docs/leads.md, "Export and erasure"): export everything held
// about one email, or erase it. Both leave an audit event that names the person only by a keyed
// hash of the normalized email (HMAC-SHA256 under a key derived from the secrets key): someone who
// knows the address can ask whether it was erased (`erasures`), a dump of the log reveals nothing.
// The audit log never held lead data (lead.created names the list, the lead id and the email's
// domain), and its seals cover audit rows, not leads: erasing leads leaves every seal verifying.
import { createHmac } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { normalizeEmail } from '../domain/email.ts'
import { eventBy, recordEvent, type AuditBy } from '../storage/audit.ts'
import { erasePerson, findErasures, personRecords } from '../storage/lead-people.ts'
import type { Secrets } from './secrets.ts'

const HMAC_LABEL = 'steward lead erasure email hmac v1'

export interface PersonExport {
  email: string
  exported_at: string
  /** Rows by table; timestamps as ISO strings. */
  records: Record<string, Record<string, unknown>[]>
}

/** The keyed hash of a normalized email, or null without a secrets key (PostgreSQL without SECRETS_KEY). */
export function emailHmac(secrets: Secrets, email: string): string | null {
  const box = secrets.box()
  return box ? createHmac('sha256', box.derive(HMAC_LABEL)).update(normalizeEmail(email)).digest('hex') : null
}

function plain(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString()
  if (typeof value === 'bigint') return Number(value)
  return value
}

/** The person's records, and a lead.exported event (no data of theirs, only the keyed hash and counts). */
export async function exportPerson(db: Kysely<Database>, secrets: Secrets, email: string, by: AuditBy, organizationId: string, now: Date): Promise<PersonExport> {
  const normalized = normalizeEmail(email)
  const found = await personRecords(db, normalized)
  const records: PersonExport['records'] = {}
  const counts: Record<string, number> = {}
  for (const [table, rows] of Object.entries(found)) {
    records[table] = rows.map((row) => Object.fromEntries(Object.entries(row).map(([key, value]) => [key, plain(value)])))
    counts[table] = rows.length
  }
  await recordEvent(db, eventBy(by, organizationId, 'lead.exported', { type: 'person', id: null }, { email_hmac: emailHmac(secrets, normalized), records: counts }, now))
  return { email: normalized, exported_at: now.toISOString(), records }
}

/** Deletes everything about the person, with a lead.erased event in the same transaction. */
export async function erasePersonData(db: Kysely<Database>, secrets: Secrets, email: string, by: AuditBy, organizationId: string, now: Date): Promise<Record<string, number>> {
  const normalized = normalizeEmail(email)
  const hmac = emailHmac(secrets, normalized)
  return erasePerson(db, normalized, (trx, deleted) => recordEvent(trx, eventBy(by, organizationId, 'lead.erased', { type: 'person', id: null }, { email_hmac: hmac, deleted }, now)))
}

/** When the person's data was erased (empty: never, or no secrets key to tell). */
export async function erasuresOf(db: Kysely<Database>, secrets: Secrets, email: string, organizationId: string): Promise<{ event_id: number; occurred_at: Date }[]> {
  const hmac = emailHmac(secrets, email)
  return hmac === null ? [] : findErasures(db, organizationId, hmac)
}
