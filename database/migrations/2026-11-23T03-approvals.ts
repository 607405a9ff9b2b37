// Frozen in time: never import application code here.
// Approvals: a require_approval decision creates one, bound to the exact action (agent, action,
// resource and the SHA-256 of the canonical arguments); people vote on it; the agent uses it
// once. Expiry is a state of its own, written by a sweeper and enforced at read time too.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('approvals')
    .addColumn('approval_id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    // The decision log is partitioned and pruned by retention: no foreign key to it.
    .addColumn('decision_id', 'uuid', (col) => col.notNull())
    .addColumn('agent_id', 'uuid', (col) => col.notNull().references('agents.agent_id').onDelete('cascade'))
    .addColumn('agent_handle', 'text', (col) => col.notNull())
    .addColumn('action', 'text', (col) => col.notNull())
    .addColumn('resource', 'text', (col) => col.notNull())
    .addColumn('args', 'jsonb', (col) => col.notNull())
    .addColumn('context', 'jsonb', (col) => col.notNull())
    .addColumn('args_sha256', 'text', (col) => col.notNull())
    .addColumn('policies', 'jsonb', (col) => col.notNull())
    .addColumn('approvers_required', 'integer', (col) => col.notNull().check(sql`approvers_required >= 1`))
    .addColumn('approver_roles', 'jsonb', (col) => col.notNull())
    .addColumn('use_within_seconds', 'integer', (col) => col.notNull().check(sql`use_within_seconds >= 1`))
    .addColumn('status', 'text', (col) =>
      col.notNull().check(sql`status in ('pending', 'approved', 'denied', 'expired', 'cancelled', 'consumed')`),
    )
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('expires_at', 'timestamptz', (col) => col.notNull())
    .addColumn('use_by', 'timestamptz')
    .addColumn('decided_at', 'timestamptz')
    .addColumn('consumed_at', 'timestamptz')
    .addColumn('consumed_decision_id', 'uuid')
    .addColumn('requested_by', 'text', (col) => col.notNull())
    .addColumn('cancelled_by', 'text')
    .execute()
  await db.schema.createIndex('approvals_page').on('approvals').columns(['organization_id', 'status', 'created_at']).execute()
  await db.schema.createIndex('approvals_due').on('approvals').column('expires_at').where(sql.ref('status'), '=', 'pending').execute()

  await db.schema
    .createTable('approval_votes')
    .addColumn('approval_id', 'uuid', (col) => col.notNull().references('approvals.approval_id').onDelete('cascade'))
    .addColumn('user_id', 'uuid', (col) => col.notNull())
    .addColumn('vote', 'text', (col) => col.notNull().check(sql`vote in ('approve', 'deny')`))
    .addColumn('note', 'text')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addPrimaryKeyConstraint('approval_votes_pk', ['approval_id', 'user_id'])
    .execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('approval_votes').execute()
  await db.schema.dropTable('approvals').execute()
}
