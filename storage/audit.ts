// Writing audit events. Call `recordEvent` with the transaction that makes the change, so the
// event commits or rolls back with it. Reading, sealing and export live in their own modules.
import { CompiledQuery, type Insertable, type Kysely, type Transaction } from 'kysely'
import { OPERATOR, SYSTEM, withoutSecrets, type Actor, type AuditEventType } from '../domain/audit.ts'
import { preparedText } from '../database/prepared.ts'
import type { AuditEventTable, Database } from '../database/schema.ts'

export interface AuditEventInput {
  readonly organizationId: string
  readonly actor: Actor
  readonly type: AuditEventType
  readonly target: { readonly type: string; readonly id: string | null }
  /** JSON; secret-looking keys are dropped before writing. */
  readonly data?: Record<string, unknown>
  readonly requestId?: string | null
  readonly occurredAt: Date
}

/** The audit_events row of one event; secret-looking keys are dropped from its data. */
function eventRow(event: AuditEventInput) {
  return {
    organization_id: event.organizationId,
    occurred_at: event.occurredAt,
    actor_type: event.actor.type,
    actor_id: event.actor.id,
    type: event.type,
    target_type: event.target.type,
    target_id: event.target.id,
    data: JSON.stringify(withoutSecrets(event.data ?? {})),
    request_id: event.requestId ?? null,
  } satisfies Insertable<AuditEventTable>
}

/** Appends events inside `trx` (a transaction, or the database for a single-statement change). */
export async function recordEvents(trx: Transaction<Database> | Kysely<Database>, events: readonly AuditEventInput[]): Promise<void> {
  if (events.length === 0) return
  await trx
    .insertInto('audit_events')
    .values(
      events.map(eventRow),
    )
    .execute()
}

export function recordEvent(trx: Transaction<Database> | Kysely<Database>, event: AuditEventInput): Promise<void> {
  return recordEvents(trx, [event])
}

/** Who a change is recorded as made by, and the request that made it (null outside a request). */
export interface AuditBy {
  readonly actor: Actor
  readonly requestId: string | null
}

export const BY_OPERATOR: AuditBy = Object.freeze({ actor: OPERATOR, requestId: null })
export const BY_SYSTEM: AuditBy = Object.freeze({ actor: SYSTEM, requestId: null })

/** One event made by `by` in `organizationId`, at `occurredAt`. */
export function eventBy(
  by: AuditBy,
  organizationId: string,
  type: AuditEventType,
  target: { readonly type: string; readonly id: string | null },
  data: Record<string, unknown>,
  occurredAt: Date,
): AuditEventInput {
  return { organizationId, actor: by.actor, type, target, data, requestId: by.requestId, occurredAt }
}

/**
 * Runs `query` (an insert, update or delete of the change) and appends `events` in the same
 * statement: `with change as (query), event as (insert into audit_events …) select * from change`.
 * One round trip instead of two, atomic like any statement; returns the change's rows.
 *
 * The statement, with or without events, goes as a prepared statement on PostgreSQL (on PGlite
 * every query is prepared): the event's insert is then planned once per connection instead of
 * with every change. Its text depends only on the change's statement and the number of events, so
 * callers pass a change whose columns are fixed (a key insert, a policy version insert): the texts
 * stay a small, fixed set, as prepared statements must.
 *
 * An event whose time is the change's own time (a Date parameter of the change with the same
 * instant: its created_at, updated_at) takes that parameter instead of a copy, so PostgreSQL reads
 * the timestamp once: about 15 µs of each event on PGlite. Every Date in Steward's schema is a
 * timestamptz, so both uses of the parameter have one type.
 */
export async function executeWithEvents<R>(trx: Transaction<Database> | Kysely<Database>, query: CompiledQuery<R>, events: readonly AuditEventInput[]): Promise<R[]> {
  const run = async (text: string, parameters: readonly unknown[]) => (await trx.executeQuery(CompiledQuery.raw(preparedText(text), [...parameters]) as CompiledQuery<R>)).rows
  if (events.length === 0) return run(query.sql, query.parameters)
  const parameters = [...query.parameters]
  const placeholder = (value: unknown) => {
    parameters.push(value)
    return `$${parameters.length}`
  }
  const tuples = events.map((event) => {
    const row = eventRow(event)
    const at = query.parameters.findIndex((value) => value instanceof Date && value.getTime() === row.occurred_at.getTime())
    const occurredAt = at >= 0 ? `$${at + 1}` : placeholder(row.occurred_at)
    return `(${placeholder(row.organization_id)}, ${occurredAt}, ${placeholder(row.actor_type)}, ${placeholder(row.actor_id)}, ${placeholder(row.type)}, ${placeholder(row.target_type)}, ${placeholder(row.target_id)}, ${placeholder(row.data)}, ${placeholder(row.request_id)})`
  })
  // Kysely numbers parameters $1…$n and never writes a value into the text, so numbering the
  // event's parameters after the change's is exact.
  return run(`with "change" as (${query.sql}), "event" as (${EVENT_INSERT}${tuples.join(', ')}) select * from "change"`, parameters)
}

const EVENT_INSERT = 'insert into "audit_events" ("organization_id", "occurred_at", "actor_type", "actor_id", "type", "target_type", "target_id", "data", "request_id") values '
