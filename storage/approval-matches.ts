// The open approvals one requester asked for a given action: what a caller that cannot carry an
// approval id (a gateway that only allows or denies, such as ToolHive) retries with, so a retry
// uses the approval already asked for instead of asking again. Knows nothing of HTTP.
import type { Kysely, Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'
import { asOf, type ApprovalRecord } from './approvals.ts'

type Db = Kysely<Database> | Transaction<Database>

/** Enough of an approval to match it to a request again. */
export type OpenApproval = Pick<ApprovalRecord, 'approval_id' | 'agent_handle' | 'args_sha256' | 'status' | 'created_at'>

/** How many recent open approvals are read for one request: older ones are asked again. */
const RECENT = 20

export interface ApprovalMatch {
  readonly organizationId: string
  /** The agent by id (an agent key) or by handle (a key that names the agent). */
  readonly agent: { readonly id: string } | { readonly handle: string }
  readonly action: string
  readonly resource: string
  /** requested_by of the decisions that created them: the same credential only. */
  readonly requestedBy: string
}

/**
 * The approvals still pending or approved as of `now` (not expired, used, denied or cancelled)
 * that `match` asked for, approved ones first, then newest first.
 */
export async function findOpenApprovals(db: Db, match: ApprovalMatch, now: Date): Promise<OpenApproval[]> {
  let query = db
    .selectFrom('approvals')
    .selectAll()
    .where('organization_id', '=', match.organizationId)
    .where('status', 'in', ['pending', 'approved'])
    .where('action', '=', match.action)
    .where('resource', '=', match.resource)
    .where('requested_by', '=', match.requestedBy)
  query = 'id' in match.agent ? query.where('agent_id', '=', match.agent.id) : query.where('agent_handle', '=', match.agent.handle)
  const rows = await query.orderBy('created_at', 'desc').limit(RECENT).execute()
  const open = rows.map((row) => asOf(row as ApprovalRecord, now)).filter((row) => row.status === 'pending' || row.status === 'approved')
  return open.sort((a, b) => Number(b.status === 'approved') - Number(a.status === 'approved'))
}
