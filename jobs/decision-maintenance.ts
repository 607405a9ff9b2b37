// The decision log's upkeep on a timer: partitions made ahead now and then daily, retention
// shortly after start and then daily (the SQL is database/partitions.ts).
import type { Kysely } from 'kysely'
import { applyDecisionRetention, ensureDecisionPartitions } from '../database/partitions.ts'
import type { Database } from '../database/schema.ts'

export interface DecisionMaintenance {
  stop(): void
  /** Settles when the run under way (if any) has finished. */
  readonly done: Promise<void>
}

/**
 * How long after start retention first runs. Partitions are made at once (a decision needs its
 * month's partition); retention can wait, and on PGlite its queries (30–50 ms on a restart) would
 * otherwise sit in front of the first request.
 */
export const FIRST_RETENTION_DELAY_MS = 10_000

/** Makes partitions ahead now, applies retention shortly after, then both once a day; stop() ends it. */
export function startDecisionMaintenance(
  db: Kysely<Database>,
  clock: () => number,
  onError: (error: unknown) => void,
  firstRetentionDelayMs = FIRST_RETENTION_DELAY_MS,
): DecisionMaintenance {
  const guarded = (work: () => Promise<unknown>) => async () => {
    try {
      await work()
    } catch (error) {
      onError(error)
    }
  }
  const ensure = guarded(() => ensureDecisionPartitions(db, new Date(clock())))
  const retention = guarded(() => applyDecisionRetention(db, new Date(clock())))
  // One run at a time, in order: each step waits for the one before.
  let done = ensure()
  const first = setTimeout(() => (done = done.then(retention)), firstRetentionDelayMs)
  const timer = setInterval(() => (done = done.then(ensure).then(retention)), 86_400_000)
  first.unref?.()
  timer.unref?.()
  return {
    stop() {
      clearTimeout(first)
      clearInterval(timer)
    },
    get done() {
      return done
    },
  }
}
