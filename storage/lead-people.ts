// Everything lead capture holds about one person, found by email: every row of the lead lists and
// of the lead_* tables (lead mail, subscriptions, spam) whose `email_normalized` is the person's,
// and the rows that hang off those by a foreign key (a mail's attempt log). Found through the
// catalog rather than a fixed list, so a lead table added later is exported and erased too.
import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'

/** Deleted first, in this order (children before parents); any other person table after them. */
const KNOWN_ORDER = ['lead_mail_outbox', 'lead_subscriptions', 'lead_spam', 'demo_requests', 'newsletter_subscriptions']

interface Dependent {
  table: string
  column: string
  parent: string
  parentColumn: string
}

interface PersonTables {
  /** Tables with an email_normalized column, in deletion order. */
  tables: string[]
  /** Other tables whose single-column foreign key points into one of them. */
  dependents: Dependent[]
}

async function personTables(db: Kysely<Database> | Transaction<Database>): Promise<PersonTables> {
  const { rows } = await sql<{ table_name: string }>`select table_name from information_schema.columns
    where table_schema = current_schema() and column_name = 'email_normalized'
      and (table_name in ('demo_requests', 'newsletter_subscriptions') or table_name like 'lead\\_%')
    order by table_name`.execute(db)
  const found = rows.map((row) => row.table_name)
  const tables = [...KNOWN_ORDER.filter((name) => found.includes(name)), ...found.filter((name) => !KNOWN_ORDER.includes(name))]
  const fks = await sql<Dependent>`select child.relname as "table", a.attname as "column", parent.relname as "parent", pa.attname as "parentColumn"
    from pg_constraint c
    join pg_class child on child.oid = c.conrelid
    join pg_class parent on parent.oid = c.confrelid
    join pg_namespace n on n.oid = child.relnamespace
    join pg_attribute a on a.attrelid = c.conrelid and a.attnum = c.conkey[1]
    join pg_attribute pa on pa.attrelid = c.confrelid and pa.attnum = c.confkey[1]
    where c.contype = 'f' and cardinality(c.conkey) = 1 and n.nspname = current_schema()
    order by child.relname`.execute(db)
  const dependents = fks.rows.filter((fk) => tables.includes(fk.parent) && !tables.includes(fk.table))
  return { tables, dependents }
}

const ofPerson = (dependent: Dependent, email: string) =>
  sql`${sql.ref(dependent.column)} in (select ${sql.ref(dependent.parentColumn)} from ${sql.table(dependent.parent)} where "email_normalized" = ${email})`

/** Every row about `emailNormalized`, by table (tables without one are left out). */
export async function personRecords(db: Kysely<Database>, emailNormalized: string): Promise<Record<string, Record<string, unknown>[]>> {
  return db.transaction().execute(async (trx) => {
    const { tables, dependents } = await personTables(trx)
    const records: Record<string, Record<string, unknown>[]> = {}
    for (const table of tables) {
      const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(table)} where "email_normalized" = ${emailNormalized} order by 1`.execute(trx)
      if (rows.length > 0) records[table] = rows
    }
    for (const dependent of dependents) {
      const { rows } = await sql<Record<string, unknown>>`select * from ${sql.table(dependent.table)} where ${ofPerson(dependent, emailNormalized)} order by 1`.execute(trx)
      if (rows.length > 0) records[dependent.table] = [...(records[dependent.table] ?? []), ...rows]
    }
    return records
  })
}

/**
 * Deletes every row about `emailNormalized` and runs `after(trx, counts)` (the audit event) in the
 * same transaction. Returns the rows deleted per table.
 */
export async function erasePerson(
  db: Kysely<Database>,
  emailNormalized: string,
  after: (trx: Transaction<Database>, deleted: Record<string, number>) => Promise<void>,
): Promise<Record<string, number>> {
  return db.transaction().execute(async (trx) => {
    const { tables, dependents } = await personTables(trx)
    const deleted: Record<string, number> = {}
    const count = (table: string, n: bigint | number | undefined) => {
      if (Number(n ?? 0) > 0) deleted[table] = (deleted[table] ?? 0) + Number(n)
    }
    for (const dependent of dependents) {
      const result = await sql`delete from ${sql.table(dependent.table)} where ${ofPerson(dependent, emailNormalized)}`.execute(trx)
      count(dependent.table, result.numAffectedRows)
    }
    for (const table of tables) {
      const result = await sql`delete from ${sql.table(table)} where "email_normalized" = ${emailNormalized}`.execute(trx)
      count(table, result.numAffectedRows)
    }
    await after(trx, deleted)
    return deleted
  })
}

/** The erasures recorded for a person, by the keyed hash of their email. */
export async function findErasures(db: Kysely<Database>, organizationId: string, emailHmac: string): Promise<{ event_id: number; occurred_at: Date }[]> {
  const { rows } = await sql<{ event_id: number; occurred_at: Date }>`select event_id, occurred_at from audit_events
    where organization_id = ${organizationId} and type = 'lead.erased' and data->>'email_hmac' = ${emailHmac} order by event_id`.execute(db)
  return rows.map((row) => ({ event_id: Number(row.event_id), occurred_at: row.occurred_at }))
}
