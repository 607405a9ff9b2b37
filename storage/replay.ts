// Reads the decision log for a replay: an organization's logged decisions, newest first, in pages
// taken by keyset (evaluated_at, decision_id) on the decisions_page index, so a replay of 100,000
// decisions never holds more than one page in memory. Knows nothing of HTTP or of the engine.
import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.ts'

export type LoggedOutcome = 'allow' | 'deny' | 'require_approval'

/** One logged decision, as much of it as deciding it again needs. */
export interface LoggedDecisionRow {
  decision_id: string
  agent_id: string
  agent_handle: string
  /** The agent's labels now ({} when the agent is gone). */
  agent_labels: Record<string, string>
  /** The rule that decided it when the agent was suspended or unknown, else null. */
  agent_rule: 'agent_suspended' | 'unknown_agent' | null
  action: string
  resource: string
  args: Record<string, unknown>
  context: Record<string, unknown>
  /** What the policies alone decided (before any approval was consumed). */
  policy_decision: LoggedOutcome
  evaluated_at: Date
}

export interface ReplayWindow {
  /** Inclusive; null: from the oldest. */
  from: Date | null
  /** Exclusive; null: up to the newest. */
  to: Date | null
}

export interface ReplayPosition {
  evaluatedAt: Date
  decisionId: string
}

/** One page of logged decisions, newest first, strictly after `after` in that order. */
export async function pageOfLoggedDecisions(
  db: Kysely<Database>,
  organizationId: string,
  window: ReplayWindow,
  after: ReplayPosition | null,
  limit: number,
): Promise<LoggedDecisionRow[]> {
  const from = window.from ? sql` and d.evaluated_at >= ${window.from}` : sql``
  const to = window.to ? sql` and d.evaluated_at < ${window.to}` : sql``
  const position = after ? sql` and (d.evaluated_at, d.decision_id) < (${after.evaluatedAt}, ${after.decisionId})` : sql``
  const { rows } = await sql<Record<string, unknown>>`
    select d.decision_id, d.agent_id, d.agent_handle, d.action, d.resource, d.args, d.context, d.policy_decision, d.evaluated_at,
      coalesce(a.labels, '{}'::jsonb) as agent_labels,
      case when d.reasons @> '[{"rule":"agent_suspended"}]'::jsonb then 'agent_suspended'
           when d.reasons @> '[{"rule":"unknown_agent"}]'::jsonb then 'unknown_agent' end as agent_rule
    from decisions d left join agents a on a.agent_id = d.agent_id and a.organization_id = d.organization_id
    where d.organization_id = ${organizationId}${from}${to}${position}
    order by d.evaluated_at desc, d.decision_id desc
    limit ${limit}`.execute(db)
  return rows.map((row) => ({
    decision_id: row.decision_id as string,
    agent_id: row.agent_id as string,
    agent_handle: row.agent_handle as string,
    agent_labels: row.agent_labels as Record<string, string>,
    agent_rule: (row.agent_rule as LoggedDecisionRow['agent_rule']) ?? null,
    action: row.action as string,
    resource: row.resource as string,
    args: row.args as Record<string, unknown>,
    context: row.context as Record<string, unknown>,
    policy_decision: row.policy_decision as LoggedOutcome,
    evaluated_at: new Date(row.evaluated_at as Date),
  }))
}
