// The upstream MCP server registry as use cases: create, change and delete a server of an
// organization (the SSRF guard on its URL, its headers sealed before they reach storage, its cap),
// and the gateway's lookups (services/mcp-upstreams.ts). Header values go in and never come out
// of here except to the gateway: the API shows their names only. Refusals are HttpErrors.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import type { AuditBy } from '../storage/audit.ts'
import { CapReachedError, type Cap } from '../storage/caps.ts'
import {
  createMcpServer,
  deleteMcpServer,
  findMcpServer,
  listMcpServers,
  ServerNameTakenError,
  updateMcpServer,
  type McpServer,
  type McpServerFields,
} from '../storage/mcp-servers.ts'
import { resolvedUrlProblem, type OutboundPolicy } from './outbound-url.ts'
import { createUpstreamDirectory, headersContext, openHeaders, type UpstreamDirectory } from './mcp-upstreams.ts'
import { NO_SECRETS_KEY, type Secrets } from './secrets.ts'

export type { Upstream } from './mcp-upstreams.ts'

export const MCP_SERVER_NOT_FOUND = 'MCP server not found'
const HEADERS_UNREADABLE = 'The stored headers of this server do not open with the current SECRETS_KEY; send "headers": null to clear them, then set them again'
/** How long a URL's host name may take to resolve when it is checked at a write. */
const RESOLVE_TIMEOUT_MS = 2_000

/** A server as a client creates it (already checked field by field; header names as given). */
export interface McpServerInput {
  readonly name: string
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly resource_argument: string | null
  readonly enabled: boolean
}

/**
 * The fields a PATCH names. `headers` merges by name: a value sets that header, null removes it;
 * `headers: null` removes them all.
 */
export interface McpServerChanges {
  readonly name?: string
  readonly url?: string
  readonly headers?: Readonly<Record<string, string | null>> | null
  readonly resource_argument?: string | null
  readonly enabled?: boolean
}

/** Who writes, as the audit log and created_by record them. */
export interface Writer {
  readonly by: AuditBy
  /** "user:<uuid>" or "key:<uuid>". */
  readonly createdBy: string
}

export interface McpServerService extends UpstreamDirectory {
  /** In name order, after the name `after`. */
  list(organizationId: string, page: { after: string | null; limit: number }): Promise<McpServer[]>
  get(organizationId: string, serverId: string): Promise<McpServer | null>
  /** 400 for a refused URL or headers without a key, 409 for a taken name or the cap. */
  create(organizationId: string, input: McpServerInput, writer: Writer, now: Date): Promise<McpServer>
  /** Null when the server is not the organization's. */
  update(organizationId: string, serverId: string, changes: McpServerChanges, writer: Writer, now: Date): Promise<McpServer | null>
  /** False when the server is not the organization's. */
  remove(organizationId: string, serverId: string, writer: Writer, now: Date): Promise<boolean>
}

export interface McpServerServiceDeps {
  readonly db: Kysely<Database>
  readonly logger: Logger
  readonly clock: () => number
  readonly config: Pick<Config, 'mcpAllowPrivate' | 'maxMcpServersPerOrg'>
  readonly secrets: Secrets
  /** A PostgreSQL URL to LISTEN on for other processes' changes; null: none. */
  readonly listenUrl: string | null
}

/** The cap on an organization's MCP servers. */
export function mcpServerCap(config: Pick<Config, 'maxMcpServersPerOrg'>): Cap {
  return { limit: config.maxMcpServersPerOrg, what: 'MCP servers', setting: 'MAX_MCP_SERVERS_PER_ORG' }
}

/** Header names lower-cased; two that differ only in case are refused. */
function lowerCased<T>(headers: Readonly<Record<string, T>>): Map<string, T> {
  const out = new Map<string, T>()
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase()
    if (out.has(lower)) throw new HttpError(400, `Field headers names ${lower} twice`)
    out.set(lower, value)
  }
  return out
}

/** Storage refusals as answers: a taken name and a reached cap are 409. */
async function mapped<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof ServerNameTakenError || error instanceof CapReachedError) throw new HttpError(409, error.message)
    throw error
  }
}

export function createMcpServerService(deps: McpServerServiceDeps): McpServerService {
  const directory = createUpstreamDirectory(deps)
  const policy: OutboundPolicy = { allowPrivate: deps.config.mcpAllowPrivate, setting: 'MCP_ALLOW_PRIVATE' }

  async function checkUrl(url: string): Promise<void> {
    const problem = await resolvedUrlProblem(new URL(url), 'url', policy, RESOLVE_TIMEOUT_MS)
    if (problem) throw new HttpError(400, problem)
  }

  /** The stored form of a set of headers: sealed for the server's row, and their names. */
  function sealed(organizationId: string, serverId: string, headers: ReadonlyMap<string, string>): Pick<McpServerFields, 'headers_sealed' | 'header_names'> {
    if (headers.size === 0) return { headers_sealed: null, header_names: [] }
    const box = deps.secrets.box()
    if (!box) throw new HttpError(400, NO_SECRETS_KEY)
    const names = [...headers.keys()].sort()
    const plain = JSON.stringify(Object.fromEntries(names.map((name) => [name, headers.get(name)!])))
    return { headers_sealed: box.seal(plain, headersContext(organizationId, serverId)), header_names: names }
  }

  /** The headers after a PATCH's merge, computed on the locked current row. */
  function mergedHeaders(current: McpServer, given: Readonly<Record<string, string | null>>): Map<string, string> {
    const changes = lowerCased(given)
    const stored = openHeaders(deps.secrets, current)
    if (stored === null) {
      if (!deps.secrets.box()) throw new HttpError(400, NO_SECRETS_KEY)
      throw new HttpError(409, HEADERS_UNREADABLE)
    }
    const next = new Map(Object.entries(stored))
    for (const [name, value] of changes) {
      if (value === null) next.delete(name)
      else next.set(name, value)
    }
    return next
  }

  return {
    ...directory,
    list: (organizationId, page) => listMcpServers(deps.db, organizationId, page),
    get: (organizationId, serverId) => findMcpServer(deps.db, organizationId, serverId),

    async create(organizationId, input, writer, now) {
      await checkUrl(input.url)
      const id = crypto.randomUUID()
      const fields: McpServerFields = {
        name: input.name,
        url: input.url,
        ...sealed(organizationId, id, lowerCased(input.headers)),
        resource_argument: input.resource_argument,
        enabled: input.enabled,
      }
      const server = await mapped(() => createMcpServer(deps.db, organizationId, id, fields, writer.createdBy, now, mcpServerCap(deps.config), writer.by))
      await directory.changed(organizationId)
      return server
    },

    async update(organizationId, serverId, changes, writer, now) {
      if (changes.url !== undefined) await checkUrl(changes.url)
      const server = await mapped(() =>
        updateMcpServer(
          deps.db,
          organizationId,
          serverId,
          (current) => {
            const fields: Partial<McpServerFields> = {}
            if (changes.name !== undefined) fields.name = changes.name
            if (changes.url !== undefined) fields.url = changes.url
            if (changes.resource_argument !== undefined) fields.resource_argument = changes.resource_argument
            if (changes.enabled !== undefined) fields.enabled = changes.enabled
            if (changes.headers === null) Object.assign(fields, sealed(organizationId, serverId, new Map()))
            else if (changes.headers !== undefined) Object.assign(fields, sealed(organizationId, serverId, mergedHeaders(current, changes.headers)))
            return fields
          },
          now,
          writer.by,
        ),
      )
      if (server) await directory.changed(organizationId)
      return server
    },

    async remove(organizationId, serverId, writer, now) {
      const deleted = await deleteMcpServer(deps.db, organizationId, serverId, now, writer.by)
      if (deleted) await directory.changed(organizationId)
      return deleted
    },
  }
}
