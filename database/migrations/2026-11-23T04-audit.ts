// Frozen in time: never import application code here.
// The audit log and its seals.
//
// Every change is an `audit_events` row written in the same transaction as the change. Each row
// (and each decision) records the 64-bit id of the transaction that wrote it (`xid`). A seal
// covers, for one organization, every event and decision whose transaction id lies in
// [xid_from, xid_to), where xid_to is the oldest transaction still running when the sealer took
// its snapshot: every transaction below it has ended, so that set can never grow again, and a
// still-open transaction can never land inside a sealed range. Writers never wait for the sealer.
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table audit_events (
      event_id bigint generated always as identity primary key,
      -- No foreign key: the evidence outlives what it describes.
      organization_id uuid not null,
      occurred_at timestamptz not null,
      actor_type text not null check (actor_type in ('user', 'key', 'agent', 'operator', 'system')),
      actor_id text,
      type text not null check (type ~ '^[a-z_]+\\.[a-z_]+$'),
      target_type text not null,
      target_id text,
      data jsonb not null default '{}'::jsonb,
      request_id text,
      xid bigint not null default (pg_current_xact_id()::text::bigint)
    )
  `.execute(db)
  await sql`create index audit_events_page on audit_events (organization_id, event_id desc)`.execute(db)
  await sql`create index audit_events_type on audit_events (organization_id, type, event_id desc)`.execute(db)
  await sql`create index audit_events_xid on audit_events (organization_id, xid)`.execute(db)

  await sql`alter table decisions add column xid bigint not null default (pg_current_xact_id()::text::bigint)`.execute(db)
  await sql`create index decisions_xid on decisions (organization_id, xid)`.execute(db)

  await sql`
    create table audit_seals (
      organization_id uuid not null,
      seal_id bigint not null check (seal_id >= 1),
      xid_from bigint not null,
      xid_to bigint not null check (xid_to >= xid_from),
      events integer not null,
      decisions integer not null,
      -- Digests of the run's events and of its decisions, kept apart so a decision partition
      -- dropped by retention can be told from a deleted row.
      events_sha256 text not null check (events_sha256 ~ '^[0-9a-f]{64}$'),
      decisions_sha256 text not null check (decisions_sha256 ~ '^[0-9a-f]{64}$'),
      prev_sha256 text not null check (prev_sha256 ~ '^[0-9a-f]{64}$'),
      sha256 text not null check (sha256 ~ '^[0-9a-f]{64}$'),
      sealed_at timestamptz not null,
      primary key (organization_id, seal_id)
    )
  `.execute(db)

  // Export-before-delete: retention may only delete what an export has covered.
  await sql`
    create table audit_exports (
      organization_id uuid not null,
      through_event_id bigint not null,
      format text not null,
      exported_at timestamptz not null,
      exported_by text not null
    )
  `.execute(db)
  await sql`create index audit_exports_org on audit_exports (organization_id, through_event_id desc)`.execute(db)

  await sql`alter table organizations add column audit_retention_days integer not null default 400 check (audit_retention_days between 1 and 3650)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table organizations drop column audit_retention_days`.execute(db)
  await sql`drop table audit_exports`.execute(db)
  await sql`drop table audit_seals`.execute(db)
  await sql`drop index decisions_xid`.execute(db)
  await sql`alter table decisions drop column xid`.execute(db)
  await sql`drop table audit_events`.execute(db)
}
