// Reads the decision log for a replay: an organization's logged decisions, newest first, in pages
// taken by keyset (evaluated_at, decision_id) on the decisions_page index, so a replay of 100,000
// decisions never holds more than one page in memory. Knows nothing of HTTP or of the engine.
// Reads the agents table only for their labels.
import { sql, type Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'

export type LoggedOutcome = 'allow' | 'deny' | 'require_approval'

/** One logged decision, as much of it as deciding it again needs. */
export interface LoggedDecisionRow {
  decision_id: string
  agent_id: string
  agent_handle: string
  /** The rule that decided it when the agent was suspended or unknown, else null. */
  agent_rule: 'agent_suspended' | 'unknown_agent' | null
  /** The rule of a limit that refused it (docs/budgets.md), or 'approval' for an allow that used an approval; else null. */
  other_rule?: 'limit_exceeded' | 'limit_error' | 'approval' | null
  action: string
  resource: string
  args: Record<string, unknown>
  context: Record<string, unknown>
  /** What the policies alone decided (before any approval was consumed). */
  policy_decision: LoggedOutcome
  evaluated_at: Date
  /** evaluated_at as the database wrote it (to the microsecond, ISO 8601): the keyset position. */
  position: string
}

export interface ReplayWindow {
  /** Inclusive; null: from the oldest. */
  from: Date | null
  /** Exclusive; null: up to the newest. */
  to: Date | null
}

export interface ReplayPosition {
  evaluatedAt: string
  decisionId: string
}

/**
 * One page of logged decisions, newest first, strictly after `after` in that order. The page
 * travels as one JSON text built by the database (json_agg) and parsed once here: on PGlite that
 * measured 2.5× faster than row by row. A rule reason is always alone, so the first reason tells it.
 */
export async function pageOfLoggedDecisions(
  db: Kysely<Database>,
  organizationId: string,
  window: ReplayWindow,
  after: ReplayPosition | null,
  limit: number,
): Promise<LoggedDecisionRow[]> {
  const from = window.from ? sql` and evaluated_at >= ${window.from}` : sql``
  const to = window.to ? sql` and evaluated_at < ${window.to}` : sql``
  const position = after ? sql` and (evaluated_at, decision_id) < (${after.evaluatedAt}::timestamptz, ${after.decisionId}::uuid)` : sql``
  const { rows } = await sql<{ page: string }>`
    select coalesce(json_agg(json_build_array(decision_id, agent_id, agent_handle, action, resource, args, context, policy_decision,
      evaluated_at, reasons->0->>'rule') order by evaluated_at desc, decision_id desc), '[]')::text as page
    from (
      select * from decisions
      where organization_id = ${organizationId}${from}${to}${position}
      order by evaluated_at desc, decision_id desc
      limit ${limit}
    ) as newest`.execute(db)
  const page = JSON.parse(rows[0]!.page) as unknown[][]
  return page.map((row) => ({
    decision_id: row[0] as string,
    agent_id: row[1] as string,
    agent_handle: row[2] as string,
    action: row[3] as string,
    resource: row[4] as string,
    args: row[5] as Record<string, unknown>,
    context: row[6] as Record<string, unknown>,
    policy_decision: row[7] as LoggedOutcome,
    evaluated_at: new Date(row[8] as string),
    position: row[8] as string,
    agent_rule: row[9] === 'agent_suspended' || row[9] === 'unknown_agent' ? row[9] : null,
    other_rule: row[9] === 'limit_exceeded' || row[9] === 'limit_error' || row[9] === 'approval' ? row[9] : null,
  }))
}

/** The current labels of the organization's agents (at most its cap of agents), by agent id. */
export async function agentLabels(db: Kysely<Database>, organizationId: string): Promise<Map<string, Record<string, string>>> {
  const rows = await db.selectFrom('agents').select(['agent_id', 'labels']).where('organization_id', '=', organizationId).execute()
  return new Map(rows.map((row) => [row.agent_id, row.labels]))
}
