// Continuous authorization for listening clients: while an organization has open MCP listen
// streams (subscriptions/listen, protocol revision 2026-07-28), the gateway tells them
// `notifications/tools/list_changed` when what they may see could have changed: the organization's
// ruleset revision moved (a policy, an agent or a setting changed; every such change bumps it, in
// this process or another), its upstream registry changed, or an upstream said its tools changed.
// The revision is read once a second per watched organization, one small query batched with the
// decisions' own context reads; nothing runs while no stream is open.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import type { Logger } from '../log.ts'
import { readDecisionContext } from '../storage/decision-context.ts'

export const WATCH_INTERVAL_MS = 1000

export interface ListWatch {
  /** Watches the organization while the stream is open; call the returned release when it closes. */
  watch(organizationId: string, agentId: string): () => void
  /** Something the organization's agents may see changed: tell its listeners now. */
  changed(organizationId: string): void
  close(): void
}

interface Watched {
  streams: number
  /** Any agent of the organization: the revision read with it is the organization's. */
  agentId: string
  revision: number | null
}

export function createListWatch(deps: { readonly db: Kysely<Database>; readonly logger: Logger; readonly notify: (organizationId: string) => void; readonly intervalMs?: number }): ListWatch {
  const watched = new Map<string, Watched>()
  let timer: ReturnType<typeof setInterval> | null = null
  let running = false

  async function poll(): Promise<void> {
    if (running) return
    running = true
    try {
      await Promise.all(
        [...watched.entries()].map(async ([organizationId, entry]) => {
          const found = await readDecisionContext(deps.db, organizationId, { agentId: entry.agentId })
          const revision = found?.settings.ruleset_revision ?? -1
          if (entry.revision !== null && entry.revision !== revision) deps.notify(organizationId)
          entry.revision = revision
        }),
      )
    } catch (error) {
      deps.logger.log('warn', 'MCP list watch could not read revisions', { code: (error as { code?: string }).code ?? 'error' })
    } finally {
      running = false
    }
  }

  const arm = () => {
    if (timer !== null || watched.size === 0) return
    timer = setInterval(() => void poll(), deps.intervalMs ?? WATCH_INTERVAL_MS)
    timer.unref?.()
  }

  return {
    watch(organizationId, agentId) {
      const entry = watched.get(organizationId) ?? { streams: 0, agentId, revision: null }
      entry.streams++
      watched.set(organizationId, entry)
      // The revision the stream starts from, so a change right after it opened is not missed.
      if (entry.revision === null) void poll()
      arm()
      let released = false
      return () => {
        if (released) return
        released = true
        entry.streams--
        if (entry.streams > 0 || watched.get(organizationId) !== entry) return
        watched.delete(organizationId)
        if (watched.size === 0 && timer !== null) {
          clearInterval(timer)
          timer = null
        }
      }
    },
    changed(organizationId) {
      if (watched.has(organizationId)) deps.notify(organizationId)
    },
    close() {
      if (timer !== null) clearInterval(timer)
      timer = null
      watched.clear()
    },
  }
}
