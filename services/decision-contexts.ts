// The decision contexts (settings, ruleset revision, agent) this process read last, per
// organization and agent. A decision may start from one instead of reading it again, because its
// row is then written with a guard (storage/decisions.ts): the insert itself checks that the
// organization is still at that ruleset revision, and writes nothing otherwise. Every change to
// settings, policies or agents (a suspension too) bumps the revision in its own transaction, in
// any process, so a cached context can make a decision only while it is still the current one; a
// stale one costs a second read and a second evaluation, never a wrong answer.
import type { DecisionContext } from '../storage/decision-context.ts'

/** How an agent is named: by an agent key's agent id, or by the handle in the request. */
export type AgentRef = { agentId: string } | { handle: string }

export interface DecisionContextCache {
  get(organizationId: string, agent: AgentRef): DecisionContext | null
  /** Keeps a context just read (only one with an agent: an unknown handle is discovered first). */
  remember(organizationId: string, agent: AgentRef, context: DecisionContext): void
  /** Drops a context that turned out stale. */
  forget(organizationId: string, agent: AgentRef): void
  readonly size: number
  /** Lookups that found a context, and decisions whose cached context was stale (for tests and measurements). */
  readonly stats: { hits: number; stale: number }
}

export const MAX_CACHED_CONTEXTS = 10_000

const keyOf = (organizationId: string, agent: AgentRef) => ('agentId' in agent ? `${organizationId}|id|${agent.agentId}` : `${organizationId}|handle|${agent.handle}`)

export function createDecisionContextCache(maxEntries = MAX_CACHED_CONTEXTS): DecisionContextCache {
  const entries = new Map<string, DecisionContext>()
  const stats = { hits: 0, stale: 0 }
  return {
    get(organizationId, agent) {
      const found = entries.get(keyOf(organizationId, agent)) ?? null
      if (found) stats.hits++
      return found
    },
    remember(organizationId, agent, context) {
      if (context.agent === null) return
      const key = keyOf(organizationId, agent)
      entries.delete(key)
      // The oldest entry goes first (a Map iterates in insertion order).
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!)
      entries.set(key, context)
    },
    forget(organizationId, agent) {
      stats.stale++
      entries.delete(keyOf(organizationId, agent))
    },
    get size() {
      return entries.size
    },
    stats,
  }
}
