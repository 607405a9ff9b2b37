// Lead spam: the per-list spam settings, the submissions kept apart as spam, and the CAPTCHA
// tokens already used. Knows nothing of HTTP.
import { sql, type Kysely, type Selectable } from 'kysely'
import { normalizeEmail } from '../domain/email.ts'
import type { Database } from '../database/schema.ts'
import type { LeadSpamSettingsTable, LeadSpamTable, SpamListName, SpamReason } from '../database/lead-spam-schema.ts'
import type { LeadAudit } from './leads.ts'

export type SpamSettingsRow = Selectable<LeadSpamSettingsTable>
export type SpamRow = Selectable<LeadSpamTable>

export const SPAM_LISTS: readonly SpamListName[] = ['demo-requests', 'newsletter']

/** The stored settings of a list; every setting off when none were ever written. */
export async function readSpamSettings(db: Kysely<Database>, list: SpamListName): Promise<SpamSettingsRow> {
  const row = await db.selectFrom('lead_spam_settings').selectAll().where('list', '=', list).executeTakeFirst()
  return (
    row ?? {
      list,
      honeypot_field: null,
      captcha_provider: null,
      captcha_secret_sealed: null,
      captcha_verify_url: null,
      captcha_fail_mode: 'closed',
      retention_days: null,
      updated_at: null,
      updated_by: null,
    }
  )
}

/** Writes a list's whole settings row (the service merged the change into the current one). */
export async function writeSpamSettings(db: Kysely<Database>, row: SpamSettingsRow): Promise<void> {
  const { list: _list, ...rest } = row
  await db
    .insertInto('lead_spam_settings')
    .values(row)
    .onConflict((oc) => oc.column('list').doUpdateSet(rest))
    .execute()
}

export interface NewSpam {
  list: SpamListName
  email: string
  fields: Record<string, unknown>
  reason: SpamReason
  via: string
}

export async function insertSpam(db: Kysely<Database>, spam: NewSpam, receivedAt: Date): Promise<number> {
  const row = await db
    .insertInto('lead_spam')
    .values({
      list: spam.list,
      email: spam.email,
      email_normalized: normalizeEmail(spam.email),
      fields: JSON.stringify(spam.fields),
      reason: spam.reason,
      via: spam.via,
      received_at: receivedAt,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

/** Whether the email is already a lead of the list (what a real submission would answer 409 for). */
export async function isRegistered(db: Kysely<Database>, list: SpamListName, email: string): Promise<boolean> {
  const table = list === 'demo-requests' ? 'demo_requests' : 'newsletter_subscriptions'
  const row = await db.selectFrom(table).select('id').where('email_normalized', '=', normalizeEmail(email)).executeTakeFirst()
  return row !== undefined
}

/** One page of spam, newest first (keyset on id), optionally of one list. */
export async function listSpamPage(db: Kysely<Database>, options: { list: SpamListName | null; before: number | null; limit: number }): Promise<{ rows: SpamRow[]; nextBefore: number | null }> {
  const rows = await db
    .selectFrom('lead_spam')
    .selectAll()
    .$if(options.list !== null, (qb) => qb.where('list', '=', options.list!))
    .$if(options.before !== null, (qb) => qb.where('id', '<', options.before!))
    .orderBy('id', 'desc')
    .limit(options.limit + 1)
    .execute()
  const page = rows.slice(0, options.limit).map((row) => ({ ...row, id: Number(row.id) }))
  return { rows: page, nextBefore: rows.length > options.limit ? page[page.length - 1]!.id : null }
}

export type RestoreOutcome = { kind: 'restored'; list: SpamListName; leadId: number } | { kind: 'duplicate' } | { kind: 'missing' }

/**
 * Makes a spam row a lead: inserted into its list unless the email is already there (then the
 * spam row stays and the outcome is a duplicate), with the `lead.created` event a submission
 * records (when leads are audited: `audit` not null), and the spam row deleted, in one transaction.
 */
export async function restoreSpam(db: Kysely<Database>, id: number, at: Date, audit: LeadAudit | null): Promise<RestoreOutcome> {
  return db.transaction().execute(async (trx) => {
    const spam = await trx.selectFrom('lead_spam').selectAll().where('id', '=', id).forUpdate().executeTakeFirst()
    if (!spam) return { kind: 'missing' }
    const f = spam.fields as Record<string, string | null | undefined>
    const text = (name: string): string | null => (typeof f[name] === 'string' && f[name] !== '' ? f[name]! : null)
    const normalized = normalizeEmail(spam.email)
    const inserted =
      spam.list === 'demo-requests'
        ? await sql<{ id: number }>`insert into "demo_requests" ("email", "first_name", "last_name", "company", "linkedin", "phone", "source", "analytics_distinct_id", "email_normalized", "received_at")
            values (${spam.email}, ${text('first_name') ?? ''}, ${text('last_name') ?? ''}, ${text('company') ?? ''}, ${text('linkedin') ?? ''}, ${text('phone')}, ${text('source')}, ${text('analytics_distinct_id')}, ${normalized}, ${spam.received_at})
            on conflict ("email_normalized") do nothing returning "id"`.execute(trx)
        : await sql<{ id: number }>`insert into "newsletter_subscriptions" ("email", "source", "analytics_distinct_id", "via", "email_normalized", "received_at")
            values (${spam.email}, ${text('source')}, ${text('analytics_distinct_id')}, ${spam.via}, ${normalized}, ${spam.received_at})
            on conflict ("email_normalized") do nothing returning "id"`.execute(trx)
    const lead = inserted.rows[0]
    if (!lead) return { kind: 'duplicate' }
    const leadId = Number(lead.id)
    const list = spam.list === 'demo-requests' ? 'demo' : 'newsletter'
    // The same event a stored submission records: the list, the lead, the form, only the email's domain.
    if (audit) await trx
      .insertInto('audit_events')
      .values({
        organization_id: audit.organizationId,
        occurred_at: at,
        actor_type: 'system',
        actor_id: null,
        type: 'lead.created',
        target_type: 'lead',
        target_id: `${list}:${leadId}`,
        data: JSON.stringify({ lead_id: leadId, list, form: spam.via, email_domain: normalized.split('@').pop() ?? '', restored_from_spam: true }),
        request_id: audit.requestId,
      })
      .execute()
    await trx.deleteFrom('lead_spam').where('id', '=', id).execute()
    return { kind: 'restored', list: spam.list, leadId }
  })
}

/**
 * Claims a CAPTCHA token (by its SHA-256) until `expiresAt`: false when it was already claimed and
 * has not expired, so a token is accepted once, even by two racing submissions.
 */
export async function claimCaptchaToken(db: Kysely<Database>, tokenSha256: string, now: Date, expiresAt: Date): Promise<boolean> {
  const { rows } = await sql<{ token_sha256: string }>`insert into "lead_spam_captcha_tokens" ("token_sha256", "expires_at") values (${tokenSha256}, ${expiresAt})
    on conflict ("token_sha256") do update set "expires_at" = excluded."expires_at" where "lead_spam_captcha_tokens"."expires_at" <= ${now}
    returning "token_sha256"`.execute(db)
  return rows.length > 0
}

/** Gives a claimed token back (the provider could not be asked: the person may retry with it). */
export async function releaseCaptchaToken(db: Kysely<Database>, tokenSha256: string): Promise<void> {
  await db.deleteFrom('lead_spam_captcha_tokens').where('token_sha256', '=', tokenSha256).execute()
}

/**
 * Deletes spam older than its list's retention (the list's retention_days, else `defaultDays`)
 * and the used CAPTCHA tokens past their lifetime. Returns how many spam rows went.
 */
export async function purgeSpam(db: Kysely<Database>, now: Date, defaultDays: number): Promise<{ spam: number; tokens: number }> {
  const spam = await sql`delete from "lead_spam" s
    where s."received_at" < ${now}::timestamptz - make_interval(days => coalesce((select r."retention_days" from "lead_spam_settings" r where r."list" = s."list"), ${defaultDays}::int))`.execute(db)
  const tokens = await db.deleteFrom('lead_spam_captcha_tokens').where('expires_at', '<=', now).executeTakeFirst()
  return { spam: Number(spam.numAffectedRows ?? 0), tokens: Number(tokens.numDeletedRows) }
}
