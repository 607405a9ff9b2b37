// The enabled upstream MCP servers of an organization as the gateway uses them: headers opened,
// kept in this process per organization until a change. A change made here drops the entry at
// once and is sent (NOTIFY) to the processes sharing the database, which drop theirs; while their
// LISTEN is down they cache nothing, so no process forwards to a server disabled, deleted or
// re-pointed elsewhere. Entries also age out, in case a notification was lost on the sender's side.
import type { Kysely } from 'kysely'
import { notify, startNotificationFeed, type NotificationFeed } from '../database/notifications.ts'
import type { Database } from '../database/schema.ts'
import type { Logger } from '../log.ts'
import { listMcpServers, type McpServer } from '../storage/mcp-servers.ts'
import { SecretBoxError } from '../auth/secret-box.ts'
import type { Secrets } from './secrets.ts'

/** Payloads are organization ids (UUIDs, unique across schemas and databases). */
export const MCP_SERVERS_CHANNEL = 'steward_mcp_servers'

const MAX_AGE_MS = 60_000
const MAX_ORGANIZATIONS = 10_000
/** More than any cap allows: the whole enabled set is read at once. */
const MAX_READ = 100_000

/** An enabled upstream server, ready to call. */
export interface Upstream {
  readonly serverId: string
  readonly organizationId: string
  /** The tool namespace: `<name>__<tool>`, action `mcp.<name>.<tool>`. */
  readonly name: string
  readonly url: string
  /**
   * The headers to send (names lower-case); null when the stored ones do not open (SECRETS_KEY
   * changed, or missing on PostgreSQL): then the server must not be called.
   */
  readonly headers: Readonly<Record<string, string>> | null
  /** The tool argument whose value is the decision's resource; null: the server's name. */
  readonly resourceArgument: string | null
}

export interface UpstreamDirectory {
  /** The organization's enabled servers, in name order. */
  enabledUpstreams(organizationId: string): Promise<readonly Upstream[]>
  /** The enabled server of that name; null when there is none (unknown or disabled alike). */
  findUpstream(organizationId: string, name: string): Promise<Upstream | null>
  /** The organization's servers changed here: drop its entry, tell the listeners and the other processes. */
  changed(organizationId: string): Promise<void>
  /** Runs `listener` with the organization's id after each change, here or (on PostgreSQL) elsewhere; returns the unsubscribe. */
  onChange(listener: (organizationId: string) => void): () => void
  /** Subscribes to the other processes' changes (PostgreSQL). */
  start(): void
  close(): Promise<void>
}

export interface UpstreamDirectoryDeps {
  readonly db: Kysely<Database>
  readonly logger: Logger
  readonly secrets: Secrets
  /** A PostgreSQL URL to LISTEN on; null: one process (PGlite), nothing to hear. */
  readonly listenUrl: string | null
  readonly clock: () => number
}

/** What AAD a server's sealed headers are bound to: its organization and id. */
export function headersContext(organizationId: string, serverId: string): string {
  return `mcp_servers.headers:${organizationId}:${serverId}`
}

/** The stored headers opened; null when they do not open. */
export function openHeaders(secrets: Secrets, server: Pick<McpServer, 'organization_id' | 'id' | 'headers_sealed'>): Record<string, string> | null {
  if (server.headers_sealed === null) return {}
  const box = secrets.box()
  if (!box) return null
  try {
    return JSON.parse(box.open(server.headers_sealed, headersContext(server.organization_id, server.id))) as Record<string, string>
  } catch (error) {
    if (error instanceof SecretBoxError || error instanceof SyntaxError) return null
    throw error
  }
}

function toUpstream(secrets: Secrets, server: McpServer): Upstream {
  const headers = openHeaders(secrets, server)
  return Object.freeze({
    serverId: server.id,
    organizationId: server.organization_id,
    name: server.name,
    url: server.url,
    headers: headers && Object.freeze(headers),
    resourceArgument: server.resource_argument,
  })
}

interface Entry {
  readonly upstreams: readonly Upstream[]
  readonly byName: ReadonlyMap<string, Upstream>
  readonly at: number
}

export function createUpstreamDirectory(deps: UpstreamDirectoryDeps): UpstreamDirectory {
  const entries = new Map<string, Entry>()
  const listeners = new Set<(organizationId: string) => void>()
  // Bumped by every drop: a read that began before a drop does not store what it read.
  let epoch = 0
  let feed: NotificationFeed | null = null

  const cacheEnabled = () => deps.listenUrl === null || (feed?.subscribed() ?? false)

  function drop(organizationId: string): void {
    epoch++
    entries.delete(organizationId)
    for (const listener of listeners) {
      try {
        listener(organizationId)
      } catch (error) {
        deps.logger.log('warn', 'an MCP server change listener failed', { error: (error as Error).message })
      }
    }
  }

  async function entryOf(organizationId: string): Promise<Entry> {
    const now = deps.clock()
    const cached = cacheEnabled() ? entries.get(organizationId) : undefined
    if (cached && now - cached.at < MAX_AGE_MS) return cached
    const startedAt = epoch
    const rows = await listMcpServers(deps.db, organizationId, { after: null, limit: MAX_READ, enabledOnly: true })
    const upstreams = Object.freeze(rows.map((row) => toUpstream(deps.secrets, row)))
    const entry: Entry = { upstreams, byName: new Map(upstreams.map((upstream) => [upstream.name, upstream])), at: now }
    if (startedAt === epoch && cacheEnabled()) {
      if (entries.size >= MAX_ORGANIZATIONS) entries.clear()
      entries.set(organizationId, entry)
    }
    return entry
  }

  return {
    async enabledUpstreams(organizationId) {
      return (await entryOf(organizationId)).upstreams
    },
    async findUpstream(organizationId, name) {
      return (await entryOf(organizationId)).byName.get(name) ?? null
    },
    async changed(organizationId) {
      drop(organizationId)
      if (deps.listenUrl === null) return
      try {
        await notify(deps.db, MCP_SERVERS_CHANNEL, organizationId)
      } catch (error) {
        // Peers still drop the entry when it ages out.
        deps.logger.log('warn', 'MCP server change notify failed', { code: (error as { code?: string }).code ?? 'error' })
      }
    },
    onChange(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    start() {
      if (feed || deps.listenUrl === null) return
      feed = startNotificationFeed(deps.listenUrl, MCP_SERVERS_CHANNEL, deps.logger, {
        onMessage: drop,
        onLoss: () => {
          epoch++
          entries.clear()
        },
        lossMessage: 'MCP server feed lost; upstream cache off until it is back',
      })
    },
    async close() {
      await feed?.close()
      feed = null
      entries.clear()
    },
  }
}
