// Frozen in time: never import application code here.
// The MCP gateway: each organization's upstream MCP servers, and where a decision came from.
//
// mcp_servers.name is the tool namespace (`<name>__<tool>`, `mcp.<name>.<tool>`): a handle
// without underscores, so a namespaced tool name splits at its first `__` one way only. The
// headers sent upstream (credentials) are kept only sealed (AES-256-GCM under the server's secrets
// key, auth/secret-box.ts): a dump of the database alone does not reveal them. Their names are
// kept in the clear, so the API can say which are set.
//
// decisions.via: null for POST /decisions, 'mcp' for the gateway, 'toolhive' for the ToolHive
// authorizer route. Nullable without a default, so adding it rewrites no partition; no check
// constraint, which PostgreSQL would plan again for every decision written (the writers set it).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table mcp_servers (
      id uuid primary key,
      organization_id uuid not null references organizations (id) on delete cascade,
      name text not null check (name ~ '^[a-z][a-z0-9-]{0,31}$'),
      url text not null,
      headers_sealed text,
      header_names text[] not null default '{}',
      -- The tool argument whose value becomes the decision's resource; null: the server's name.
      resource_argument text,
      enabled boolean not null default true,
      created_by text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (organization_id, name)
    )
  `.execute(db)
  await sql`alter table decisions add column via text`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table decisions drop column via`.execute(db)
  await sql`drop table mcp_servers`.execute(db)
}
