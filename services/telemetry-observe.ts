// The services as telemetry sees them: the decision service and the approval hub wrapped so that
// each decision and each closed approval is counted (services/telemetry.ts) without a line in
// their own code. Without telemetry the services are returned as they are.
import type { ApprovalHub } from './approvals.ts'
import type { DecisionService } from './decisions.ts'
import type { Telemetry } from './telemetry.ts'

/** Times every decision made (not simulations, not idempotent replays) and counts its outcome. */
export function observedDecisions(service: DecisionService, telemetry: Telemetry | undefined): DecisionService {
  if (!telemetry) return service
  return {
    ...service,
    async decide(principal, input, call) {
      const started = performance.now()
      const result = await service.decide(principal, input, call)
      if (!result.replayed) telemetry.decided(result.answer, input.agent ?? null, input.action, (performance.now() - started) / 1000, call?.requestId ?? null, principal.agentId)
      return result
    },
  }
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
