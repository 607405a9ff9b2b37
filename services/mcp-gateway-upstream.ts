// The gateway's side toward upstream MCP servers: one connected client of the official SDK per
// upstream (kept while its record is unchanged, so a call costs one request, not a handshake),
// the upstream's tool list kept for a while and dropped when the upstream says it changed, and
// each call bounded by MCP_UPSTREAM_TIMEOUT_MS. Connections go through the SSRF-guarded fetch.
// A failure never throws past here as anything but an UpstreamError with a message a person can
// read; a client that failed is dropped, so the next call connects afresh. A call is never retried.
import { Client, StreamableHTTPClientTransport, type CallToolResult, type Tool } from '@modelcontextprotocol/client'
import type { Logger } from '../log.ts'
import { createGuardedFetch } from './mcp-gateway-fetch.ts'
import { tracedFetch, type Telemetry } from './telemetry.ts'
import type { Upstream } from './mcp-upstreams.ts'
import { REFUSED_CODE, type OutboundPolicy } from './outbound-url.ts'

/** How long an upstream's tool list is used without asking again (list_changed drops it sooner). */
const TOOLS_TTL_MS = 30_000
const CLIENT_INFO = { name: 'steward-mcp-gateway', version: '1.0.0' }

/** An upstream that could not be reached, refused, timed out or answered something that is not MCP. */
export class UpstreamError extends Error {
  override name = 'UpstreamError'
  /** True when the call may have run upstream (it left for the upstream and no usable answer came back). */
  readonly mayHaveRun: boolean
  constructor(message: string, mayHaveRun: boolean) {
    super(message)
    this.mayHaveRun = mayHaveRun
  }
}

export interface UpstreamClients {
  /** The upstream's tools (kept for a while); UpstreamError when it cannot be listed. */
  listTools(upstream: Upstream): Promise<readonly Tool[]>
  /** Calls one tool upstream, once; its result as the upstream gave it, or UpstreamError. */
  /** `traceparent`: the trace the call continues (sent as `_meta.traceparent`), or null. */
  callTool(upstream: Upstream, tool: string, args: Record<string, unknown>, signal: AbortSignal | null, traceparent?: string | null): Promise<CallToolResult>
  /** Runs `listener` with the organization whose upstream says its tools changed. */
  onToolsChanged(listener: (organizationId: string) => void): () => void
  /** Drops (and disconnects) the clients of an organization's upstreams, e.g. after its registry changed. */
  forget(organizationId: string): void
  close(): Promise<void>
}

export interface UpstreamClientsDeps {
  readonly logger: Logger
  readonly timeoutMs: number
  readonly outbound: OutboundPolicy
  readonly clock: () => number
  /** With tracing on, each request upstream carries a traceparent (services/telemetry.ts). */
  readonly telemetry?: Telemetry | undefined
}

interface Entry {
  /** What the client was built for: a changed URL or headers makes a new one. */
  readonly fingerprint: string
  readonly organizationId: string
  readonly client: Promise<Client>
  tools: { at: number; list: readonly Tool[] } | null
}

function fingerprintOf(upstream: Upstream): string {
  return JSON.stringify([upstream.url, upstream.headers])
}

/** A message for a failure: the SSRF guard's own words, a timeout, or the error's code and text. */
function describe(upstream: Upstream, error: unknown, timeoutMs: number): { message: string; refused: boolean } {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  const code = (error as { code?: string }).code ?? cause?.code
  const text = error instanceof Error ? error.message : String(error)
  if (code === REFUSED_CODE || cause?.code === REFUSED_CODE) return { message: `the upstream server ${upstream.name} is refused: ${cause?.message ?? text}`, refused: true }
  if (code === 'REQUEST_TIMEOUT' || /timed? ?out/i.test(text)) return { message: `the upstream server ${upstream.name} did not answer within ${timeoutMs} ms`, refused: false }
  return { message: `the upstream server ${upstream.name} failed: ${text.slice(0, 300)}`, refused: false }
}

export function createUpstreamClients(deps: UpstreamClientsDeps): UpstreamClients {
  const guarded = createGuardedFetch(deps.outbound)
  const upstreamFetch = tracedFetch(guarded.fetch, deps.telemetry, 'mcp.upstream')
  const entries = new Map<string, Entry>()
  const listeners = new Set<(organizationId: string) => void>()

  function toolsChanged(serverId: string, organizationId: string): void {
    const entry = entries.get(serverId)
    if (entry) entry.tools = null
    for (const listener of listeners) listener(organizationId)
  }

  function drop(serverId: string, entry: Entry): void {
    if (entries.get(serverId) === entry) entries.delete(serverId)
    entry.client.then((client) => client.close()).catch(() => {})
  }

  function entryFor(upstream: Upstream): Entry {
    if (upstream.headers === null) throw new UpstreamError(`the headers of upstream server ${upstream.name} cannot be opened with this server's SECRETS_KEY; an admin must set them again`, false)
    const fingerprint = fingerprintOf(upstream)
    const found = entries.get(upstream.serverId)
    if (found && found.fingerprint === fingerprint) return found
    if (found) drop(upstream.serverId, found)
    const client = new Client(CLIENT_INFO, {
      versionNegotiation: { mode: 'auto' },
      listChanged: { tools: { autoRefresh: false, debounceMs: 0, onChanged: () => toolsChanged(upstream.serverId, upstream.organizationId) } },
    })
    const transport = new StreamableHTTPClientTransport(new URL(upstream.url), { fetch: upstreamFetch, requestInit: { headers: { ...upstream.headers } }, redirectPolicy: 'same-origin' })
    const entry: Entry = {
      fingerprint,
      organizationId: upstream.organizationId,
      client: client.connect(transport, { timeout: deps.timeoutMs }).then(() => client),
      tools: null,
    }
    entries.set(upstream.serverId, entry)
    // A client that could not connect is not kept: the next call tries again.
    entry.client.catch(() => drop(upstream.serverId, entry))
    return entry
  }

  return {
    async listTools(upstream) {
      const entry = entryFor(upstream)
      const now = deps.clock()
      if (entry.tools && now - entry.tools.at < TOOLS_TTL_MS) return entry.tools.list
      try {
        const client = await entry.client
        const { tools } = await client.listTools(undefined, { timeout: deps.timeoutMs, cacheMode: 'refresh' })
        entry.tools = { at: now, list: tools }
        return tools
      } catch (error) {
        drop(upstream.serverId, entry)
        const { message } = describe(upstream, error, deps.timeoutMs)
        deps.logger.log('warn', 'MCP upstream tools not listed', { server: upstream.name, organizationId: upstream.organizationId, error: message })
        throw new UpstreamError(message, false)
      }
    },
    async callTool(upstream, tool, args, signal, traceparent) {
      const entry = entryFor(upstream)
      let sent = false
      try {
        const client = await entry.client
        sent = true
        return await client.callTool({ name: tool, arguments: args, ...(traceparent ? { _meta: { traceparent } } : {}) }, { timeout: deps.timeoutMs, ...(signal ? { signal } : {}) })
      } catch (error) {
        drop(upstream.serverId, entry)
        const { message, refused } = describe(upstream, error, deps.timeoutMs)
        deps.logger.log('warn', 'MCP upstream call failed', { server: upstream.name, organizationId: upstream.organizationId, tool: tool.slice(0, 128), error: message })
        throw new UpstreamError(message, sent && !refused)
      }
    },
    onToolsChanged(listener) {
      listeners.add(listener)
      return () => listeners.delete(listener)
    },
    forget(organizationId) {
      for (const [serverId, entry] of entries) if (entry.organizationId === organizationId) drop(serverId, entry)
    },
    async close() {
      const all = [...entries.entries()]
      entries.clear()
      await Promise.all(all.map(([, entry]) => entry.client.then((client) => client.close()).catch(() => {})))
      guarded.close()
    },
  }
}
