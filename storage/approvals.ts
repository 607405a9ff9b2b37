// Approvals (docs/governance.md#approvals): created with the require_approval decision that asks
// for one (storage/decisions.ts writes both in one transaction), voted on under a row lock, used
// once by an atomic update, expired by a sweeper and at read time. Every change of state sends
// the approval id on the channel below, in the same transaction, so waiters in other processes
// wake up. Knows nothing of HTTP.
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely'
import type { AuditEventType } from '../domain/audit.ts'
import { BY_SYSTEM, eventBy, recordEvent, recordEvents, type AuditBy, type AuditEventInput } from './audit.ts'
import { releaseReservations } from './budgets.ts'
import type { ApprovalStatus, ApprovalTable, ApprovalVoteTable, Database } from '../database/schema.ts'

type Db = Kysely<Database> | Transaction<Database>

/** Payloads are approval ids. */
export const APPROVAL_CHANNEL = 'steward_approvals'

/** An approval's row, its JSON columns typed as insertApprovals writes them. */
export type ApprovalRecord = Omit<Selectable<ApprovalTable>, 'args' | 'context' | 'policies' | 'approver_roles'> & {
  args: Record<string, unknown>
  context: Record<string, unknown>
  policies: { policy_id: string; version: number }[]
  approver_roles: string[]
}

export type VoteRecord = Selectable<ApprovalVoteTable>

const asApproval = (row: Selectable<ApprovalTable>) => row as ApprovalRecord

/**
 * The state as of `now`: an overdue pending approval is expired, and so is an approved one past
 * its use_by, whether or not the sweeper has written it yet.
 */
export function effectiveStatus(approval: Pick<ApprovalRecord, 'status' | 'expires_at' | 'use_by'>, now: Date): ApprovalStatus {
  if (approval.status === 'pending' && approval.expires_at.getTime() <= now.getTime()) return 'expired'
  if (approval.status === 'approved' && approval.use_by !== null && approval.use_by.getTime() <= now.getTime()) return 'expired'
  return approval.status
}

/** The record as it stands at `now` (see effectiveStatus). */
export function asOf(approval: ApprovalRecord, now: Date): ApprovalRecord {
  const status = effectiveStatus(approval, now)
  return status === approval.status ? approval : { ...approval, status }
}

/** What every approval event says about the approval: enough to know what was asked. */
function approvalData(approval: Pick<ApprovalRecord, 'approval_id' | 'agent_id' | 'agent_handle' | 'action' | 'resource'>): Record<string, unknown> {
  return { approval_id: approval.approval_id, agent_id: approval.agent_id, agent_handle: approval.agent_handle, action: approval.action, resource: approval.resource }
}

function approvalEvent(by: AuditBy, approval: Parameters<typeof approvalData>[0] & { organization_id: string }, type: AuditEventType, extra: Record<string, unknown>, now: Date): AuditEventInput {
  return eventBy(by, approval.organization_id, type, { type: 'approval', id: approval.approval_id }, { ...approvalData(approval), ...extra }, now)
}

/**
 * approval.requested: what an approver needs to decide (and what a webhook forwards): the agent,
 * the action, resource and arguments with their hash, the policies that asked, and until when.
 */
export function approvalRequestedEvent(approval: NewApproval, by: AuditBy, now: Date): AuditEventInput {
  return approvalEvent(
    by,
    approval,
    'approval.requested',
    {
      decision_id: approval.decision_id,
      args: approval.args,
      args_sha256: approval.args_sha256,
      policies: approval.policies,
      approvers_required: approval.approvers_required,
      approver_roles: approval.approver_roles,
      expires_at: approval.expires_at.toISOString(),
    },
    now,
  )
}

/** approval.consumed: the decision that used it. */
export function approvalConsumedEvent(approval: ApprovalRecord, by: AuditBy, now: Date): AuditEventInput {
  return approvalEvent(by, approval, 'approval.consumed', { decision_id: approval.consumed_decision_id }, now)
}

/** A new pending approval, written in the transaction of its decision. */
export type NewApproval = Omit<ApprovalRecord, 'status' | 'use_by' | 'decided_at' | 'consumed_at' | 'consumed_decision_id' | 'cancelled_by'>

export async function insertApprovals(trx: Db, approvals: readonly NewApproval[]): Promise<void> {
  if (approvals.length === 0) return
  await trx
    .insertInto('approvals')
    .values(
      approvals.map((approval) => ({
        ...approval,
        args: JSON.stringify(approval.args),
        context: JSON.stringify(approval.context),
        policies: JSON.stringify(approval.policies),
        approver_roles: JSON.stringify(approval.approver_roles),
        status: 'pending' as const,
      })),
    )
    .execute()
}

/** One approval of the organization (of one agent, for an agent key); null when there is none. */
export async function findApproval(db: Db, organizationId: string, approvalId: string, agentId: string | null): Promise<ApprovalRecord | null> {
  let query = db.selectFrom('approvals').selectAll().where('organization_id', '=', organizationId).where('approval_id', '=', approvalId)
  if (agentId !== null) query = query.where('agent_id', '=', agentId)
  const row = await query.executeTakeFirst()
  return row ? asApproval(row) : null
}

export async function votesFor(db: Db, approvalIds: readonly string[]): Promise<VoteRecord[]> {
  if (approvalIds.length === 0) return []
  return db.selectFrom('approval_votes').selectAll().where('approval_id', 'in', approvalIds).orderBy('created_at').orderBy('user_id').execute()
}

export interface ApprovalCursor {
  createdAt: Date
  approvalId: string
}

/** Oldest first; a status filter sees the state as of `now`. */
export async function listApprovals(
  db: Db,
  organizationId: string,
  filter: { status: ApprovalStatus | null; agentId: string | null },
  now: Date,
  page: { after: ApprovalCursor | null; limit: number },
): Promise<ApprovalRecord[]> {
  let query = db.selectFrom('approvals').selectAll().where('organization_id', '=', organizationId)
  if (filter.agentId !== null) query = query.where('agent_id', '=', filter.agentId)
  const status = filter.status
  if (status === 'pending') query = query.where('status', '=', 'pending').where('expires_at', '>', now)
  else if (status === 'approved') query = query.where('status', '=', 'approved').where('use_by', '>', now)
  else if (status === 'expired') {
    query = query.where((eb) =>
      eb.or([
        eb('status', '=', 'expired'),
        eb.and([eb('status', '=', 'pending'), eb('expires_at', '<=', now)]),
        eb.and([eb('status', '=', 'approved'), eb('use_by', '<=', now)]),
      ]),
    )
  } else if (status !== null) query = query.where('status', '=', status)
  const after = page.after
  if (after) {
    query = query.where((eb) => eb.or([eb('created_at', '>', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('approval_id', '>', after.approvalId)])]))
  }
  const rows = await query.orderBy('created_at', 'asc').orderBy('approval_id', 'asc').limit(page.limit).execute()
  return rows.map((row) => asOf(asApproval(row), now))
}

async function notifyChanged(trx: Db, approvalId: string): Promise<void> {
  await sql`select pg_notify(${APPROVAL_CHANNEL}, ${approvalId})`.execute(trx)
}

/** Who votes, and what the self-approval rule needs to know about them. */
export interface Voter {
  userId: string
  vote: 'approve' | 'deny'
  note: string | null
}

export interface VoteFacts {
  /** The agent's owner now (null when it has none). */
  ownerUserId: string | null
  /** The voter's email (normalized as stored). */
  voterEmail: string | null
}

export type VoteOutcome =
  | { kind: 'not_found' }
  /** Not pending (as of now): nothing was written. */
  | { kind: 'closed'; approval: ApprovalRecord }
  /** This user has already voted: nothing was written. */
  | { kind: 'repeat'; approval: ApprovalRecord }
  | { kind: 'voted'; approval: ApprovalRecord; changed: boolean }

/**
 * One vote under a lock of the approval row, so concurrent votes count one after another: one
 * deny decides, and the Nth distinct approve approves (use_by starts then). `check` runs on the
 * locked row before anything is written and may throw to refuse the vote (role, self-approval).
 */
export async function voteOnApproval(
  db: Kysely<Database>,
  organizationId: string,
  approvalId: string,
  voter: Voter,
  now: Date,
  check: (approval: ApprovalRecord, facts: VoteFacts) => void,
  by: AuditBy,
): Promise<VoteOutcome> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('approvals').selectAll().where('organization_id', '=', organizationId).where('approval_id', '=', approvalId).forUpdate().executeTakeFirst()
    if (!row) return { kind: 'not_found' }
    const approval = asApproval(row)
    if (effectiveStatus(approval, now) !== 'pending') return { kind: 'closed', approval: asOf(approval, now) }
    const facts = await trx
      .selectFrom('users')
      .select('email')
      .select((eb) => eb.selectFrom('agents').select('owner_user_id').where('agent_id', '=', approval.agent_id).as('owner_user_id'))
      .where('id', '=', voter.userId)
      .executeTakeFirst()
    check(approval, { ownerUserId: (facts?.owner_user_id as string | null | undefined) ?? null, voterEmail: facts?.email ?? null })
    const inserted = await trx
      .insertInto('approval_votes')
      .values({ approval_id: approvalId, user_id: voter.userId, vote: voter.vote, note: voter.note, created_at: now })
      .onConflict((oc) => oc.columns(['approval_id', 'user_id']).doNothing())
      .returning('user_id')
      .executeTakeFirst()
    if (!inserted) return { kind: 'repeat', approval }
    let next: { status: 'denied' | 'approved'; decided_at: Date; use_by?: Date } | null = null
    if (voter.vote === 'deny') next = { status: 'denied', decided_at: now }
    else {
      const approves = await trx.selectFrom('approval_votes').select((eb) => eb.fn.countAll<string>().as('n')).where('approval_id', '=', approvalId).where('vote', '=', 'approve').executeTakeFirstOrThrow()
      if (Number(approves.n) >= approval.approvers_required) {
        next = { status: 'approved', decided_at: now, use_by: new Date(now.getTime() + approval.use_within_seconds * 1000) }
      }
    }
    if (next === null) return { kind: 'voted', approval, changed: false }
    await trx.updateTable('approvals').set(next).where('approval_id', '=', approvalId).execute()
    // A denied approval gives back what its request reserved of the budgets (docs/budgets.md).
    if (next.status === 'denied') await releaseReservations(trx, [approvalId], now)
    await recordEvent(trx, approvalEvent(by, approval, next.status === 'approved' ? 'approval.approved' : 'approval.denied', { vote: voter.vote, note: voter.note, use_by: next.use_by?.toISOString() ?? null }, now))
    await notifyChanged(trx, approvalId)
    return { kind: 'voted', approval: { ...approval, ...next }, changed: true }
  })
}

/**
 * Uses an approved approval for one decision: one statement, so of two concurrent uses exactly
 * one finds it still approved. Null when it was not approved (or past use_by) at that moment.
 */
export async function consumeApproval(db: Db, organizationId: string, approvalId: string, decisionId: string, now: Date): Promise<ApprovalRecord | null> {
  const row = await db
    .updateTable('approvals')
    .set({ status: 'consumed', consumed_at: now, consumed_decision_id: decisionId })
    .where('organization_id', '=', organizationId)
    .where('approval_id', '=', approvalId)
    .where('status', '=', 'approved')
    .where('use_by', '>', now)
    .returningAll()
    .executeTakeFirst()
  return row ? asApproval(row) : null
}

/** Cancels a pending approval (of one agent, for an agent key). */
export async function cancelApproval(db: Kysely<Database>, organizationId: string, approvalId: string, agentId: string | null, cancelledBy: string, now: Date, by: AuditBy): Promise<VoteOutcome> {
  return db.transaction().execute(async (trx) => {
    let query = trx.selectFrom('approvals').selectAll().where('organization_id', '=', organizationId).where('approval_id', '=', approvalId)
    if (agentId !== null) query = query.where('agent_id', '=', agentId)
    const row = await query.forUpdate().executeTakeFirst()
    if (!row) return { kind: 'not_found' }
    const approval = asApproval(row)
    if (effectiveStatus(approval, now) !== 'pending') return { kind: 'closed', approval: asOf(approval, now) }
    const next = { status: 'cancelled' as const, decided_at: now, cancelled_by: cancelledBy }
    await trx.updateTable('approvals').set(next).where('approval_id', '=', approvalId).execute()
    await releaseReservations(trx, [approvalId], now)
    await recordEvent(trx, approvalEvent(by, approval, 'approval.cancelled', {}, now))
    await notifyChanged(trx, approvalId)
    return { kind: 'voted', approval: { ...approval, ...next }, changed: true }
  })
}

/**
 * Writes the expiry of every overdue approval: pending past expires_at, approved past use_by.
 * Each statement is one update (several processes may run it at once: a row expires once) that
 * also notifies the waiters of every row it changed. Returns the ids it expired.
 */
export async function expireDue(db: Db, now: Date): Promise<string[]> {
  const work = async (trx: Db): Promise<string[]> => {
    const pending = await sql<ExpiredRow>`
      with expired as (
        update approvals set status = 'expired', decided_at = ${now}
        where status = 'pending' and expires_at <= ${now}
        returning approval_id, organization_id, agent_id, agent_handle, action, resource
      )
      select *, pg_notify(${APPROVAL_CHANNEL}, approval_id::text) from expired
    `.execute(trx)
    const unused = await sql<ExpiredRow>`
      with expired as (
        update approvals set status = 'expired'
        where status = 'approved' and use_by <= ${now}
        returning approval_id, organization_id, agent_id, agent_handle, action, resource
      )
      select *, pg_notify(${APPROVAL_CHANNEL}, approval_id::text) from expired
    `.execute(trx)
    // Expired approvals give back what their requests reserved of the budgets.
    await releaseReservations(trx, [...pending.rows, ...unused.rows].map((row) => row.approval_id), now)
    // The sweeper acts: the system expired them.
    await recordEvents(trx, [
      ...pending.rows.map((row) => approvalEvent(BY_SYSTEM, row, 'approval.expired', { was: 'pending' }, now)),
      ...unused.rows.map((row) => approvalEvent(BY_SYSTEM, row, 'approval.expired', { was: 'approved' }, now)),
    ])
    return [...pending.rows, ...unused.rows].map((row) => row.approval_id)
  }
  if (db.isTransaction) return work(db)
  // Nothing due, the usual case: one read and no transaction. On PGlite, where the database runs
  // on the server's thread, the transaction of two updates held every request for about 6 ms.
  const due = await sql<{ due: boolean }>`select exists (select 1 from approvals where status = 'pending' and expires_at <= ${now})
      or exists (select 1 from approvals where status = 'approved' and use_by <= ${now}) as due`.execute(db)
  if (!due.rows[0]?.due) return []
  return (db as Kysely<Database>).transaction().execute(work)
}

type ExpiredRow = Pick<Selectable<ApprovalTable>, 'approval_id' | 'organization_id' | 'agent_id' | 'agent_handle' | 'action' | 'resource'>
