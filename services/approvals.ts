// The approval hub (docs/governance.md#approvals): what happens to an approval after the decision
// that created it — people vote, the agent or an admin cancels, the agent waits for the outcome —
// and the waiters those changes wake. Waiters are woken in this process by the hub and across
// processes by LISTEN/NOTIFY on PostgreSQL; they cost no query while they wait. Expiry is written
// on a timer by jobs/approval-expiry.ts, which wakes waiters through the hub too.
import type { Config } from '../config.ts'
import { voteRefusal } from '../domain/approvals.ts'
import { isPostgresUrl } from '../domain/database-url.ts'
import type { Role } from '../domain/roles.ts'
import { startNotificationFeed, type NotificationFeed } from '../database/notifications.ts'
import { HttpError } from '../http/errors.ts'
import type { AuditBy } from '../storage/audit.ts'
import { APPROVAL_CHANNEL, asOf, cancelApproval, effectiveStatus, findApproval, voteOnApproval, type ApprovalRecord, type VoteFacts, type Voter, type VoteOutcome } from '../storage/approvals.ts'
import type { Deps } from './deps.ts'

const MAX_WAITERS = 10_000

/**
 * A waiter registered before the approval is read, so that a change committed between that read
 * and the wait is never missed: a wake that comes first makes `wait` return at once.
 */
export interface ApprovalSubscription {
  /** Resolves when the approval changed (even before this call), after `ms`, or on abort. */
  wait(ms: number): Promise<void>
  /** Leaves (idempotent); call it whatever happened. */
  cancel(): void
}

/** A signed-in person voting; their role and identity decide whether they may (domain/approvals.ts). */
export interface ApprovalVoter extends Voter {
  readonly role: Role
}

/** Whose approvals a caller sees: an organization's, or only one agent's within it. */
export interface ApprovalScope {
  readonly organizationId: string
  /** Set for an agent's key: only that agent's approvals exist for it. */
  readonly agentId: string | null
}

export interface ApprovalHub {
  /**
   * Counts a person's vote, refusing (403) a role the approval does not accept and self-approval;
   * wakes the approval's waiters when the vote changed its state.
   */
  vote(organizationId: string, approvalId: string, voter: ApprovalVoter, now: Date, by: AuditBy): Promise<VoteOutcome>
  /** Cancels a pending approval (only its agent's, when `agentId` is set); wakes its waiters. */
  cancel(scope: ApprovalScope, approvalId: string, cancelledBy: string, now: Date, by: AuditBy): Promise<VoteOutcome>
  /**
   * The approval as of the clock, or null when the scope holds none of that id. While it is
   * pending as of `now`, first waits up to `waitMs` (never past its expiry, and not after `signal`
   * aborts) for its state to change.
   */
  read(scope: ApprovalScope, approvalId: string, options: { readonly waitMs: number; readonly now: number; readonly signal: AbortSignal | null }): Promise<ApprovalRecord | null>
  /**
   * Registers a waiter on an approval now; wait on it after reading the approval. It wakes when the
   * approval changes state (here or, on PostgreSQL, elsewhere).
   */
  subscribe(approvalId: string, signal: AbortSignal | null): ApprovalSubscription
  /** Wakes this process's waiters on an approval. */
  wake(approvalId: string): void
  /** Waiters now (for tests). */
  waiting(): number
  /** Subscribes to other processes' changes (PostgreSQL). */
  start(): void
  /** Ends the subscription and wakes every waiter (each answers with what it reads then). */
  close(): Promise<void>
}

export function createApprovalHub(config: Config, deps: Pick<Deps, 'db' | 'clock' | 'logger' | 'listenUrl'>): ApprovalHub {
  const waiters = new Map<string, Set<() => void>>()
  let count = 0
  let feed: NotificationFeed | null = null
  const listenUrl = deps.listenUrl !== undefined ? deps.listenUrl : isPostgresUrl(config.databaseUrl) ? config.databaseUrl : null

  const wake = (approvalId: string) => {
    const set = waiters.get(approvalId)
    if (set) for (const done of Array.from(set)) done() // a snapshot: a woken waiter leaves the set
  }
  const wakeAll = () => {
    for (const id of Array.from(waiters.keys())) wake(id)
  }
  const changed = (outcome: VoteOutcome): VoteOutcome => {
    if (outcome.kind === 'voted' && outcome.changed) wake(outcome.approval.approval_id)
    return outcome
  }

  const subscribe = (approvalId: string, signal: AbortSignal | null): ApprovalSubscription => {
    // Over the cap or already aborted: nothing is registered and waiting returns at once.
    let woken = signal?.aborted === true || count >= MAX_WAITERS
    let release: (() => void) | null = null
    let timeout: ReturnType<typeof setTimeout> | undefined
    const set = waiters.get(approvalId) ?? new Set<() => void>()
    const leave = () => {
      clearTimeout(timeout)
      signal?.removeEventListener('abort', done)
      if (set.delete(done)) count--
      if (set.size === 0 && waiters.get(approvalId) === set) waiters.delete(approvalId)
    }
    const done = () => {
      woken = true
      leave()
      release?.()
    }
    if (!woken) {
      waiters.set(approvalId, set)
      set.add(done)
      count++
      signal?.addEventListener('abort', done, { once: true })
    }
    return {
      wait: (ms) =>
        new Promise<void>((resolve) => {
          if (woken || ms <= 0) {
            leave()
            return resolve()
          }
          release = resolve
          timeout = setTimeout(done, ms)
        }),
      cancel: leave,
    }
  }

  return {
    async vote(organizationId, approvalId, voter, now, by) {
      const refuseSelfApproval = (approval: ApprovalRecord, facts: VoteFacts) => {
        const refusal = voteRefusal(approval, { role: voter.role, userId: voter.userId, email: facts.voterEmail, ownerUserId: facts.ownerUserId })
        if (refusal !== null) throw new HttpError(403, refusal)
      }
      const vote: Voter = { userId: voter.userId, vote: voter.vote, note: voter.note }
      return changed(await voteOnApproval(deps.db, organizationId, approvalId, vote, now, refuseSelfApproval, by))
    },
    async cancel(scope, approvalId, cancelledBy, now, by) {
      return changed(await cancelApproval(deps.db, scope.organizationId, approvalId, scope.agentId, cancelledBy, now, by))
    },
    async read(scope, approvalId, { waitMs, now, signal }) {
      // Registered before the first read: an approve that commits between that read and the wait
      // still wakes this caller (otherwise it would sleep until `waitMs` ran out).
      const subscription = waitMs > 0 ? subscribe(approvalId, signal) : null
      try {
        let record = await findApproval(deps.db, scope.organizationId, approvalId, scope.agentId)
        if (!record) return null
        if (subscription && effectiveStatus(record, new Date(now)) === 'pending') {
          // Never past the expiry: then the answer is expired, whatever the sweeper has written.
          await subscription.wait(Math.min(waitMs, record.expires_at.getTime() - now))
          record = (await findApproval(deps.db, scope.organizationId, record.approval_id, scope.agentId)) ?? record
        }
        return asOf(record, new Date(deps.clock()))
      } finally {
        subscription?.cancel()
      }
    },
    subscribe,
    wake,
    waiting: () => count,
    start() {
      if (feed || !listenUrl) return
      // A lost feed may have missed news: every waiter re-reads once (and the client asks again).
      feed = startNotificationFeed(listenUrl, APPROVAL_CHANNEL, deps.logger, {
        onMessage: wake,
        onLoss: wakeAll,
        lossMessage: 'approval feed lost; waiters re-read until it is back',
      })
    },
    async close() {
      const closing = feed
      feed = null
      await closing?.close()
      wakeAll()
    },
  }
}
