// Budgets in a decision (docs/budgets.md): what the limits of the applying policies take from a
// request, the reasons a limit gives (deny, or "would have exceeded" in monitor), the read-only
// check a simulation makes, and an agent's usage against each limit that applies to it. The
// counting itself happens in the decision's transaction (storage/budgets.ts).
import type { Kysely } from 'kysely'
import { counterKey, currentOf, resetsAt, unitsLabel, windowAt, windowLabel, type AppliedLimit, type CompiledPolicySet, type CounterState, type DecisionView, type LimitInput, type LimitReason } from '../engine/index.ts'
import { countersOfLimit, readCounters, type LimitHit, type LimitRequest, type Reservation } from '../storage/budgets.ts'
import type { Database } from '../database/schema.ts'

/** What a decision's limits say before the counters are touched. */
export interface LimitPlan {
  /** An enforce-mode limit refuses already (its amount failed, or a per_call spend is over). */
  readonly deny: LimitReason | null
  /** Monitor-mode limits that would have refused. */
  readonly monitor: readonly LimitReason[]
  /** What the decision takes of each windowed counter; null when nothing. */
  readonly request: LimitRequest | null
}

export const NO_LIMIT_PLAN: LimitPlan = Object.freeze({ deny: null, monitor: Object.freeze([]), request: null })

/** The reason a limit gives, with a sentence naming the limit, the window, what was used and what remains. */
export function limitReason(
  applied: Pick<AppliedLimit, 'policy_id' | 'policy_version' | 'policy_name' | 'enforce'> & { limit: LimitInput },
  rule: LimitReason['rule'],
  used: number,
  requested: number | null,
  resets: number | null,
  error: string | null = null,
): LimitReason {
  const { limit } = applied
  const remaining = Math.max(0, limit.max - used)
  const window = windowLabel(limit.window)
  const head = `Limit "${limit.name}" of policy "${applied.policy_name}" (${limit.kind}, ${window})`
  const body =
    rule === 'limit_error'
      ? `: ${error}; the request is refused (fail closed)`
      : `: ${unitsLabel(limit, used)} used of ${unitsLabel(limit, limit.max)}, ${unitsLabel(limit, remaining)} remaining; this request needs ${unitsLabel(limit, requested ?? 0)}${resets === null ? '' : `; the window resets at ${new Date(resets).toISOString()}`}`
  return {
    rule,
    policy_id: applied.policy_id,
    version: applied.policy_version,
    limit: limit.name,
    policy_name: applied.policy_name,
    kind: limit.kind,
    mode: applied.enforce ? 'enforce' : 'monitor',
    window,
    max: limit.max,
    used,
    remaining,
    requested,
    currency: limit.currency ?? null,
    resets_at: resets === null ? null : new Date(resets).toISOString(),
    message: applied.enforce ? head + body : `${head} would have refused${body.replace('; the request is refused (fail closed)', '')}`,
  }
}

/** The reason of a counter that had no room (from the decision's transaction). */
export function hitReason(hit: LimitHit): LimitReason {
  const r = hit.reservation
  return limitReason({ policy_id: r.policy_id, policy_version: r.policy_version, policy_name: r.policy_name, enforce: r.enforce, limit: r.limit }, 'limit_exceeded', hit.used, r.amount, hit.resets_at)
}

/** What the applying limits take of a request by `agent` in `organizationId` at `now`. */
export function planOf(limits: readonly AppliedLimit[] | undefined, organizationId: string, agentId: string, resource: string, now: number): LimitPlan {
  if (!limits || limits.length === 0) return NO_LIMIT_PLAN
  let deny: LimitReason | null = null
  const monitor: LimitReason[] = []
  const reservations: Reservation[] = []
  for (const applied of limits) {
    const { limit } = applied
    let reason: LimitReason | null = null
    if (applied.amount === null) reason = limitReason(applied, 'limit_error', 0, null, null, applied.error)
    else if (limit.window.type === 'per_call') {
      if (applied.amount > limit.max) reason = limitReason(applied, 'limit_exceeded', 0, applied.amount, null)
    } else {
      reservations.push({
        organization_id: organizationId,
        counter_key: counterKey(applied.policy_id, limit, agentId, resource),
        policy_id: applied.policy_id,
        policy_version: applied.policy_version,
        policy_name: applied.policy_name,
        limit,
        agent_id: limit.scope === 'organization' ? null : agentId,
        resource: limit.scope === 'agent_resource' ? resource : null,
        amount: applied.amount,
        enforce: applied.enforce,
      })
    }
    if (reason === null) continue
    if (applied.enforce) deny ??= reason
    else monitor.push(reason)
  }
  return { deny, monitor, request: reservations.length === 0 ? null : { reservations, now } }
}

/** The monitor view once limits are counted: a monitor-mode limit that would refuse makes it a deny. */
export function monitorWith(view: DecisionView, reasons: readonly LimitReason[]): DecisionView {
  return reasons.length === 0 ? view : { decision: 'deny', reasons }
}

/**
 * A simulation's check of the counters: reads them (no lock, nothing written) and says which
 * limit would refuse, as the decision would under no concurrent traffic.
 */
export async function checkWithoutCounting(db: Kysely<Database>, organizationId: string, plan: LimitPlan): Promise<{ deny: LimitReason | null; monitor: LimitReason[] }> {
  const monitor = [...plan.monitor]
  let deny = plan.deny
  const reservations = plan.request?.reservations ?? []
  if (deny !== null || reservations.length === 0) return { deny, monitor }
  const now = plan.request!.now
  const stored = await readCounters(db, organizationId, reservations.map((r) => r.counter_key))
  for (const r of reservations) {
    const current = currentOf(r.limit.window, stored.get(r.counter_key) ?? null, now)
    if (current.used + r.amount <= r.limit.max) continue
    const reason = hitReason({ reservation: r, used: current.used, resets_at: resetsAt(r.limit.window, current, now) })
    if (r.enforce) {
      deny = reason
      break
    }
    monitor.push(reason)
  }
  return { deny, monitor }
}

/** One limit's use by one agent (or its organization), as GET /agents/{id}/usage answers it. */
export interface LimitUsage {
  policy_id: string
  policy_name: string
  policy_version: number
  limit: string
  kind: 'count' | 'spend'
  mode: 'enforce' | 'monitor'
  scope: LimitInput['scope']
  actions: string[]
  window: { type: string; tz: string | null; seconds: number | null }
  currency: string | null
  /** For agent_resource limits: the resource this counter is for (null: none used yet). */
  resource: string | null
  max: number
  used: number
  remaining: number
  window_start: string | null
  resets_at: string | null
}

/** Every limit of the policies in force that govern `agent`, with its use at `now`. */
export async function usageOf(db: Kysely<Database>, set: CompiledPolicySet, organizationId: string, agent: { agent_id: string; handle: string }, now: number): Promise<LimitUsage[]> {
  const entries: { policy: CompiledPolicySet['policies'][number]; limit: LimitInput; key: string | null }[] = []
  for (const policy of set.policies) {
    if (!policy.matchAgent(agent.handle)) continue
    for (const limit of policy.limits) {
      if (limit.window.type === 'per_call') entries.push({ policy, limit, key: null })
      else if (limit.scope === 'agent_resource') entries.push({ policy, limit, key: null })
      else entries.push({ policy, limit, key: counterKey(policy.policy_id, limit, agent.agent_id, '') })
    }
  }
  const stored = await readCounters(db, organizationId, entries.flatMap((e) => (e.key === null ? [] : [e.key])))
  const out: LimitUsage[] = []
  for (const { policy, limit, key } of entries) {
    const base = {
      policy_id: policy.policy_id,
      policy_name: policy.name,
      policy_version: policy.version,
      limit: limit.name,
      kind: limit.kind,
      mode: policy.mode === 'enforce' && limit.mode === 'enforce' ? ('enforce' as const) : ('monitor' as const),
      scope: limit.scope,
      actions: [...policy.actions],
      window: { type: limit.window.type, tz: limit.window.tz ?? (['hour', 'day', 'week', 'month'].includes(limit.window.type) ? 'UTC' : null), seconds: limit.window.seconds ?? null },
      currency: limit.currency ?? null,
    }
    const row = (resource: string | null, state: CounterState | null): LimitUsage => {
      const current = currentOf(limit.window, state, now)
      const used = limit.window.type === 'per_call' ? 0 : current.used
      const calendar = !['rolling', 'all_time', 'per_call'].includes(limit.window.type)
      const resets = limit.window.type === 'per_call' ? null : resetsAt(limit.window, current, now)
      return { ...base, resource, max: limit.max, used, remaining: Math.max(0, limit.max - used), window_start: calendar ? new Date(windowAt(limit.window, now).start).toISOString() : null, resets_at: resets === null ? null : new Date(resets).toISOString() }
    }
    if (limit.scope === 'agent_resource' && limit.window.type !== 'per_call') {
      const counters = await countersOfLimit(db, organizationId, policy.policy_id, limit.name, agent.agent_id)
      const mine = counters.filter((c) => c.counter_key === counterKey(policy.policy_id, limit, agent.agent_id, c.resource ?? ''))
      if (mine.length === 0) out.push(row(null, null))
      for (const c of mine) out.push(row(c.resource, c.state))
    } else out.push(row(null, key === null ? null : (stored.get(key) ?? null)))
  }
  return out
}
