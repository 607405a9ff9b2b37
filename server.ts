// Steward: one fetch handler (Request → Response) for three surfaces, and the binary-like script
// that serves it. Importing this file does nothing; `createHandler` builds the handler from a
// config and explicit dependencies, and the script part at the bottom runs only as the entry.
//
//   node --import tsx server.ts start      (npm start)
//   bun server.ts start
//   deno run -A server.ts start
import { isEntryPoint } from './cli/command.ts'
import { loadConfig, type Config } from './config.ts'
import type { Deps } from './routes/deps.ts'
import { createDiscoverySurface } from './routes/discovery.ts'
import { createLeadSurface } from './routes/leads.ts'
import { createProductSurface } from './routes/product.ts'
import { createFetch, type FetchHandler, type Surface } from './routes/surface.ts'

export type { Config } from './config.ts'
export type { Deps } from './routes/deps.ts'
export type { ConnectionInfo } from './routes/http.ts'
export type { FetchHandler } from './routes/surface.ts'
export { loadConfig } from './config.ts'

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
  /** Stops background work (timers, listeners) the surfaces started. Does not close the database. */
  close(): Promise<void>
}

/** Builds the fetch handler. Pure: no I/O until a request arrives. */
export function createHandler(config: Config, deps: Deps): Steward {
  // Rate limiters share counts across processes through deps.rateLimits when given.
  const leads = createLeadSurface(config, deps)
  const product = createProductSurface(config, deps)
  // Discovery describes the other surfaces: its documents are built once from their routes.
  const discovery = createDiscoverySurface(config, [leads, product])
  const all: Surface[] = [discovery, product, leads]
  const combined = createFetch(all, { config, deps, fallback: leads })
  return {
    fetch: combined.fetch,
    refuse: combined.refuse,
    counters: combined.counters,
    leads: createFetch([leads], { config, deps, fallback: leads }),
    product: createFetch([product], { config, deps, fallback: product }),
    discovery: createFetch([discovery], { config, deps, fallback: discovery }),
    forgetCredentials: (id) => product.forgetCredentials(id),
    async close() {
      await Promise.all(all.map((surface) => surface.close?.()))
    },
  }
}


if (isEntryPoint(import.meta)) {
  // No top-level await: `start` imports this module again, which must finish evaluating first.
  void import('./cli/main.ts')
    .then(({ runCli }) => runCli(process.argv.slice(2), process.env))
    .then((code) => {
      process.exitCode = code
    })
}
