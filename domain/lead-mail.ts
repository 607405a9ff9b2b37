// The lead-mail vocabulary, no I/O: the lists, the retry schedule of the outbox, and how often a
// pending subscriber may be sent another confirmation.

/** The lists, as the settings routes name them. */
export const LEAD_LIST_NAMES = ['demo-requests', 'newsletter'] as const
export type LeadListName = (typeof LEAD_LIST_NAMES)[number]

/** Attempts of one mail before it is given up (status "failed"). */
export const MAIL_MAX_ATTEMPTS = 10

const FIRST_RETRY_MS = 30_000
const LONGEST_RETRY_MS = 6 * 3_600_000

/**
 * Milliseconds until the retry after failed attempt number `attempts` (1-based): 30 s doubling
 * each time, at most 6 hours (about 14 hours over the 10 attempts); null: give up.
 */
export function mailRetryDelay(attempts: number): number | null {
  if (attempts >= MAIL_MAX_ATTEMPTS) return null
  return Math.min(FIRST_RETRY_MS * 2 ** (attempts - 1), LONGEST_RETRY_MS)
}

/** A repeat signup of a pending email re-sends its confirmation at most this often. */
export const CONFIRMATION_RESEND_MS = 3_600_000

/** Default lifetime of a confirmation link (and of an unconfirmed subscription): 48 hours. */
export const DEFAULT_CONFIRM_TTL_SECONDS = 172_800
export const MIN_CONFIRM_TTL_SECONDS = 300
export const MAX_CONFIRM_TTL_SECONDS = 30 * 86_400

/** Notification addresses per list, at most. */
export const MAX_NOTIFY_ADDRESSES = 20

/** Mail done with (sent, failed, cancelled) is kept this long, then deleted: it copies personal data. */
export const MAIL_RETENTION_MS = 90 * 86_400_000
