// Overdue approvals written expired on a timer (docs/governance.md#approvals), so one that nobody
// reads still ends; a read answers expired at once anyway (storage/approvals.ts asOf). Each
// expired approval wakes its waiters here through the hub, and elsewhere through the NOTIFY the
// update sends.
import { expireDue } from '../storage/approvals.ts'
import type { ApprovalHub } from '../services/approvals.ts'
import type { Deps } from '../services/deps.ts'
import { errorCode } from '../log.ts'

/** How often overdue approvals are looked for. */
export const APPROVAL_EXPIRY_MS = 5_000

export interface ApprovalExpiry {
  /** Stops the timer and settles when the sweep under way (if any) has finished. */
  stop(): Promise<void>
}

/** Sweeps every `everyMs` from now on, one sweep at a time; stop() ends it. */
export function startApprovalExpiry(deps: Pick<Deps, 'db' | 'clock' | 'logger'>, hub: Pick<ApprovalHub, 'wake'>, everyMs = APPROVAL_EXPIRY_MS): ApprovalExpiry {
  let sweeping: Promise<void> | null = null
  const sweep = () => {
    if (sweeping) return
    sweeping = expireDue(deps.db, new Date(deps.clock()))
      .then((ids) => ids.forEach((id) => hub.wake(id)))
      .catch((error: unknown) => deps.logger.log('warn', 'approval expiry sweep failed', { code: errorCode(error) }))
      .finally(() => {
        sweeping = null
      })
  }
  const timer = setInterval(sweep, everyMs)
  timer.unref?.()
  return {
    async stop() {
      clearInterval(timer)
      await sweeping
    },
  }
}
