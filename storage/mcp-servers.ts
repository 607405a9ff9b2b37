// Upstream MCP servers: create (under the organization's cap), list, find, change and delete, each
// change with its audit event in the same transaction. Headers arrive already sealed
// (services/mcp-servers.ts): this module stores and returns the sealed text and never sees a value.
// Every query is scoped by the organization. Knows nothing of HTTP.
import type { Kysely, Selectable, Transaction } from 'kysely'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import type { McpServerTable } from '../database/mcp-schema.ts'
import type { Database } from '../database/schema.ts'

export type McpServer = Selectable<McpServerTable>

/** What a client sets on a server (headers as the sealed text and the names beside it). */
export type McpServerFields = Pick<McpServer, 'name' | 'url' | 'headers_sealed' | 'header_names' | 'resource_argument' | 'enabled'>

type Db = Kysely<Database> | Transaction<Database>

const COLUMNS = ['id', 'organization_id', 'name', 'url', 'headers_sealed', 'header_names', 'resource_argument', 'enabled', 'created_by', 'created_at', 'updated_at'] as const

/** Thrown when the name is already taken in the organization. */
export class ServerNameTakenError extends Error {
  override name = 'ServerNameTakenError'
}

/** What an event says about a server: never a header value, nor the sealed text. */
function serverData(server: McpServer): Record<string, unknown> {
  return { name: server.name, url: server.url, header_names: server.header_names, resource_argument: server.resource_argument, enabled: server.enabled }
}

async function nameTaken(db: Db, organizationId: string, name: string, except: string | null): Promise<boolean> {
  let query = db.selectFrom('mcp_servers').select('id').where('organization_id', '=', organizationId).where('name', '=', name)
  if (except !== null) query = query.where('id', '<>', except)
  return (await query.executeTakeFirst()) !== undefined
}

async function countServers(db: Db, organizationId: string): Promise<number> {
  const row = await db.selectFrom('mcp_servers').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', organizationId).executeTakeFirstOrThrow()
  return Number(row.n)
}

/**
 * Creates a server with the id given (its sealed headers are bound to it), under the cap;
 * ServerNameTakenError when the name is in use. Taken under the organization's row lock, so
 * parallel creations neither pass the cap together nor race for one name.
 */
export async function createMcpServer(
  db: Kysely<Database>,
  organizationId: string,
  id: string,
  fields: McpServerFields,
  createdBy: string,
  now: Date,
  cap: Cap,
  by: AuditBy,
): Promise<McpServer> {
  return db.transaction().execute(async (trx) => {
    await lockOrganization(trx, organizationId)
    if (await nameTaken(trx, organizationId, fields.name, null)) throw new ServerNameTakenError(`An MCP server named ${fields.name} already exists`)
    assertBelowCap(await countServers(trx, organizationId), cap)
    const server = await trx
      .insertInto('mcp_servers')
      .values({ ...fields, id, organization_id: organizationId, created_by: createdBy, created_at: now, updated_at: now })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    await recordEvent(trx, eventBy(by, organizationId, 'mcp_server.created', { type: 'mcp_server', id }, serverData(server), now))
    return server
  })
}

/** In name order, after `after` (a name) when given; `enabledOnly` leaves out disabled ones. */
export async function listMcpServers(db: Db, organizationId: string, page: { after: string | null; limit: number; enabledOnly?: boolean }): Promise<McpServer[]> {
  let query = db.selectFrom('mcp_servers').select(COLUMNS).where('organization_id', '=', organizationId)
  if (page.enabledOnly) query = query.where('enabled', '=', true)
  if (page.after !== null) query = query.where('name', '>', page.after)
  return query.orderBy('name').limit(page.limit).execute()
}

export async function findMcpServer(db: Db, organizationId: string, id: string): Promise<McpServer | null> {
  const row = await db.selectFrom('mcp_servers').select(COLUMNS).where('organization_id', '=', organizationId).where('id', '=', id).executeTakeFirst()
  return row ?? null
}

export async function findMcpServerByName(db: Db, organizationId: string, name: string): Promise<McpServer | null> {
  const row = await db.selectFrom('mcp_servers').select(COLUMNS).where('organization_id', '=', organizationId).where('name', '=', name).executeTakeFirst()
  return row ?? null
}

/**
 * Changes a server: `change` gets the current row (locked until the transaction ends) and gives
 * the fields to set, so a change that depends on the stored headers cannot lose a parallel one.
 * Null when the server is not the organization's; ServerNameTakenError for a name in use.
 */
export async function updateMcpServer(
  db: Kysely<Database>,
  organizationId: string,
  id: string,
  change: (current: McpServer) => Partial<McpServerFields>,
  now: Date,
  by: AuditBy,
): Promise<McpServer | null> {
  return db.transaction().execute(async (trx) => {
    // The organization's lock first (as creation takes it), so a rename and a creation of the same name are serialized.
    await lockOrganization(trx, organizationId)
    const current = await trx.selectFrom('mcp_servers').select(COLUMNS).where('organization_id', '=', organizationId).where('id', '=', id).forUpdate().executeTakeFirst()
    if (!current) return null
    const fields = change(current)
    if (fields.name !== undefined && fields.name !== current.name && (await nameTaken(trx, organizationId, fields.name, id))) {
      throw new ServerNameTakenError(`An MCP server named ${fields.name} already exists`)
    }
    const server = await trx
      .updateTable('mcp_servers')
      .set({ ...fields, updated_at: now })
      .where('organization_id', '=', organizationId)
      .where('id', '=', id)
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    const changed = (Object.keys(fields) as (keyof McpServerFields)[]).map((key) => (key === 'headers_sealed' || key === 'header_names' ? 'headers' : key))
    await recordEvent(trx, eventBy(by, organizationId, 'mcp_server.updated', { type: 'mcp_server', id }, { ...serverData(server), changed: [...new Set(changed)] }, now))
    return server
  })
}

/** Deletes a server; false when it is not the organization's. */
export async function deleteMcpServer(db: Kysely<Database>, organizationId: string, id: string, now: Date, by: AuditBy): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.deleteFrom('mcp_servers').where('organization_id', '=', organizationId).where('id', '=', id).returning(COLUMNS).executeTakeFirst()
    if (!row) return false
    await recordEvent(trx, eventBy(by, organizationId, 'mcp_server.deleted', { type: 'mcp_server', id }, serverData(row), now))
    return true
  })
}
