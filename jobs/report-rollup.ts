// The decision log's hourly rollup on a timer (storage/report-rollup.ts): every minute, each
// organization with uncounted rows is rolled up a chunk at a time, with a turn of the event loop
// between chunks (on PGlite the statements run on this thread); rollup hours past the
// organizations' retention are pruned once an hour. Reports stay exact whether this is late or not.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { turn } from '../database/turn.ts'
import { organizationsBehind, pruneRollup, rollUpChunk } from '../storage/report-rollup.ts'

export const ROLLUP_INTERVAL_MS = 60_000
/** Chunks per organization per pass (up to 500,000 rows a minute): a larger backlog (a first pass over an old log) spreads over several minutes. */
const MAX_CHUNKS_PER_PASS = 250
const PRUNE_EVERY_PASSES = 60

export interface ReportRollup {
  /** Stops the timer and settles once the pass under way (if any) has finished. */
  stop(): Promise<void>
}

/** One pass: every organization behind, up to MAX_CHUNKS_PER_PASS chunks each. */
export async function rollUpPass(db: Kysely<Database>, stopped: () => boolean = () => false): Promise<void> {
  for (const organizationId of await organizationsBehind(db)) {
    for (let chunk = 0; chunk < MAX_CHUNKS_PER_PASS && !stopped(); chunk++) {
      await turn()
      if (!(await rollUpChunk(db, organizationId))) break
    }
  }
}

export function startReportRollup(db: Kysely<Database>, clock: () => number, onError: (error: unknown) => void, intervalMs = ROLLUP_INTERVAL_MS): ReportRollup {
  let running: Promise<void> | null = null
  let stopped = false
  let passes = 0
  const pass = () => {
    if (running || stopped) return
    running = (async () => {
      try {
        await rollUpPass(db, () => stopped)
        if (passes++ % PRUNE_EVERY_PASSES === 0) await pruneRollup(db, new Date(clock()))
      } catch (error) {
        onError(error)
      } finally {
        running = null
      }
    })()
  }
  const timer = setInterval(pass, intervalMs)
  timer.unref?.()
  return {
    async stop() {
      stopped = true
      clearInterval(timer)
      await running
    },
  }
}
