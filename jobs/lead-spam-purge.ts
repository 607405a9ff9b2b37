// Spam is kept apart for its list's retention (LEAD_SPAM_RETENTION_DAYS, 30 days by default, or
// the list's own retention_days), then deleted; used CAPTCHA tokens are forgotten once they would
// have expired at the provider anyway. Once a minute after start, then every hour.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { errorCode, type Logger } from '../log.ts'
import { purgeSpam } from '../storage/lead-spam.ts'

export const SPAM_PURGE_EVERY_MS = 3_600_000
const FIRST_PURGE_MS = 60_000

export interface SpamPurge {
  /** Runs one purge now (after the one under way, if any). */
  run(): Promise<{ spam: number; tokens: number }>
  /** Stops the timers and settles when the purge under way (if any) has finished. */
  stop(): Promise<void>
}

export function startSpamPurge(db: Kysely<Database>, clock: () => number, logger: Logger, defaultDays: number, everyMs = SPAM_PURGE_EVERY_MS): SpamPurge {
  let done: Promise<unknown> = Promise.resolve()
  const run = () => {
    const next = done.then(() => purgeSpam(db, new Date(clock()), defaultDays))
    done = next.catch((error: unknown) => logger.log('warn', 'lead spam purge failed', { code: errorCode(error) }))
    return next
  }
  let every: ReturnType<typeof setInterval> | null = null
  const first = setTimeout(() => {
    void run().catch(() => {})
    every = setInterval(() => void run().catch(() => {}), everyMs)
    every.unref?.()
  }, Math.min(FIRST_PURGE_MS, everyMs))
  first.unref?.()
  return {
    run,
    async stop() {
      clearTimeout(first)
      if (every) clearInterval(every)
      await done
    },
  }
}
