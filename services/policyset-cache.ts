// Compiled policy sets, cached in process per organization under its ruleset revision. A
// decision reads the current revision first (storage/decision-context.ts) and asks for a set at least
// that new, so no process ever decides with a set older than the last committed change, and no
// notification is needed for correctness. A miss loads the policies in force with their revision
// in one statement and compiles them; concurrent misses of one organization share one load, and
// a load never holds up other organizations. Bounded: the least recently used organization goes.
import type { Kysely } from 'kysely'
import { compilePolicySet, type CompiledPolicySet } from '../engine/index.ts'
import { loadPoliciesInForce } from '../storage/decision-context.ts'
import type { Database } from '../database/schema.ts'

export interface PolicySetCache {
  /** A compiled set of the organization at `revision` or newer; null when the organization is gone. */
  get(organizationId: string, revision: number): Promise<CompiledPolicySet | null>
  readonly size: number
  /** Sets compiled so far (for tests and measurements). */
  readonly compiled: number
}

export const MAX_CACHED_SETS = 1000

export function createPolicySetCache(db: Kysely<Database>, maxEntries = MAX_CACHED_SETS): PolicySetCache {
  const sets = new Map<string, CompiledPolicySet>()
  const loading = new Map<string, Promise<CompiledPolicySet | null>>()
  let compiled = 0

  function remember(organizationId: string, set: CompiledPolicySet): void {
    const current = sets.get(organizationId)
    if (current && current.ruleset_revision > set.ruleset_revision) return
    sets.delete(organizationId)
    sets.set(organizationId, set)
    if (sets.size > maxEntries) sets.delete(sets.keys().next().value!)
  }

  function load(organizationId: string): Promise<CompiledPolicySet | null> {
    const running = loading.get(organizationId)
    if (running) return running
    const promise = loadPoliciesInForce(db, organizationId)
      .then((found) => {
        if (!found) return null
        const set = compilePolicySet(found.policies, found.revision)
        compiled++
        remember(organizationId, set)
        return set
      })
      .finally(() => loading.delete(organizationId))
    loading.set(organizationId, promise)
    return promise
  }

  return {
    async get(organizationId, revision) {
      const hit = sets.get(organizationId)
      if (hit && hit.ruleset_revision >= revision) {
        sets.delete(organizationId)
        sets.set(organizationId, hit)
        return hit
      }
      // A load that started before the revision we read may return an older set: load again.
      for (let attempt = 0; attempt < 3; attempt++) {
        const set = await load(organizationId)
        if (set === null || set.ruleset_revision >= revision) return set
      }
      const set = await load(organizationId)
      if (set !== null && set.ruleset_revision < revision) throw new Error('policy set older than the revision read')
      return set
    },
    get size() {
      return sets.size
    },
    get compiled() {
      return compiled
    },
  }
}
