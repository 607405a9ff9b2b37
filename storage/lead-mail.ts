// Lead mail: per-list settings, the mail outbox and its attempts. Knows nothing of HTTP or SMTP.
import { sql, type Kysely, type Selectable } from 'kysely'
import type { Database } from '../database/schema.ts'
import type { LeadListName, LeadListSettingsTable, LeadMailKind, LeadMailOutboxTable } from '../database/lead-mail-schema.ts'
import { DEFAULT_CONFIRM_TTL_SECONDS } from '../domain/lead-mail.ts'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import type { Alongside } from './leads.ts'

export interface ListSettings {
  list: LeadListName
  notify: string[]
  double_opt_in: boolean
  consent_text: string | null
  consent_version: string | null
  confirm_ttl_seconds: number
  updated_at: Date | null
  updated_by: string | null
}

function settingsOf(list: LeadListName, row: Selectable<LeadListSettingsTable> | undefined): ListSettings {
  if (!row) return { list, notify: [], double_opt_in: false, consent_text: null, consent_version: null, confirm_ttl_seconds: DEFAULT_CONFIRM_TTL_SECONDS, updated_at: null, updated_by: null }
  return {
    list,
    notify: Array.isArray(row.notify) ? (row.notify as string[]) : [],
    double_opt_in: row.double_opt_in,
    consent_text: row.consent_text,
    consent_version: row.consent_version,
    confirm_ttl_seconds: row.confirm_ttl_seconds,
    updated_at: row.updated_at,
    updated_by: row.updated_by,
  }
}

/** A list's settings; the defaults (nothing on) while none were saved. */
export async function readListSettings(db: Kysely<Database>, list: LeadListName): Promise<ListSettings> {
  const row = await db.selectFrom('lead_list_settings').selectAll().where('list', '=', list).executeTakeFirst()
  return settingsOf(list, row)
}

export type ListSettingsChange = Partial<Pick<ListSettings, 'notify' | 'double_opt_in' | 'consent_text' | 'consent_version' | 'confirm_ttl_seconds'>>

/**
 * Applies `change` over the current settings (one upsert: concurrent changes never lose a field)
 * with its `settings.changed` event (the fields changed, never their values: addresses), atomically.
 */
export async function saveListSettings(db: Kysely<Database>, list: LeadListName, change: ListSettingsChange, at: Date, by: AuditBy & { organizationId: string; creator: string }): Promise<ListSettings> {
  return db.transaction().execute(async (trx) => {
    const saved = await upsertListSettings(trx, list, change, at, by.creator)
    await recordEvent(trx, eventBy(by, by.organizationId, 'settings.changed', { type: 'lead_list', id: list }, { changed: Object.keys(change).sort(), setting: 'mail' }, at))
    return saved
  })
}

async function upsertListSettings(db: Kysely<Database>, list: LeadListName, change: ListSettingsChange, at: Date, by: string): Promise<ListSettings> {
  const current = settingsOf(list, undefined)
  const values = {
    list,
    notify: JSON.stringify(change.notify ?? current.notify),
    double_opt_in: change.double_opt_in ?? current.double_opt_in,
    consent_text: change.consent_text !== undefined ? change.consent_text : current.consent_text,
    consent_version: change.consent_version !== undefined ? change.consent_version : current.consent_version,
    confirm_ttl_seconds: change.confirm_ttl_seconds ?? current.confirm_ttl_seconds,
    updated_at: at,
    updated_by: by,
  }
  const updates: Record<string, unknown> = { updated_at: at, updated_by: by }
  if (change.notify !== undefined) updates.notify = values.notify
  if (change.double_opt_in !== undefined) updates.double_opt_in = values.double_opt_in
  if (change.consent_text !== undefined) updates.consent_text = values.consent_text
  if (change.consent_version !== undefined) updates.consent_version = values.consent_version
  if (change.confirm_ttl_seconds !== undefined) updates.confirm_ttl_seconds = values.confirm_ttl_seconds
  const row = await db
    .insertInto('lead_list_settings')
    .values(values)
    .onConflict((oc) => oc.column('list').doUpdateSet(updates))
    .returningAll()
    .executeTakeFirstOrThrow()
  return settingsOf(list, row)
}

export interface NewMail {
  kind: LeadMailKind
  list: LeadListName
  email_normalized: string
  lead_id: number | null
  subscription_id: number | null
  recipients: string[]
  reply_to: string | null
  subject: string
  body: string
  headers: Record<string, string>
}

/** Queues a mail, due at once. */
export async function queueMail(db: Kysely<Database>, mail: NewMail, at: Date): Promise<number> {
  const row = await db
    .insertInto('lead_mail_outbox')
    .values({ ...mail, recipients: JSON.stringify(mail.recipients), headers: JSON.stringify(mail.headers), created_at: at, next_attempt_at: at })
    .returning('id')
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

/**
 * The mail of a lead being stored, as a write that goes alongside its insert (storage/leads.ts
 * Alongside): the lead's id comes from the statement's `lead` row, so a duplicate queues nothing.
 */
export function mailAlongside(mail: Omit<NewMail, 'lead_id' | 'subscription_id'>, at: Date): Alongside {
  return sql`insert into "lead_mail_outbox" ("kind", "list", "email_normalized", "lead_id", "recipients", "reply_to", "subject", "body", "headers", "created_at", "next_attempt_at")
    select ${mail.kind}, ${mail.list}, ${mail.email_normalized}, lead.id, ${JSON.stringify(mail.recipients)}::jsonb, ${mail.reply_to}, ${mail.subject}, ${mail.body}, ${JSON.stringify(mail.headers)}::jsonb, ${at}, ${at}
    from lead`
}

export type OutboxRow = Selectable<LeadMailOutboxTable>

/**
 * Claims up to `limit` due mails for `leaseMs` (FOR UPDATE SKIP LOCKED: processes sharing one
 * database never claim the same row at once; a crashed sender's lease runs out and the row is due again).
 */
export async function claimDueMail(db: Kysely<Database>, now: Date, limit: number, leaseMs: number): Promise<OutboxRow[]> {
  const until = new Date(now.getTime() + leaseMs)
  const { rows } = await sql<OutboxRow>`update lead_mail_outbox set locked_until = ${until}
    where id in (
      select id from lead_mail_outbox
      where status = 'pending' and next_attempt_at <= ${now} and (locked_until is null or locked_until <= ${now})
      order by next_attempt_at, id limit ${limit} for update skip locked
    ) returning *`.execute(db)
  return rows.sort((a, b) => Number(a.id) - Number(b.id))
}

export interface AttemptOutcome {
  ok: boolean
  detail: string
  /** For a failure: when to try again, or null to give up. */
  retryAt: Date | null
}

/** Logs attempt number `attempt` and moves the mail on: sent, due again later, or failed. */
export async function recordAttempt(db: Kysely<Database>, id: number, attempt: number, at: Date, outcome: AttemptOutcome): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.insertInto('lead_mail_attempts').values({ outbox_id: id, attempt, attempted_at: at, ok: outcome.ok, detail: outcome.detail }).execute()
    await trx
      .updateTable('lead_mail_outbox')
      .set(
        outcome.ok
          ? { status: 'sent', attempts: attempt, sent_at: at, locked_until: null, last_error: null }
          : outcome.retryAt
            ? { attempts: attempt, next_attempt_at: outcome.retryAt, locked_until: null, last_error: outcome.detail }
            : { status: 'failed', attempts: attempt, locked_until: null, last_error: outcome.detail },
      )
      .where('id', '=', id)
      .where('status', '=', 'pending')
      .execute()
  })
}

/** Cancels the pending mails about a subscription (it was unsubscribed or expired). */
export async function cancelSubscriptionMail(db: Kysely<Database>, subscriptionId: number): Promise<void> {
  await db.updateTable('lead_mail_outbox').set({ status: 'cancelled', locked_until: null }).where('subscription_id', '=', subscriptionId).where('status', '=', 'pending').execute()
}

export interface OutboxEntry {
  id: number
  kind: LeadMailKind
  list: LeadListName
  recipients: string[]
  subject: string
  status: string
  attempts: number
  created_at: Date
  next_attempt_at: Date | null
  sent_at: Date | null
  last_error: string | null
  log: { attempt: number; at: Date; ok: boolean; detail: string }[]
}

/** A page of the outbox, newest first, each mail with its attempts; optionally one status only. */
export async function listOutbox(db: Kysely<Database>, options: { status: string | null; before: number | null; limit: number }): Promise<{ mails: OutboxEntry[]; nextBefore: number | null }> {
  const rows = await db
    .selectFrom('lead_mail_outbox')
    .select(['id', 'kind', 'list', 'recipients', 'subject', 'status', 'attempts', 'created_at', 'next_attempt_at', 'sent_at', 'last_error'])
    .$if(options.status !== null, (qb) => qb.where('status', '=', options.status as OutboxRow['status']))
    .$if(options.before !== null, (qb) => qb.where('id', '<', options.before!))
    .orderBy('id', 'desc')
    .limit(options.limit + 1)
    .execute()
  const page = rows.slice(0, options.limit)
  const ids = page.map((row) => Number(row.id))
  const attempts = ids.length === 0 ? [] : await db.selectFrom('lead_mail_attempts').selectAll().where('outbox_id', 'in', ids).orderBy('id').execute()
  const mails = page.map((row) => ({
    id: Number(row.id),
    kind: row.kind,
    list: row.list,
    recipients: row.recipients as string[],
    subject: row.subject,
    status: row.status,
    attempts: row.attempts,
    created_at: row.created_at,
    next_attempt_at: row.status === 'pending' ? row.next_attempt_at : null,
    sent_at: row.sent_at,
    last_error: row.last_error,
    log: attempts.filter((a) => Number(a.outbox_id) === Number(row.id)).map((a) => ({ attempt: a.attempt, at: a.attempted_at, ok: a.ok, detail: a.detail })),
  }))
  return { mails, nextBefore: rows.length > options.limit ? ids[ids.length - 1]! : null }
}

/** Deletes the mails done with (sent, failed, cancelled) before `before`, their attempts with them. */
export async function pruneMail(db: Kysely<Database>, before: Date): Promise<number> {
  const result = await db.deleteFrom('lead_mail_outbox').where('status', 'in', ['sent', 'failed', 'cancelled']).where('created_at', '<', before).executeTakeFirst()
  return Number(result.numDeletedRows)
}
