// Frozen in time: never import application code here.
// Webhooks: endpoints, the delivery log and the fan-out cursor.
//
// The audit events (and the decision log, for decision.denied) are the outbox. One fan-out pass at
// a time (advisory lock) copies the events of every transaction below the oldest still running
// one (pg_snapshot_xmin) into webhook_deliveries, one row per subscribed endpoint, and moves
// `webhook_fanout.xid_through` up to that bound: an event whose transaction commits late, with a
// lower event_id than one already seen, is still below the bound when it is read, so none is
// skipped. Deliveries go out per endpoint in `seq` order; an endpoint is worked by one process at
// a time (its row is claimed with FOR UPDATE SKIP LOCKED and leased).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table webhooks (
      webhook_id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      url text not null,
      event_types jsonb not null,
      description text not null default '',
      -- The signing secret itself (whsec_…): signing needs it, a hash would not do.
      secret text not null,
      status text not null default 'active' check (status in ('active', 'disabled')),
      created_at timestamptz not null,
      created_by text not null,
      -- Events of transactions after this one go to the endpoint.
      created_xid bigint not null default (pg_current_xact_id()::text::bigint),
      disabled_at timestamptz,
      disabled_reason text,
      -- Set at the first failed attempt after a success; cleared by a success.
      failing_since timestamptz,
      -- One process works the endpoint at a time, until this instant.
      lease_until timestamptz
    )
  `.execute(db)
  await sql`create index webhooks_page on webhooks (organization_id, created_at desc, webhook_id desc)`.execute(db)

  await sql`
    create table webhook_deliveries (
      delivery_id uuid primary key,
      seq bigint generated always as identity,
      webhook_id uuid not null references webhooks (webhook_id) on delete cascade,
      organization_id uuid not null,
      event_id bigint,
      decision_id uuid,
      -- The webhook-id header: the same for every attempt (and a replay) of one event.
      message_id text not null,
      type text not null,
      occurred_at timestamptz not null,
      -- The exact body signed and sent.
      payload text not null,
      status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
      attempts integer not null default 0,
      next_attempt_at timestamptz,
      last_attempt_at timestamptz,
      last_status_code integer,
      last_error text,
      delivered_at timestamptz,
      created_at timestamptz not null,
      replay_of uuid
    )
  `.execute(db)
  await sql`create index webhook_deliveries_queue on webhook_deliveries (webhook_id, seq) where status = 'pending'`.execute(db)
  await sql`create index webhook_deliveries_page on webhook_deliveries (webhook_id, seq desc)`.execute(db)

  await sql`
    create table webhook_fanout (
      singleton boolean primary key default true check (singleton),
      xid_through bigint not null
    )
  `.execute(db)
  await sql`insert into webhook_fanout (xid_through) values (pg_snapshot_xmin(pg_current_snapshot())::text::bigint)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table webhook_fanout`.execute(db)
  await sql`drop table webhook_deliveries`.execute(db)
  await sql`drop table webhooks`.execute(db)
}
