// Lead mail, the use cases: store a lead together with the mail it causes (one statement, or one
// transaction under double opt-in: a stored lead never lacks its mail, a refused one never has
// any; a settings read is cached for a second), confirm and unsubscribe through
// signed links, and the per-list settings. Sending is the outbox job's (jobs/lead-mail.ts): a
// form's answer never waits for SMTP. Without SMTP settings nothing is queued and the forms take
// exactly the path they took before.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { Database } from '../database/schema.ts'
import type { LeadListName } from '../domain/lead-mail.ts'
import { CONFIRMATION_RESEND_MS } from '../domain/lead-mail.ts'
import { normalizeEmail } from '../domain/email.ts'
import type { Logger } from '../log.ts'
import { insertDemoRequestUnlessRegistered, insertSubscriptionUnlessRegistered, type LeadAudit, type NewDemoRequest, type NewSubscription } from '../storage/leads.ts'
import type { AuditBy } from '../storage/audit.ts'
import { mailAlongside, queueMail, readListSettings, saveListSettings, type ListSettings, type ListSettingsChange, type NewMail } from '../storage/lead-mail.ts'
import { claimResend, confirmSubscription, insertPendingSubscription, leadIdOf, unsubscribeLead, type SubscriptionRow } from '../storage/lead-subscriptions.ts'
import { createLeadLinks, type LeadLinks } from './lead-links.ts'
import { confirmationMail, demoNotification, subscriptionNotification, unsubscribeHeaders } from './lead-mail-render.ts'
import { createMailer, type Mailer } from './smtp.ts'
import type { Secrets } from './secrets.ts'
import { HttpError } from '../http/errors.ts'

export type ConfirmResult = 'confirmed' | 'already' | 'expired' | 'gone' | 'invalid'
export type UnsubscribeResult = 'unsubscribed' | 'already' | 'invalid'

export interface LeadMail {
  /** An SMTP server is configured: mail is queued and sent. */
  readonly configured: boolean
  /** The transport (null without SMTP); the outbox job sends through it. */
  readonly mailer: Mailer | null
  readonly links: LeadLinks
  storeDemoRequest(lead: NewDemoRequest, at: Date, audit: LeadAudit | null): Promise<boolean>
  storeSubscription(lead: NewSubscription, at: Date, audit: LeadAudit | null, ip: string | null): Promise<boolean>
  confirm(token: string, at: Date, ip: string | null): Promise<ConfirmResult>
  /** Whether `token` is a genuine unsubscribe link (the GET page shows its button only then). */
  /** Whether a confirmation link is genuine and unexpired, without confirming (the page before the button). */
  checkConfirm(token: string, at: Date): 'ok' | 'invalid' | 'expired'
  checkUnsubscribe(token: string): boolean
  unsubscribe(token: string, at: Date): Promise<UnsubscribeResult>
  /** The one-click unsubscribe URL of newsletter lead `leadId`; null without a secrets key. */
  unsubscribeUrl(leadId: number): string | null
  settings(list: LeadListName): Promise<ListSettings>
  /** Changes a list's settings, recording a `settings.changed` event in `by`'s organization. */
  changeSettings(list: LeadListName, change: ListSettingsChange, at: Date, by: AuditBy & { organizationId: string; creator: string }): Promise<ListSettings>
  /** Calls `listener` whenever mail is queued (the outbox job wakes at once instead of at its next poll). */
  onQueued(listener: () => void): void
  close(): void
}

/** How long a process keeps a list's settings for its forms. */
const SETTINGS_CACHE_MS = 1000

export const OPT_IN_NEEDS_SMTP = 'Double opt-in needs SMTP settings (SMTP_URL or SMTP_HOST and SMTP_FROM): the confirmation mail could not be sent'
export const OPT_IN_NEEDS_KEY = 'Double opt-in needs a secrets key (SECRETS_KEY) to sign its links'
export const OPT_IN_NEWSLETTER_ONLY = 'Double opt-in applies to the newsletter list only'

/**
 * The one-click unsubscribe URL of a newsletter lead (by its id; it never expires, and stops
 * working when the lead leaves the list); null without a secrets key. The export uses it too.
 */
export function unsubscribeUrls(config: Pick<Config, 'productApiUrl'>, links: LeadLinks): (leadId: number) => string | null {
  return (leadId) => {
    const token = links.sign('unsubscribe', leadId, 0)
    return token === null ? null : `${config.productApiUrl}/leads/unsubscribe?token=${encodeURIComponent(token)}`
  }
}

export function createLeadMail(options: { db: Kysely<Database>; config: Config; logger: Logger; secrets: Secrets }): LeadMail {
  const { db, config } = options
  const mailer = config.smtp ? createMailer(config.smtp) : null
  const links = createLeadLinks(options.secrets)
  const listeners: (() => void)[] = []
  const linkUrl = (path: string, token: string) => `${config.productApiUrl}${path}?token=${encodeURIComponent(token)}`
  const unsubscribeUrl = unsubscribeUrls(config, links)
  const queued = () => {
    for (const listener of listeners) listener()
  }
  // A form reads its list's settings on every submission: kept for a second (a change made
  // through this process applies at once; one made through another process within a second).
  const cached = new Map<LeadListName, { until: number; value: Promise<ListSettings> }>()
  const currentSettings = (list: LeadListName): Promise<ListSettings> => {
    const now = performance.now()
    const hit = cached.get(list)
    if (hit && hit.until > now) return hit.value
    const value = readListSettings(db, list)
    cached.set(list, { until: now + SETTINGS_CACHE_MS, value })
    value.catch(() => cached.delete(list))
    return value
  }

  /** The confirmation mail of subscription `sub` of lead `leadId`. */
  function confirmation(email: string, leadId: number, subscriptionId: number, settings: ListSettings, at: Date): NewMail {
    const expiry = Math.floor(at.getTime() / 1000) + settings.confirm_ttl_seconds
    const confirmUrl = linkUrl('/leads/confirm', links.sign('confirm', subscriptionId, expiry)!)
    const stop = unsubscribeUrl(leadId)!
    const { subject, body } = confirmationMail(email, confirmUrl, stop, settings.consent_text, settings.confirm_ttl_seconds)
    return { kind: 'confirmation', list: 'newsletter', email_normalized: normalizeEmail(email), lead_id: leadId, subscription_id: subscriptionId, recipients: [email], reply_to: null, subject, body, headers: unsubscribeHeaders(stop) }
  }

  return {
    configured: mailer !== null,
    mailer,
    links,

    async storeDemoRequest(lead, at, audit) {
      const settings = mailer ? await currentSettings('demo-requests') : null
      if (!settings || settings.notify.length === 0) return insertDemoRequestUnlessRegistered(db, lead, at, audit)
      // The lead and its notification in one statement: one round trip, atomic.
      const { subject, body } = demoNotification(lead, at)
      const mail = mailAlongside({ kind: 'notification', list: 'demo-requests', email_normalized: normalizeEmail(lead.email), recipients: settings.notify, reply_to: lead.email, subject, body, headers: {} }, at)
      const stored = await insertDemoRequestUnlessRegistered(db, lead, at, audit, mail)
      if (stored) queued()
      return stored
    },

    async storeSubscription(lead, at, audit, ip) {
      const settings = mailer ? await currentSettings('newsletter') : null
      const optIn = settings !== null && settings.double_opt_in && links.available
      if (!settings || (!optIn && settings.notify.length === 0)) return insertSubscriptionUnlessRegistered(db, lead, at, audit)
      const notification = () => {
        const { subject, body } = subscriptionNotification(lead, at, optIn ? 'pending' : 'active')
        return { kind: 'notification' as const, list: 'newsletter' as const, email_normalized: normalizeEmail(lead.email), recipients: settings.notify, reply_to: lead.email, subject, body, headers: {} }
      }
      if (!optIn) {
        const stored = await insertSubscriptionUnlessRegistered(db, lead, at, audit, mailAlongside(notification(), at))
        if (stored) queued()
        return stored
      }
      let mailed = false
      const stored = await db.transaction().execute(async (trx) => {
        const expiresAt = new Date(at.getTime() + settings.confirm_ttl_seconds * 1000)
        if (!(await insertSubscriptionUnlessRegistered(trx, lead, at, audit))) {
          // A repeat of a pending signup: still 409 (the contract), but the confirmation goes out
          // again, at most once an hour, with a fresh expiry.
          const pending: SubscriptionRow | null = await claimResend(trx, lead.email, at, CONFIRMATION_RESEND_MS, expiresAt)
          if (pending) {
            await queueMail(trx, confirmation(pending.email ?? lead.email, Number(pending.lead_id), Number(pending.id), settings, at), at)
            mailed = true
          }
          return false
        }
        // Double opt-in: the confirmation's link names the subscription, so this takes a transaction.
        const leadId = (await leadIdOf(trx, 'newsletter_subscriptions', lead.email))!
        const subscriptionId = await insertPendingSubscription(trx, { leadId, email: lead.email, consentVersion: settings.consent_version, at, ip, expiresAt })
        await queueMail(trx, confirmation(lead.email, leadId, subscriptionId, settings, at), at)
        if (settings.notify.length > 0) await queueMail(trx, { ...notification(), lead_id: leadId, subscription_id: null }, at)
        mailed = true
        return true
      })
      if (mailed) queued()
      return stored
    },

    async confirm(token, at, ip) {
      const link = links.verify('confirm', token)
      if (!link) return 'invalid'
      if (link.expiresAt * 1000 <= at.getTime()) return 'expired'
      return confirmSubscription(db, link.id, at, ip)
    },

    checkConfirm(token, at) {
      const link = links.verify('confirm', token)
      if (!link) return 'invalid'
      return link.expiresAt * 1000 <= at.getTime() ? 'expired' : 'ok'
    },

    checkUnsubscribe(token) {
      return links.verify('unsubscribe', token) !== null
    },

    async unsubscribe(token, at) {
      const link = links.verify('unsubscribe', token)
      if (!link) return 'invalid'
      return (await unsubscribeLead(db, link.id, at)) === null ? 'already' : 'unsubscribed'
    },

    unsubscribeUrl,

    settings: (list) => readListSettings(db, list),

    async changeSettings(list, change, at, by) {
      if (change.double_opt_in === true) {
        if (list !== 'newsletter') throw new HttpError(400, OPT_IN_NEWSLETTER_ONLY)
        if (!mailer) throw new HttpError(409, OPT_IN_NEEDS_SMTP)
        if (!links.available) throw new HttpError(409, OPT_IN_NEEDS_KEY)
      }
      const saved = await saveListSettings(db, list, change, at, by)
      cached.delete(list)
      return saved
    },

    onQueued(listener) {
      listeners.push(listener)
    },

    close() {
      mailer?.close()
    },
  }
}
