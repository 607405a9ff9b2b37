// Newsletter consents: a pending subscription awaiting its confirmation, confirming it, expiring
// it, and unsubscribing. An unsubscribed or expired subscription's lead row is deleted, so the
// list holds only pending and active subscribers and a later signup of the address is new.
import type { Kysely, Selectable } from 'kysely'
import type { Database } from '../database/schema.ts'
import type { LeadSubscriptionTable } from '../database/lead-mail-schema.ts'
import { normalizeEmail } from '../domain/email.ts'

export type SubscriptionRow = Selectable<LeadSubscriptionTable>

/** The id of the lead row holding `email` on a list (inside the transaction that stored it). */
export async function leadIdOf(db: Kysely<Database>, table: 'demo_requests' | 'newsletter_subscriptions', email: string): Promise<number | null> {
  const row = await db.selectFrom(table).select('id').where('email_normalized', '=', normalizeEmail(email)).executeTakeFirst()
  return row ? Number(row.id) : null
}

export async function insertPendingSubscription(
  db: Kysely<Database>,
  values: { leadId: number; email: string; consentVersion: string | null; at: Date; ip: string | null; expiresAt: Date },
): Promise<number> {
  const row = await db
    .insertInto('lead_subscriptions')
    .values({
      lead_id: values.leadId,
      email: values.email,
      email_normalized: normalizeEmail(values.email),
      status: 'pending',
      consent_version: values.consentVersion,
      requested_at: values.at,
      requested_ip: values.ip,
      expires_at: values.expiresAt,
      confirmation_sent_at: values.at,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  return Number(row.id)
}

/**
 * Claims the right to re-send the confirmation of the pending subscription of `email`: at most
 * one claim per `intervalMs` (one conditional update, so concurrent repeats claim it once).
 * Returns the subscription, or null when there is none pending or it was sent too recently.
 */
export async function claimResend(db: Kysely<Database>, email: string, at: Date, intervalMs: number, expiresAt: Date): Promise<SubscriptionRow | null> {
  const before = new Date(at.getTime() - intervalMs)
  const row = await db
    .updateTable('lead_subscriptions')
    .set({ confirmation_sent_at: at, expires_at: expiresAt })
    .where('email_normalized', '=', normalizeEmail(email))
    .where('status', '=', 'pending')
    .where('lead_id', 'is not', null)
    .where('confirmation_sent_at', '<=', before)
    .returningAll()
    .executeTakeFirst()
  return row ?? null
}

export type ConfirmOutcome = 'confirmed' | 'already' | 'expired' | 'gone'

/**
 * Confirms a pending subscription once; confirming it again answers 'already' (the link is
 * idempotent, never a second consent). A subscription past its expiry, unsubscribed or
 * expired is not brought back.
 */
export async function confirmSubscription(db: Kysely<Database>, id: number, at: Date, ip: string | null): Promise<ConfirmOutcome> {
  const updated = await db
    .updateTable('lead_subscriptions')
    .set({ status: 'active', confirmed_at: at, confirmed_ip: ip, expires_at: null })
    .where('id', '=', id)
    .where('status', '=', 'pending')
    .where('expires_at', '>', at)
    .where('lead_id', 'is not', null)
    .returning('id')
    .executeTakeFirst()
  if (updated) return 'confirmed'
  const row = await db.selectFrom('lead_subscriptions').select(['status']).where('id', '=', id).executeTakeFirst()
  if (!row) return 'gone'
  if (row.status === 'active') return 'already'
  if (row.status === 'pending') return 'expired'
  return 'gone'
}

/**
 * Unsubscribes the newsletter lead `leadId`: its pending or active subscription is marked
 * unsubscribed (or, for a lead that never needed confirming, an unsubscribed record is made), and
 * the lead row is deleted. Returns the subscription row, or null when the lead no longer exists
 * (already unsubscribed, expired or erased: the link is idempotent).
 */
export async function unsubscribeLead(db: Kysely<Database>, leadId: number, at: Date): Promise<number | null> {
  return db.transaction().execute(async (trx) => {
    const lead = await trx.selectFrom('newsletter_subscriptions').select(['id', 'email']).where('id', '=', leadId).forUpdate().executeTakeFirst()
    if (!lead) return null
    const marked = await trx
      .updateTable('lead_subscriptions')
      .set({ status: 'unsubscribed', unsubscribed_at: at, expires_at: null })
      .where('lead_id', '=', leadId)
      .where('status', 'in', ['pending', 'active'])
      .returning('id')
      .execute()
    let id = marked[0] ? Number(marked[0].id) : null
    if (id === null) {
      const row = await trx
        .insertInto('lead_subscriptions')
        .values({ lead_id: leadId, email: lead.email, email_normalized: normalizeEmail(lead.email), status: 'unsubscribed', requested_at: at, unsubscribed_at: at })
        .returning('id')
        .executeTakeFirstOrThrow()
      id = Number(row.id)
    }
    await trx.updateTable('lead_mail_outbox').set({ status: 'cancelled', locked_until: null }).where('subscription_id', 'in', marked.map((m) => Number(m.id)).concat([id])).where('status', '=', 'pending').execute()
    await trx.deleteFrom('newsletter_subscriptions').where('id', '=', leadId).execute()
    return id
  })
}

/**
 * Expires the subscriptions still pending at `now`: their lead rows and unsent confirmations go,
 * and the address is forgotten (nothing was consented to). Returns how many expired.
 */
export async function expirePendingSubscriptions(db: Kysely<Database>, now: Date): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const expired = await trx
      .updateTable('lead_subscriptions')
      .set({ status: 'expired', email: null, email_normalized: null, requested_ip: null })
      .where('status', '=', 'pending')
      .where('expires_at', '<=', now)
      .returning(['id', 'lead_id'])
      .execute()
    if (expired.length === 0) return 0
    const ids = expired.map((row) => Number(row.id))
    const leads = expired.flatMap((row) => (row.lead_id === null ? [] : [Number(row.lead_id)]))
    await trx.deleteFrom('lead_mail_outbox').where('subscription_id', 'in', ids).execute()
    if (leads.length > 0) await trx.deleteFrom('newsletter_subscriptions').where('id', 'in', leads).execute()
    await trx.updateTable('lead_subscriptions').set({ lead_id: null }).where('id', 'in', ids).execute()
    return expired.length
  })
}

/** The status of each newsletter lead that has one: pending, or active once confirmed. */
export async function subscriptionStatuses(db: Kysely<Database>, leadIds: number[]): Promise<Map<number, string>> {
  if (leadIds.length === 0) return new Map()
  const rows = await db.selectFrom('lead_subscriptions').select(['lead_id', 'status']).where('lead_id', 'in', leadIds).where('status', 'in', ['pending', 'active']).execute()
  return new Map(rows.map((row) => [Number(row.lead_id), row.status]))
}

/** The newsletter leads waiting for their confirmation. */
export async function pendingLeadIds(db: Kysely<Database>): Promise<Set<number>> {
  const rows = await db.selectFrom('lead_subscriptions').select('lead_id').where('status', '=', 'pending').where('lead_id', 'is not', null).execute()
  return new Set(rows.map((row) => Number(row.lead_id)))
}
