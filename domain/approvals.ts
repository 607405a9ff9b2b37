// Who may vote on an approval (docs/governance.md#approvals), shared by the API and the operator
// commands: a role the approval accepts, and never one's own request (the agent's owner, or the
// person the action is on behalf of).
import { normalizeEmail } from './email.ts'

export interface VoteSubject {
  readonly approver_roles: readonly string[]
  readonly context: Readonly<Record<string, unknown>>
}

export interface Voting {
  readonly role: string
  readonly userId: string
  /** The voter's email as stored. */
  readonly email: string | null
  /** The agent's owner now (null when it has none). */
  readonly ownerUserId: string | null
}

/** Why this person may not vote on this approval, or null when they may. */
export function voteRefusal(approval: VoteSubject, voter: Voting): string | null {
  if (!approval.approver_roles.includes(voter.role)) {
    return `Your role (${voter.role}) may not decide this approval; it needs one of: ${approval.approver_roles.join(', ')}`
  }
  if (voter.ownerUserId === voter.userId) return 'No self-approval: you own the agent that asks'
  const behalf = approval.context.on_behalf_of
  if (typeof behalf === 'string' && voter.email !== null && normalizeEmail(behalf) === normalizeEmail(voter.email)) {
    return 'No self-approval: the action is on your behalf'
  }
  return null
}
