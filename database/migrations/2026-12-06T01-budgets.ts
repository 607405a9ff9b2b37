// Frozen in time: never import application code here.
// Budgets: the limits a policy carries (policies.limits, kept with each version) and their
// counters. One counter row per limit and scope (budget_counters): a calendar window's start and
// use, or a rolling window's buckets; the decision's transaction locks it, so concurrent
// decisions in any process count one after another. A require_approval decision's reservation is
// kept per approval (budget_reservations) so its release on deny, expiry or cancel is exact.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table policies add column limits jsonb not null default '[]'::jsonb`.execute(db)
  await sql`alter table policy_versions add column limits jsonb not null default '[]'::jsonb`.execute(db)
  await sql`
    create table budget_counters (
      organization_id uuid not null references organizations (id) on delete cascade,
      -- policy id, limit name, window and scope (engine/limits.ts counterKey)
      counter_key text not null,
      policy_id uuid not null,
      limit_name text not null,
      agent_id uuid,
      resource text,
      -- the limit's window ({type, tz, seconds}) as last counted
      limit_window jsonb not null,
      window_start timestamptz not null,
      used bigint not null default 0,
      -- rolling windows: {"<bucket start ms>": used}
      buckets jsonb,
      -- when the limit was last reached (one limit.reached event per calendar window)
      reached_at timestamptz,
      updated_at timestamptz not null,
      primary key (organization_id, counter_key)
    )
  `.execute(db)
  await sql`create index budget_counters_limit on budget_counters (organization_id, policy_id, limit_name)`.execute(db)
  await sql`
    create table budget_reservations (
      approval_id uuid not null references approvals (approval_id) on delete cascade,
      organization_id uuid not null,
      counter_key text not null,
      -- the calendar window's start, or the rolling bucket's (ms since the epoch as a timestamp)
      slot timestamptz not null,
      amount bigint not null,
      primary key (approval_id, counter_key)
    )
  `.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table budget_reservations`.execute(db)
  await sql`drop table budget_counters`.execute(db)
  await sql`alter table policy_versions drop column limits`.execute(db)
  await sql`alter table policies drop column limits`.execute(db)
}
