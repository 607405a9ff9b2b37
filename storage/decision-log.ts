// Reads of the decision log: one logged decision, and pages of them newest first for the API
// and the command line. Knows nothing of HTTP.
import type { Kysely, Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'
import type { DecisionRecord } from './decisions.ts'

type Db = Kysely<Database> | Transaction<Database>

const parse = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value)

export function toDecisionRecord(row: Record<string, unknown>): DecisionRecord {
  return {
    decision_id: row.decision_id as string,
    organization_id: row.organization_id as string,
    agent_id: row.agent_id as string,
    agent_handle: row.agent_handle as string,
    action: row.action as string,
    resource: row.resource as string,
    args: parse(row.args) as Record<string, unknown>,
    context: parse(row.context) as Record<string, unknown>,
    args_sha256: row.args_sha256 as string,
    decision: row.decision as DecisionRecord['decision'],
    policy_decision: row.policy_decision as DecisionRecord['policy_decision'],
    reasons: parse(row.reasons) as unknown[],
    monitor: parse(row.monitor),
    errors: parse(row.errors) as unknown[],
    approval_id: (row.approval_id as string | null) ?? null,
    ruleset_revision: Number(row.ruleset_revision),
    requested_by: row.requested_by as string,
    evaluated_at: row.evaluated_at as Date,
    via: (row.via as string | null | undefined) ?? null,
  }
}

export interface DecisionFilter {
  agentHandle: string | null
  /** Only this agent's decisions (an agent key sees its own only). */
  agentId: string | null
  action: string | null
  decision: DecisionRecord['decision'] | null
  from: Date | null
  to: Date | null
  /** Where the decisions came from: 'api' (POST /decisions, stored as null), 'mcp' (the gateway) or 'toolhive'. */
  via?: 'api' | 'mcp' | 'toolhive' | null
}

export interface DecisionCursor {
  evaluatedAt: Date
  decisionId: string
}

/** Newest first. */
export async function listDecisions(db: Db, organizationId: string, filter: DecisionFilter, page: { after: DecisionCursor | null; limit: number }): Promise<DecisionRecord[]> {
  let query = db.selectFrom('decisions').selectAll().where('organization_id', '=', organizationId)
  if (filter.agentHandle !== null) query = query.where('agent_handle', '=', filter.agentHandle)
  if (filter.agentId !== null) query = query.where('agent_id', '=', filter.agentId)
  if (filter.action !== null) query = query.where('action', '=', filter.action)
  if (filter.decision !== null) query = query.where('decision', '=', filter.decision)
  if (filter.from !== null) query = query.where('evaluated_at', '>=', filter.from)
  if (filter.to !== null) query = query.where('evaluated_at', '<', filter.to)
  if (filter.via === 'api') query = query.where('via', 'is', null)
  else if (filter.via) query = query.where('via', '=', filter.via)
  const after = page.after
  if (after) {
    query = query.where((eb) =>
      eb.or([eb('evaluated_at', '<', after.evaluatedAt), eb.and([eb('evaluated_at', '=', after.evaluatedAt), eb('decision_id', '<', after.decisionId)])]),
    )
  }
  const rows = await query.orderBy('evaluated_at', 'desc').orderBy('decision_id', 'desc').limit(page.limit).execute()
  return rows.map((row) => toDecisionRecord(row as Record<string, unknown>))
}

export async function findDecision(db: Db, organizationId: string, decisionId: string, agentId: string | null): Promise<DecisionRecord | null> {
  let query = db.selectFrom('decisions').selectAll().where('organization_id', '=', organizationId).where('decision_id', '=', decisionId)
  if (agentId !== null) query = query.where('agent_id', '=', agentId)
  const row = await query.executeTakeFirst()
  return row ? toDecisionRecord(row as Record<string, unknown>) : null
}
