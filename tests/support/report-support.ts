// Seeding for the report tests: organizations with keys, agents, logged decisions and approvals
// written straight to the database at chosen instants (the reports count what the log holds).
import { sql, type Kysely } from 'kysely'
import type { Database } from '../../database/schema.ts'
import { BY_OPERATOR } from '../../storage/audit.ts'
import { createApiKey } from '../../storage/keys.ts'
import { createOrganization } from '../../storage/organizations.ts'

export type Role = 'owner' | 'admin' | 'manager' | 'member' | 'viewer'

/** A new organization and one key per role asked. */
export async function newOrganization(db: Kysely<Database>, name: string, at: Date, roles: readonly Role[] = ['viewer']): Promise<{ id: string; keys: Record<string, string> }> {
  const org = await createOrganization(db, name, at)
  const keys: Record<string, string> = {}
  for (const role of roles) {
    const { secret } = await createApiKey(db, { organizationId: org.id, name: `${role} key`, role, createdByUserId: null, createdByKeyId: null, expiresAt: null }, at, BY_OPERATOR)
    keys[role] = secret
  }
  return { id: org.id, keys }
}

export async function insertAgent(db: Kysely<Database>, organizationId: string, handle: string, status: 'active' | 'discovered' | 'suspended', at: Date, lastSeenAt: Date | null): Promise<string> {
  const agentId = crypto.randomUUID()
  await sql`insert into agents (agent_id, organization_id, handle, labels, status, created_at, updated_at, last_seen_at)
    values (${agentId}, ${organizationId}, ${handle}, '{}'::jsonb, ${status}, ${at}, ${at}, ${lastSeenAt})`.execute(db)
  return agentId
}

export interface LoggedDecision {
  at: string
  agent?: string
  agentId?: string
  action?: string
  decision?: 'allow' | 'deny' | 'require_approval'
  reasons?: unknown[]
  /** The shadow decision; defaults to the decision itself. */
  monitor?: { decision: string; reasons: unknown[] }
}

export const rule = (name: string) => ({ rule: name })
export const byPolicy = (policy_id: string, version: number, effect: string, mode: 'enforce' | 'monitor' = 'enforce') => ({ policy_id, version, name: 'x', effect, mode })

/** Writes decisions to the log as the decision point would have (one transaction). */
export async function logDecisions(db: Kysely<Database>, organizationId: string, decisions: readonly LoggedDecision[]): Promise<void> {
  await db.transaction().execute(async (trx) => {
    for (const d of decisions) {
      const decision = d.decision ?? 'allow'
      const reasons = d.reasons ?? [rule('default_decision')]
      const monitor = d.monitor ?? { decision, reasons }
      await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256,
          decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
        values (${crypto.randomUUID()}, ${organizationId}, ${d.agentId ?? crypto.randomUUID()}, ${d.agent ?? 'bot-a'}, ${d.action ?? 'files.read'}, '', '{}'::jsonb, '{}'::jsonb,
          ${'0'.repeat(64)}, ${decision}, ${decision}, ${JSON.stringify(reasons)}::jsonb, ${JSON.stringify(monitor)}::jsonb, '[]'::jsonb, null, 1, 'key:test', ${d.at}::timestamptz)`.execute(trx)
    }
  })
}

export interface SeededApproval {
  agentId: string
  agent: string
  action?: string
  status: 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled' | 'consumed'
  createdAt: string
  expiresAt: string
  decidedAt?: string | null
  useBy?: string | null
}

export async function insertApproval(db: Kysely<Database>, organizationId: string, a: SeededApproval): Promise<string> {
  const approvalId = crypto.randomUUID()
  await sql`insert into approvals (approval_id, organization_id, decision_id, agent_id, agent_handle, action, resource, args, context, args_sha256, policies,
      approvers_required, approver_roles, use_within_seconds, status, created_at, expires_at, use_by, decided_at, requested_by, cancelled_by)
    values (${approvalId}, ${organizationId}, ${crypto.randomUUID()}, ${a.agentId}, ${a.agent}, ${a.action ?? 'payments.send'}, '', '{}'::jsonb, '{}'::jsonb, ${'0'.repeat(64)}, '[]'::jsonb,
      1, '["owner"]'::jsonb, 300, ${a.status}, ${a.createdAt}::timestamptz, ${a.expiresAt}::timestamptz, ${a.useBy ?? null}::timestamptz, ${a.decidedAt ?? null}::timestamptz, 'key:test',
      ${a.status === 'cancelled' ? 'user:x' : null})`.execute(db)
  return approvalId
}
