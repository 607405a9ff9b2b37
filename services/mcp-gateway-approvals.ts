// The gateway's approvals: which open approval a repeated call uses (an MCP client cannot name
// one: a call with the same tool, resource and arguments from the same agent key waits on, or
// uses, the approval already asked for instead of asking people again), and the wait for an
// approval to be decided, in slices so the caller can tell its client it is still waiting.
import { canonicalSha256 } from '../engine/index.ts'
import { effectiveStatus, findApproval, type ApprovalRecord } from '../storage/approvals.ts'
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import type { ApprovalHub } from './approvals.ts'

/** Open approvals remembered per process; the oldest is forgotten past this (it is then asked again). */
const MAX_REMEMBERED = 10_000

export interface ApprovalCall {
  readonly organizationId: string
  readonly agentId: string
  /** The agent key (a key's approvals are its own: requested_by). */
  readonly keyId: string | null
  readonly action: string
  readonly resource: string
  readonly args: Record<string, unknown>
}

export interface GatewayApprovals {
  /** The approval a call like this one asked for and that is still pending or approved, if any. */
  openFor(call: ApprovalCall, now: Date): Promise<string | null>
  /** Remembers the approval a call asked for. */
  remember(call: ApprovalCall, approvalId: string): void
  /** Forgets an approval that was used or is no longer usable. */
  forget(call: ApprovalCall): void
  /**
   * Waits up to `ms` for a pending approval to be decided (here or, on PostgreSQL, in another
   * process), calling `tick` with the seconds waited every `tickMs`; the approval as it then
   * stands, null when the agent has no such approval.
   */
  wait(call: Pick<ApprovalCall, 'organizationId' | 'agentId'>, approvalId: string, options: WaitOptions): Promise<ApprovalRecord | null>
}

export interface WaitOptions {
  readonly ms: number
  readonly signal: AbortSignal | null
  readonly tickMs: number
  readonly tick: ((waitedMs: number) => void) | null
}

function keyOf(call: ApprovalCall): string | null {
  try {
    return `${call.organizationId}|${call.agentId}|${call.keyId}|${canonicalSha256({ action: call.action, resource: call.resource, args: call.args })}`
  } catch {
    // Arguments without a canonical form cannot be bound to an approval: the decision refuses them.
    return null
  }
}

export function createGatewayApprovals(deps: { readonly db: Kysely<Database>; readonly hub: ApprovalHub; readonly clock: () => number }): GatewayApprovals {
  const remembered = new Map<string, string>()
  return {
    async openFor(call, now) {
      // Most calls need no approval: nothing remembered, nothing to hash.
      if (remembered.size === 0) return null
      const key = keyOf(call)
      const approvalId = key === null ? undefined : remembered.get(key)
      if (approvalId === undefined) return null
      const found = await findApproval(deps.db, call.organizationId, approvalId, call.agentId)
      if (found) {
        const status = effectiveStatus(found, now)
        if (status === 'pending' || status === 'approved') return approvalId
      }
      remembered.delete(key!)
      return null
    },
    remember(call, approvalId) {
      const key = keyOf(call)
      if (key === null) return
      remembered.delete(key)
      remembered.set(key, approvalId)
      if (remembered.size > MAX_REMEMBERED) remembered.delete(remembered.keys().next().value!)
    },
    forget(call) {
      const key = keyOf(call)
      if (key !== null) remembered.delete(key)
    },
    async wait(call, approvalId, { ms, signal, tickMs, tick }) {
      const scope = { organizationId: call.organizationId, agentId: call.agentId }
      const started = Date.now()
      for (;;) {
        const left = ms - (Date.now() - started)
        const slice = tick === null ? left : Math.min(left, tickMs)
        const record = await deps.hub.read(scope, approvalId, { waitMs: Math.max(0, slice), now: deps.clock(), signal })
        if (record === null || record.status !== 'pending' || left <= slice || signal?.aborted) return record
        tick?.(Date.now() - started)
      }
    },
  }
}
