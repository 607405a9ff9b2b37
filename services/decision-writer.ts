// Group commit for the decision log: concurrent decisions wait in a small in-process queue and
// are written together, one transaction and one multi-row insert per batch, flushed on the next
// turn of the event loop (or at once when a batch is full). Each caller's promise settles only
// when its row is committed (or its batch failed), so no answer is ever sent for a decision
// that is not durable.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { writeWithRoom } from '../storage/budget-batch.ts'
import { writeDecisions, type PendingDecision, type WriteOutcome } from '../storage/decisions.ts'

export interface DecisionWriter {
  /** Resolves once the decision is committed; rejects when its batch could not be written. */
  write(pending: PendingDecision): Promise<WriteOutcome>
  /** Batches and rows written so far (for measurements). */
  readonly stats: { batches: number; rows: number }
  /** Waits for everything queued to be written or to fail. */
  drain(): Promise<void>
}

interface Waiting {
  pending: PendingDecision
  resolve(outcome: WriteOutcome): void
  reject(error: unknown): void
}

export const MAX_BATCH = 256
const MAX_CONCURRENT_BATCHES = 4

export function createDecisionWriter(db: Kysely<Database>, clock: () => number): DecisionWriter {
  let queue: Waiting[] = []
  let scheduled = false
  let running = 0
  const idle: (() => void)[] = []
  const stats = { batches: 0, rows: 0 }

  function schedule(): void {
    if (scheduled || queue.length === 0 || running >= MAX_CONCURRENT_BATCHES) return
    scheduled = true
    setImmediate(flush)
  }

  function flush(): void {
    scheduled = false
    while (queue.length > 0 && running < MAX_CONCURRENT_BATCHES) {
      const batch = queue.slice(0, MAX_BATCH)
      queue = queue.slice(MAX_BATCH)
      running++
      void run(batch)
    }
  }

  async function run(batch: Waiting[]): Promise<void> {
    try {
      const pending = batch.map((item) => item.pending)
      const now = new Date(clock())
      // Budgets with room to spare go in one statement with the rows; anything else is decided one by one.
      const outcomes: WriteOutcome[] = (await writeWithRoom(db, pending, now)) ? pending.map(() => ({ kind: 'logged' })) : await writeDecisions(db, pending, now)
      stats.batches++
      stats.rows += batch.length
      batch.forEach((item, index) => item.resolve(outcomes[index]!))
    } catch (error) {
      for (const item of batch) item.reject(error)
    } finally {
      running--
      schedule()
      if (running === 0 && queue.length === 0) for (const done of idle.splice(0)) done()
    }
  }

  return {
    write(pending) {
      return new Promise<WriteOutcome>((resolve, reject) => {
        queue.push({ pending, resolve, reject })
        if (queue.length >= MAX_BATCH && running < MAX_CONCURRENT_BATCHES) flush()
        else schedule()
      })
    },
    stats,
    drain() {
      if (running === 0 && queue.length === 0) return Promise.resolve()
      return new Promise((resolve) => idle.push(resolve))
    },
  }
}
