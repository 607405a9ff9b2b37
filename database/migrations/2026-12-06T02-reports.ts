// Frozen in time: never import application code here.
// Reports. decision_rollup: the decision log counted per organization, UTC hour, dimension
// (outcome, agent, action, policy, shadow, shadow_change), key and outcome, filled by a background
// pass from the rows whose transaction id is below decision_rollup_state.xid_upto; reports add the
// raw rows above it, so they are exact whether the pass is late or not. lead_duplicate_counts:
// lead submissions refused as duplicates (409), per hour and list (nothing recorded them before).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table decision_rollup (
      organization_id uuid not null references organizations (id) on delete cascade,
      dimension text not null,
      hour timestamptz not null,
      key text not null,
      decision text not null,
      count bigint not null,
      primary key (organization_id, dimension, hour, key, decision)
    )`.execute(db)
  await sql`
    create table decision_rollup_state (
      organization_id uuid primary key references organizations (id) on delete cascade,
      xid_upto bigint not null
    )`.execute(db)
  await sql`
    create table lead_duplicate_counts (
      list text not null,
      hour timestamptz not null,
      count bigint not null,
      primary key (list, hour)
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table lead_duplicate_counts`.execute(db)
  await sql`drop table decision_rollup_state`.execute(db)
  await sql`drop table decision_rollup`.execute(db)
}
