// The lead-mail outbox job: sends due mail through SMTP, logging every attempt and retrying a
// failure with exponential backoff (domain/lead-mail.ts); expires unconfirmed newsletter
// subscriptions; deletes mail done with after 90 days. It runs every LEAD_MAIL_POLL_MS and at once
// when mail is queued, one pass at a time. Without SMTP settings it sends nothing, and says so once at start.
import type { Config } from '../config.ts'
import { MAIL_RETENTION_MS, mailRetryDelay } from '../domain/lead-mail.ts'
import { errorCode } from '../log.ts'
import type { Deps } from '../services/deps.ts'
import type { LeadMail } from '../services/lead-mail.ts'
import { claimDueMail, pruneMail, recordAttempt, type OutboxRow } from '../storage/lead-mail.ts'
import { expirePendingSubscriptions } from '../storage/lead-subscriptions.ts'

/** Mails claimed per query, and how long a claim holds (a crashed sender's mail is due again after it). */
const BATCH = 20
const LEASE_MS = 5 * 60_000

export interface LeadMailJob {
  /** Stops the timer and settles when the pass under way (if any) has finished. */
  stop(): Promise<void>
}

/** An SMTP error, without the addresses a server may echo back. */
function describe(error: unknown): string {
  const e = error as { responseCode?: number; response?: string; code?: string; message?: string }
  const text = e.response ?? e.message ?? String(error)
  const code = e.responseCode ? `${e.responseCode} ` : e.code ? `${e.code}: ` : ''
  return `${code}${text}`.replace(/<?[^\s<>@]+@[^\s<>@]+>?/g, '<address>').slice(0, 500)
}

export function startLeadMailJob(config: Config, deps: Pick<Deps, 'db' | 'clock' | 'logger'>, mail: LeadMail): LeadMailJob {
  const { db, clock, logger } = deps
  if (!mail.configured) logger.log('info', 'SMTP is not configured (SMTP_URL or SMTP_HOST): no lead notification or confirmation mail will be sent')
  let running: Promise<void> | null = null
  let again = false
  let stopped = false

  async function sendOne(row: OutboxRow): Promise<void> {
    const attempt = row.attempts + 1
    try {
      const answer = await mail.mailer!.send({
        to: row.recipients as string[],
        replyTo: row.reply_to,
        subject: row.subject,
        text: row.body,
        headers: (row.headers ?? {}) as Record<string, string>,
      })
      await recordAttempt(db, Number(row.id), attempt, new Date(clock()), { ok: true, detail: describe({ message: answer }), retryAt: null })
    } catch (error) {
      const now = clock()
      const delay = mailRetryDelay(attempt)
      const detail = describe(error)
      logger.log('warn', 'lead mail attempt failed', { outbox_id: Number(row.id), attempt, retry: delay !== null, code: errorCode(error) })
      await recordAttempt(db, Number(row.id), attempt, new Date(now), { ok: false, detail, retryAt: delay === null ? null : new Date(now + delay) })
    }
  }

  let prunedAt = -Infinity
  async function pass(): Promise<void> {
    await expirePendingSubscriptions(db, new Date(clock()))
    // Old mail goes at most once an hour (by the injected clock).
    if (clock() - prunedAt >= 3_600_000) {
      prunedAt = clock()
      await pruneMail(db, new Date(prunedAt - MAIL_RETENTION_MS))
    }
    if (!mail.mailer) return
    for (;;) {
      const rows = await claimDueMail(db, new Date(clock()), BATCH, LEASE_MS)
      for (const row of rows) {
        if (stopped) return
        await sendOne(row)
      }
      if (rows.length < BATCH || stopped) return
    }
  }

  function run(): void {
    if (stopped) return
    if (running) {
      again = true
      return
    }
    running = pass()
      .catch((error: unknown) => logger.log('warn', 'lead mail pass failed', { code: errorCode(error) }))
      .finally(() => {
        running = null
        if (again) {
          again = false
          run()
        }
      })
  }

  mail.onQueued(run)
  const timer = setInterval(run, config.leadMailPollMs)
  timer.unref?.()
  run()
  return {
    async stop() {
      stopped = true
      clearInterval(timer)
      while (running) await running
    },
  }
}
