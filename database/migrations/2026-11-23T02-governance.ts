// Frozen in time: never import application code here.
// The decision point: agents (and keys bound to one agent), organization settings with the
// ruleset revision, policy conditions in CEL with approval settings, immutable policy versions,
// and the decision log (partitioned by month so that retention drops whole partitions).
//
// Policies written before this migration carried a free-form `conditions` object that nothing
// evaluated. It is kept, renamed `legacy_conditions`, and translated so that no agent gains
// anything: a deny or require_approval policy with such an object now applies without a
// condition (it restricts more, never less), and an allow policy with one gets the condition
// `false` (it never allows until someone writes a real condition).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('organizations')
    .addColumn('default_decision', 'text', (col) =>
      col.notNull().defaultTo('deny').check(sql`default_decision in ('deny', 'require_approval', 'allow')`),
    )
    .addColumn('unknown_agents', 'text', (col) => col.notNull().defaultTo('deny').check(sql`unknown_agents in ('deny', 'evaluate')`))
    .addColumn('decision_retention_days', 'integer', (col) =>
      col.notNull().defaultTo(400).check(sql`decision_retention_days between 1 and 3650`),
    )
    // Bumped in the same transaction as any change to policies, agents or these settings; the
    // compiled policy set of an organization is cached under it.
    .addColumn('ruleset_revision', 'integer', (col) => col.notNull().defaultTo(0))
    .addColumn('updated_at', 'timestamptz')
    .execute()

  await db.schema
    .createTable('agents')
    .addColumn('agent_id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('handle', 'text', (col) => col.notNull().check(sql`handle ~ '^[a-z0-9][a-z0-9._-]{0,63}$'`))
    .addColumn('display_name', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('description', 'text', (col) => col.notNull().defaultTo(''))
    .addColumn('owner_user_id', 'uuid', (col) => col.references('users.id').onDelete('set null'))
    .addColumn('labels', 'jsonb', (col) => col.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('status', 'text', (col) => col.notNull().check(sql`status in ('active', 'suspended', 'discovered')`))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull())
    .addColumn('last_seen_at', 'timestamptz')
    .addUniqueConstraint('agents_handle', ['organization_id', 'handle'])
    .execute()
  await db.schema.createIndex('agents_page').on('agents').columns(['organization_id', 'created_at', 'agent_id']).execute()

  // A key bound to one agent: it may only ask decisions for that agent (and wait on its approvals).
  await db.schema
    .alterTable('api_keys')
    .addColumn('agent_id', 'uuid', (col) => col.references('agents.agent_id').onDelete('cascade'))
    .execute()
  await db.schema.createIndex('api_keys_agent').on('api_keys').column('agent_id').execute()

  await db.schema.alterTable('policies').renameColumn('conditions', 'legacy_conditions').execute()
  await db.schema
    .alterTable('policies')
    .addColumn('condition', 'text')
    .addColumn('approval', 'jsonb')
    .addColumn('archived_at', 'timestamptz')
    .execute()
  await sql`
    update policies set condition = 'false'
    where effect = 'allow' and legacy_conditions is not null
      and legacy_conditions <> 'null'::jsonb and legacy_conditions <> '{}'::jsonb
  `.execute(db)

  await db.schema
    .createTable('policy_versions')
    .addColumn('policy_id', 'uuid', (col) => col.notNull().references('policies.policy_id').onDelete('cascade'))
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('description', 'text', (col) => col.notNull())
    .addColumn('effect', 'text', (col) => col.notNull())
    .addColumn('agents', 'jsonb', (col) => col.notNull())
    .addColumn('actions', 'jsonb', (col) => col.notNull())
    .addColumn('resources', 'jsonb', (col) => col.notNull())
    .addColumn('condition', 'text')
    .addColumn('approval', 'jsonb')
    .addColumn('mode', 'text', (col) => col.notNull())
    .addColumn('enabled', 'boolean', (col) => col.notNull())
    .addColumn('archived', 'boolean', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('created_by', 'text', (col) => col.notNull())
    .addPrimaryKeyConstraint('policy_versions_pk', ['policy_id', 'version'])
    .execute()
  // The version each existing policy is at becomes its first recorded version.
  await sql`
    insert into policy_versions (policy_id, version, organization_id, name, description, effect, agents, actions,
      resources, condition, approval, mode, enabled, archived, created_at, created_by)
    select policy_id, version, organization_id, name, description, effect, agents, actions,
      resources, condition, approval, mode, enabled, false, updated_at, created_by
    from policies
  `.execute(db)

  // The decision log. Partitioned by evaluated_at: the application creates monthly partitions
  // ahead of time; the default partition catches anything outside them, so a write never fails
  // for want of a partition. A partitioned table's unique keys must include the partition key,
  // hence (decision_id, evaluated_at); decision ids are random UUIDs.
  await sql`
    create table decisions (
      decision_id uuid not null,
      organization_id uuid not null references organizations (id) on delete cascade,
      agent_id uuid not null,
      agent_handle text not null,
      action text not null,
      resource text not null,
      args jsonb not null,
      context jsonb not null,
      args_sha256 text not null,
      decision text not null check (decision in ('allow', 'deny', 'require_approval')),
      policy_decision text not null check (policy_decision in ('allow', 'deny', 'require_approval')),
      reasons jsonb not null,
      monitor jsonb not null,
      errors jsonb not null,
      approval_id uuid,
      ruleset_revision integer not null,
      requested_by text not null,
      evaluated_at timestamptz not null,
      primary key (decision_id, evaluated_at)
    ) partition by range (evaluated_at)
  `.execute(db)
  await sql`create table decisions_default partition of decisions default`.execute(db)
  await sql`create index decisions_page on decisions (organization_id, evaluated_at desc, decision_id desc)`.execute(db)
  await sql`create index decisions_agent on decisions (organization_id, agent_id, evaluated_at desc)`.execute(db)
  await sql`create index decisions_id on decisions (decision_id)`.execute(db)

  // Idempotency: the first answer for (credential, key) within 24 hours. Kept apart from the
  // partitioned log so the key can be unique.
  await db.schema
    .createTable('decision_idempotency')
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('requested_by', 'text', (col) => col.notNull())
    .addColumn('idempotency_key', 'text', (col) => col.notNull())
    .addColumn('decision_id', 'uuid', (col) => col.notNull())
    .addColumn('request_sha256', 'text', (col) => col.notNull())
    .addColumn('response', 'jsonb', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addPrimaryKeyConstraint('decision_idempotency_pk', ['organization_id', 'requested_by', 'idempotency_key'])
    .execute()
  await db.schema.createIndex('decision_idempotency_created').on('decision_idempotency').column('created_at').execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('decision_idempotency').execute()
  await db.schema.dropTable('decisions').cascade().execute()
  await db.schema.dropTable('policy_versions').execute()
  await db.schema.alterTable('policies').dropColumn('archived_at').dropColumn('approval').dropColumn('condition').execute()
  await db.schema.alterTable('policies').renameColumn('legacy_conditions', 'conditions').execute()
  await db.schema.dropIndex('api_keys_agent').execute()
  await db.schema.alterTable('api_keys').dropColumn('agent_id').execute()
  await db.schema.dropTable('agents').execute()
  await db.schema
    .alterTable('organizations')
    .dropColumn('updated_at')
    .dropColumn('ruleset_revision')
    .dropColumn('decision_retention_days')
    .dropColumn('unknown_agents')
    .dropColumn('default_decision')
    .execute()
}
