// Steward: the composition root and the entry script. `createHandler` builds the one fetch
// handler (Request → Response) for the three surfaces from a config and explicit dependencies;
// run as a script, this file hands the command line that builder (the CLI never imports it back).
// Importing this file does nothing.
//
//   node --import tsx server.ts start      (npm start)
//   bun server.ts start
//   deno run -A server.ts start
import { isEntryPoint } from './cli/command.ts'
import type { Config } from './config.ts'
import { createFetch, type FetchHandler } from './http/pipeline.ts'
import type { Deps, Surface } from './routes/deps.ts'
import { createConsoleSurface } from './routes/console.ts'
import { createDiscoverySurface } from './routes/discovery.ts'
import { createLeadSurface } from './routes/leads.ts'
import { createMcpSurface, MCP_PATH } from './routes/mcp.ts'
import { createProductSurface } from './routes/product.ts'
import { createServices } from './services/index.ts'
import { startJobs, type Jobs } from './jobs/index.ts'
import { createMetricsSurface } from './routes/metrics.ts'
import { createTelemetry } from './services/telemetry.ts'
import { parseReplayRequest } from './routes/policy-replay.ts'
import { replayDecisions } from './services/policy-replay.ts'
import type { ProductOperations } from './cli/command.ts'
import { passwordHasherFor, type PasswordHasher } from './auth/passwords.ts'
import type { RateLimitStore } from './storage/ratelimits.ts'

export type { Config } from './config.ts'
export type { ConnectionInfo } from './http/context.ts'
export type { FetchHandler } from './http/pipeline.ts'
export type { Deps } from './services/deps.ts'
export { loadConfig } from './config.ts'
/** Vacuum and statistics for an embedded PGlite database, which has no autovacuum (README, Operations). */
export { startHousekeeping } from './jobs/housekeeping.ts'

/** What a caller passes; the composition root fills in what is omitted. */
export interface HandlerDeps extends Omit<Deps, 'passwords' | 'rateLimits'> {
  /** Omitted: a hasher made from the config's PASSWORD_HASH_* settings. Pass one to share capacity between handlers. */
  readonly passwords?: PasswordHasher
  /** Shares rate-limit counts with other processes; its timer runs between start() and close(). */
  readonly rateLimits?: RateLimitStore
}

export interface Steward extends FetchHandler {
  /** Each surface alone, for embedders mounting one of them. */
  readonly leads: FetchHandler
  readonly product: FetchHandler
  readonly discovery: FetchHandler
  /**
   * Forgets cached credential lookups of a key, session family or user (all of them when no id is
   * given), at once: a credential change made beside the API (an operator command this process
   * carries out) then holds from the next request on.
   */
  forgetCredentials(id?: string): void
  /** Starts the background work (revocation feed, timers, rate-limit sharing). Idempotent. */
  start(): void
  /** Stops what start() began, after a last flush. Does not close the database. */
  close(): Promise<void>
}

/** What operator commands share with the product API (they never import routes/ themselves). */
export const productOperations: ProductOperations = {
  replayPolicies: (db, organizationId, body) => replayDecisions(db, organizationId, parseReplayRequest(body)),
}

/** Builds the fetch handler. Pure: no I/O and no timers until start() or a request. */
export function createHandler(config: Config, given: HandlerDeps): Steward {
  // Metrics and traces, when the configuration asks for them (docs/observability.md); one per handler.
  const telemetry = given.telemetry ?? createTelemetry(config, given) ?? undefined
  const deps: Deps = { ...given, passwords: given.passwords ?? passwordHasherFor(config), ...(telemetry ? { telemetry } : {}) }
  // The use cases, caches and hubs every door shares; the routes only parse, authorize and call them.
  const services = createServices(config, deps)
  const leads = createLeadSurface(config, deps, { mail: services.leadMail, spam: services.leadSpam })
  const product = createProductSurface(config, deps, services)
  const mcp = createMcpSurface(config, deps, services)
  // Discovery describes the other surfaces: its documents are built once from their routes. The
  // MCP gateway is not an OpenAPI operation; only its protected-resource metadata is served.
  const discovery = createDiscoverySurface(config, [leads, product], [MCP_PATH])
  // The console is not an API: it serves files, and the discovery documents leave it out.
  const all: Surface[] = [discovery, product, leads, createConsoleSurface(config), mcp]
  // GET /metrics, only with METRICS_TOKEN set; not in the discovery documents.
  const metrics = createMetricsSurface(config)
  if (metrics) all.push(metrics)
  const combined = createFetch(all, { config, deps, fallback: leads })
  let started = false
  let jobs: Jobs | null = null
  return {
    fetch: telemetry ? telemetry.gate(combined.fetch) : combined.fetch,
    refuse: combined.refuse,
    counters: combined.counters,
    leads: createFetch([leads], { config, deps, fallback: leads }),
    product: createFetch([product], { config, deps, fallback: product }),
    discovery: createFetch([discovery], { config, deps, fallback: discovery }),
    forgetCredentials: (id) => services.credentials.forget(id),
    start() {
      if (started) return
      started = true
      for (const surface of all) surface.start?.()
      services.start()
      jobs = startJobs({ config, deps, services })
      given.rateLimits?.start()
    },
    async close() {
      // Jobs first (each settles its pass under way), then what the services hold queued.
      await jobs?.stop()
      await Promise.all(all.map((surface) => surface.close?.()))
      await services.close()
      await given.rateLimits?.close()
      await telemetry?.close()
    },
  }
}

if (isEntryPoint(import.meta)) {
  void import('./cli/main.ts')
    .then(({ runCli }) => runCli(process.argv.slice(2), process.env, process, { buildApp: createHandler, operations: productOperations }))
    .then((code) => {
      process.exitCode = code
    })
}
