// The background sealer: a sealing pass (storage/audit-seal.ts sealAll) every
// AUDIT_SEAL_INTERVAL_MS, never two at once in this process.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { DEFAULT_MAX_ROWS_PER_SEAL, sealAll } from '../storage/audit-seal.ts'

export interface AuditSealer {
  /** Stops the timer and settles once the pass under way (if any) has finished. */
  stop(): Promise<void>
}

/** Runs a sealing pass every `intervalMs` (never two at once in this process); stop() ends it. */
export function startAuditSealer(db: Kysely<Database>, clock: () => number, intervalMs: number, onError: (error: unknown) => void): AuditSealer {
  let running: Promise<void> | null = null
  let stopped = false
  const pass = () => {
    if (running || stopped) return
    running = (async () => {
      try {
        // A backlog larger than one seal was cut: seal the rest now rather than a tick later.
        for (let round = 0; round < 10 && !stopped; round++) {
          const made = await sealAll(db, new Date(clock()))
          if (!made.some((seal) => seal.events + seal.decisions >= DEFAULT_MAX_ROWS_PER_SEAL)) break
        }
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
