// The services as telemetry sees them: each decision made (through the decision service's hook)
// and each closed approval (the approval hub wrapped) is counted (services/telemetry.ts). Without
// telemetry there is no hook and the hub is returned as it is.
import type { ApprovalHub } from './approvals.ts'
import type { DecidedHook } from './decisions.ts'
import type { Telemetry } from './telemetry.ts'

/** Counts each decision made (not simulations, not idempotent replays) with the time it took. */
export function decisionObserver(telemetry: Telemetry | undefined): DecidedHook | undefined {
  if (!telemetry) return undefined
  return (answer, principal, input, requestId, seconds) => telemetry.decided(answer, input.agent ?? null, input.action, seconds, requestId, principal.agentId)
}

/** Observes how long an approval waited when a vote decides it or it is cancelled. */
export function observedApprovals(hub: ApprovalHub, telemetry: Telemetry | undefined): ApprovalHub {
  if (!telemetry) return hub
  const closed = (outcome: Awaited<ReturnType<ApprovalHub['vote']>>, now: Date) => {
    if (outcome.kind !== 'voted' || !outcome.changed || outcome.approval.status === 'pending') return
    telemetry.approvalClosed(outcome.approval.status, (now.getTime() - new Date(outcome.approval.created_at).getTime()) / 1000)
  }
  return {
    ...hub,
    async vote(organizationId, approvalId, voter, now, by) {
      const outcome = await hub.vote(organizationId, approvalId, voter, now, by)
      closed(outcome, now)
      return outcome
    },
    async cancel(scope, approvalId, cancelledBy, now, by) {
      const outcome = await hub.cancel(scope, approvalId, cancelledBy, now, by)
      closed(outcome, now)
      return outcome
    },
  }
}
