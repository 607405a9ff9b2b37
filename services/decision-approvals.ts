// What approvals do to a decision (docs/api.md#approvals): a require_approval decision creates
// its approval, bound to the exact action; a request naming an approval is settled by it. The
// approval created or consumed is written in the decision's own transaction (storage/decisions.ts).
import type { Kysely } from 'kysely'
import type { DecisionOutcome, Reason } from '../engine/index.ts'
import type { Agent } from '../storage/agents.ts'
import { asOf, findApproval, type ApprovalRecord, type NewApproval } from '../storage/approvals.ts'
import type { Database } from '../database/schema.ts'
import { boundCall, requesterOf, type ApprovalRef, type DecisionInput, type DecisionPrincipal } from './decision-answers.ts'

/** A decision as approvals settle it: what it answers, and the approval it creates or consumes. */
export interface Settled {
  decision: DecisionOutcome['decision']
  reasons: readonly Reason[]
  ref: ApprovalRef
  create: NewApproval | null
  /** The approved approval this allow uses: consumed in the decision's own transaction. */
  consume: string | null
}

const refOf = (approval: Pick<ApprovalRecord, 'approval_id' | 'status' | 'expires_at'>): ApprovalRef => ({ approval_id: approval.approval_id, status: approval.status, expires_at: approval.expires_at.toISOString() })

/** A require_approval decision creates its approval, bound to the exact action; written with the decision. */
export function createApproval(principal: DecisionPrincipal, agent: Agent, input: DecisionInput, outcome: DecisionOutcome, decisionId: string, argsHash: string, now: Date): Settled {
  if (outcome.decision !== 'require_approval' || outcome.approval === null) return { decision: outcome.decision, reasons: outcome.reasons, ref: null, create: null, consume: null }
  const requirement = outcome.approval
  const create: NewApproval = {
    approval_id: crypto.randomUUID(),
    ...boundCall(principal, agent, input, decisionId, argsHash),
    policies: requirement.policies.map((p) => ({ policy_id: p.policy_id, version: p.version })),
    approvers_required: requirement.approvers_required,
    approver_roles: [...requirement.approver_roles],
    use_within_seconds: requirement.use_within_seconds,
    created_at: now,
    expires_at: new Date(now.getTime() + requirement.timeout_seconds * 1000),
    requested_by: requesterOf(principal),
  }
  return { decision: outcome.decision, reasons: outcome.reasons, ref: refOf({ ...create, status: 'pending' }), create, consume: null }
}

/**
 * A request naming an approval: a deny of the policies stands (the approval is left alone);
 * otherwise the approval decides. Unknown, another organization's, used, expired, denied or
 * cancelled: deny approval_unusable. Bound to another action or args: deny approval_mismatch.
 * Still pending: require_approval with the same approval. Approved: allow, and the approval is
 * consumed by one conditional update in the decision's own transaction (storage/decisions.ts),
 * so of concurrent uses exactly one is allowed and the others decide again (approval_unusable).
 */
export async function useApproval(db: Kysely<Database>, principal: DecisionPrincipal, agent: Agent, approvalId: string, outcome: DecisionOutcome, argsHash: string, now: Date): Promise<Settled> {
  if (outcome.decision === 'deny') return { decision: 'deny', reasons: outcome.reasons, ref: null, create: null, consume: null }
  const deny = (rule: Reason, ref: ApprovalRef = null): Settled => ({ decision: 'deny', reasons: [rule], ref, create: null, consume: null })
  const found = await findApproval(db, principal.organizationId, approvalId, null)
  if (!found) return deny({ rule: 'approval_unusable' })
  const current = asOf(found, now)
  if (found.agent_id !== agent.agent_id || found.args_sha256 !== argsHash) return deny({ rule: 'approval_mismatch' }, refOf(current))
  if (current.status === 'pending') return { decision: 'require_approval', reasons: outcome.reasons, ref: refOf(current), create: null, consume: null }
  if (current.status !== 'approved') return deny({ rule: 'approval_unusable' }, refOf(current))
  return { decision: 'allow', reasons: [{ rule: 'approval' }], ref: refOf({ ...current, status: 'consumed' }), create: null, consume: approvalId }
}

/** Another use consumed the approval first: this decision is a deny, with the approval as it now stands. */
export async function lostUse(db: Kysely<Database>, principal: DecisionPrincipal, approvalId: string, now: Date): Promise<Settled> {
  const found = await findApproval(db, principal.organizationId, approvalId, null)
  return { decision: 'deny', reasons: [{ rule: 'approval_unusable' }], ref: found ? refOf(asOf(found, now)) : null, create: null, consume: null }
}
