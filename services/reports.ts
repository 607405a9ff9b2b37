// The reports' use cases (docs/reports.md): decisions over time, top denials, approvals, policy
// effectiveness, agents, leads. Each counts one organization's rows (leads: the installation's)
// over a window the route has checked (at most 400 days, at most 1,000 buckets); the SQL is
// storage/reports.ts and storage/report-leads.ts.
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import { countLeads } from '../storage/report-leads.ts'
import type { Dimension } from '../storage/report-rollup.ts'
import {
  agentsByHandle,
  approvalCounts,
  bucketStarts,
  countAllDecisions,
  countDecisions,
  discoveredAgentsNotIn,
  inOneSnapshot,
  reportPolicies,
  waitingApprovals,
  type FactRow,
  type ReportPolicy,
} from '../storage/reports.ts'

export const MAX_WINDOW_DAYS = 400
export const MAX_BUCKETS = 1000
export const OUTCOMES = ['allow', 'deny', 'require_approval'] as const
export type Bucket = 'hour' | 'day'
export type Group = 'outcome' | 'agent' | 'action' | 'policy'

export interface ReportWindow {
  from: Date
  to: Date
  tz: string
}

export interface Point {
  t: string
  count: number
}

const RULE_LABELS: Readonly<Record<string, string>> = {
  'rule:default_decision': 'default decision',
  'rule:unknown_agent': 'unknown agent',
  'rule:agent_suspended': 'suspended agent',
}

export const REPORT_TOO_SLOW = 'The report took longer than the database allows a statement: ask for a shorter window'

/**
 * A time zone PostgreSQL does not know (one Intl knows but the database does not) is a 400, and a
 * report cut by the statement timeout a 503, never a 500.
 */
export async function withZone<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    const { code, message } = error as { code?: string; message?: string }
    if (code === '22023' && /time zone/i.test(message ?? '')) throw new HttpError(400, 'tz is not an IANA time zone this database knows')
    if (code === '57014') throw new HttpError(503, REPORT_TOO_SLOW, { headers: { 'Retry-After': '60' } })
    throw error
  }
}

const dense = (bounds: readonly Date[], counts: Map<number, number> | undefined): Point[] =>
  bounds.map((start, index) => ({ t: start.toISOString(), count: counts?.get(index) ?? 0 }))

function add(map: Map<number, number>, bucket: number, count: number): void {
  map.set(bucket, (map.get(bucket) ?? 0) + count)
}

/** `policy_id:version` → policy_id; `rule:x` stays. */
const policyOf = (key: string) => (key.startsWith('rule:') ? key : key.slice(0, key.lastIndexOf(':')))

export function createReports(db: Kysely<Database>) {
  const snapshot = <T>(work: Parameters<typeof inOneSnapshot<T>>[1]) => withZone(() => inOneSnapshot(db, work))

  return {
    async decisions(organizationId: string, window: ReportWindow, bucket: Bucket, group: Group, limit: number) {
      return snapshot(async (trx) => {
        const bounds = await bucketStarts(trx, window.from, window.to, window.tz, bucket)
        const rows = await countDecisions(trx, organizationId, { ...window, bounds }, [group])
        const total = group === 'outcome' ? rows.reduce((sum, row) => sum + row.count, 0) : await countAllDecisions(trx, organizationId, { ...window, bounds })
        const perKey = new Map<string, Map<number, number>>()
        for (const row of rows) {
          const key = group === 'policy' ? policyOf(row.key) : row.key
          let counts = perKey.get(key)
          if (!counts) perKey.set(key, (counts = new Map()))
          add(counts, row.bucket, row.count)
        }
        if (group === 'outcome') for (const outcome of OUTCOMES) if (!perKey.has(outcome)) perKey.set(outcome, new Map())
        const sum = (counts: Map<number, number>) => [...counts.values()].reduce((a, b) => a + b, 0)
        const ranked = [...perKey.entries()].map(([key, counts]) => ({ key, counts, total: sum(counts) }))
        ranked.sort((a, b) => (group === 'outcome' ? OUTCOMES.indexOf(a.key as never) - OUTCOMES.indexOf(b.key as never) : b.total - a.total || (a.key < b.key ? -1 : 1)))
        const kept = group === 'outcome' ? ranked : ranked.slice(0, limit)
        const rest = group === 'outcome' ? [] : ranked.slice(limit)
        const names = group === 'policy' ? new Map((await reportPolicies(trx, organizationId)).map((p) => [p.policy_id, p.name])) : null
        const label = (key: string) => (names ? (RULE_LABELS[key] ?? names.get(key) ?? key) : key)
        let other = null
        if (rest.length > 0) {
          const counts = new Map<number, number>()
          for (const entry of rest) for (const [b, n] of entry.counts) add(counts, b, n)
          other = { keys: rest.length, total: sum(counts), points: dense(bounds, counts) }
        }
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          tz: window.tz,
          bucket,
          group,
          total,
          series: kept.map((entry) => ({ key: entry.key, label: label(entry.key), total: entry.total, points: dense(bounds, entry.counts) })),
          other,
        }
      })
    },

    async denials(organizationId: string, window: ReportWindow, limit: number) {
      return snapshot(async (trx) => {
        const rows = (await countDecisions(trx, organizationId, { ...window, bounds: [window.from] }, ['agent', 'action'])).filter((row) => row.decision === 'deny')
        const top = (dimension: Dimension) =>
          rows
            .filter((row) => row.dimension === dimension)
            .sort((a, b) => b.count - a.count || (a.key < b.key ? -1 : 1))
            .slice(0, limit)
        const agents = top('agent')
        const ids = new Map((await agentsByHandle(trx, organizationId, agents.map((row) => row.key))).map((agent) => [agent.handle, agent.agent_id]))
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          total: rows.filter((row) => row.dimension === 'agent').reduce((sum, row) => sum + row.count, 0),
          agents: agents.map((row) => ({ agent: row.key, agent_id: ids.get(row.key) ?? null, count: row.count })),
          actions: top('action').map((row) => ({ action: row.key, count: row.count })),
        }
      })
    },

    async approvals(organizationId: string, window: ReportWindow, now: Date, limit: number) {
      const counts = await withZone(() => approvalCounts(db, organizationId, window.from, window.to, now))
      const waiting = await withZone(() => waitingApprovals(db, organizationId, now, limit))
      const { p50, p90, ...rest } = counts
      return {
        from: window.from.toISOString(),
        to: window.to.toISOString(),
        ...rest,
        time_to_decision_seconds: { p50, p90 },
        pending_total: waiting.total,
        pending: waiting.rows.map((row) => ({
          approval_id: row.approval_id,
          action: row.action,
          agent: row.agent_handle,
          agent_id: row.agent_id,
          created_at: new Date(row.created_at).toISOString(),
          expires_at: new Date(row.expires_at).toISOString(),
          waiting_seconds: Math.max(0, Math.floor((now.getTime() - new Date(row.created_at).getTime()) / 1000)),
        })),
      }
    },

    async policies(organizationId: string, window: ReportWindow) {
      return snapshot(async (trx) => {
        const rows = await countDecisions(trx, organizationId, { ...window, bounds: [window.from] }, ['policy', 'shadow', 'shadow_change'])
        const policies = await reportPolicies(trx, organizationId)
        const hits = new Map<string, Map<number, number>>()
        const changes = new Map<string, number>()
        for (const row of rows) {
          if (row.key.startsWith('rule:')) continue
          const id = policyOf(row.key)
          const version = Number(row.key.slice(row.key.lastIndexOf(':') + 1))
          if (row.dimension === 'shadow_change') changes.set(id, (changes.get(id) ?? 0) + row.count)
          else {
            let perVersion = hits.get(id)
            if (!perVersion) hits.set(id, (perVersion = new Map()))
            add(perVersion, version, row.count)
          }
        }
        const listed = policies.filter((policy) => hits.has(policy.policy_id) || (policy.in_force && policy.mode === 'monitor'))
        const entries = listed.map((policy) => {
          const perVersion = [...(hits.get(policy.policy_id) ?? new Map<number, number>()).entries()].sort((a, b) => b[0] - a[0])
          return {
            policy_id: policy.policy_id,
            name: policy.name,
            mode: policy.mode,
            effect: policy.effect,
            in_force: policy.in_force,
            hits: perVersion.map(([version, count]) => ({ version, count })),
            total: perVersion.reduce((sum, [, count]) => sum + count, 0),
            would_change: policy.mode === 'monitor' ? (changes.get(policy.policy_id) ?? 0) : null,
          }
        })
        entries.sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          policies: entries,
          unmatched: policies.filter((p) => p.in_force && !hits.has(p.policy_id)).map((p) => ({ policy_id: p.policy_id, name: p.name, mode: p.mode })),
        }
      })
    },

    /** One policy's hits over time; null when the organization has no such policy. */
    async policy(organizationId: string, policyId: string, window: ReportWindow, bucket: Bucket) {
      return snapshot(async (trx) => {
        const [policy] = await reportPolicies(trx, organizationId, policyId)
        if (!policy) return null
        const bounds = await bucketStarts(trx, window.from, window.to, window.tz, bucket)
        const rows = await countDecisions(trx, organizationId, { ...window, bounds }, ['policy', 'shadow', 'shadow_change'], `${policyId}:`)
        const series = (keep: (row: FactRow) => boolean) => {
          const counts = new Map<number, number>()
          for (const row of rows) if (keep(row)) add(counts, row.bucket, row.count)
          return dense(bounds, counts)
        }
        const monitor = policy.mode === 'monitor'
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          tz: window.tz,
          bucket,
          policy: policyJson(policy),
          hits: series((row) => row.dimension !== 'shadow_change'),
          would_change: monitor ? series((row) => row.dimension === 'shadow_change') : null,
        }
      })
    },

    async agents(organizationId: string, window: ReportWindow, limit: number) {
      return snapshot(async (trx) => {
        const rows = await countDecisions(trx, organizationId, { ...window, bounds: [window.from] }, ['agent'])
        const perHandle = new Map<string, number>()
        for (const row of rows) perHandle.set(row.key, (perHandle.get(row.key) ?? 0) + row.count)
        const ranked = [...perHandle.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
        const shown = ranked.slice(0, limit)
        const known = new Map((await agentsByHandle(trx, organizationId, shown.map(([handle]) => handle))).map((agent) => [agent.handle, agent]))
        const gone = await discoveredAgentsNotIn(trx, organizationId, [...perHandle.keys()], limit)
        const iso = (date: Date | null | undefined) => (date ? new Date(date).toISOString() : null)
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          active: perHandle.size,
          agents: shown.map(([handle, decisions]) => {
            const agent = known.get(handle)
            return { agent_id: agent?.agent_id ?? null, handle, status: agent?.status ?? null, last_seen_at: iso(agent?.last_seen_at), decisions }
          }),
          gone: gone.map((agent) => ({ agent_id: agent.agent_id, handle: agent.handle, status: agent.status, created_at: iso(agent.created_at), last_seen_at: iso(agent.last_seen_at) })),
        }
      })
    },

    /** The installation's leads (the route checks the caller may read them). */
    async leads(window: ReportWindow, bucket: Bucket) {
      return withZone(async () => {
        const bounds = await bucketStarts(db, window.from, window.to, window.tz, bucket)
        const counts = await countLeads(db, window.from, window.to, bounds)
        return {
          from: window.from.toISOString(),
          to: window.to.toISOString(),
          tz: window.tz,
          bucket,
          total: [...counts.perList.values()].reduce((a, b) => a + b, 0),
          per_day: dense(bounds, counts.perBucket),
          per_source: counts.perSource,
          per_list: (['demo-requests', 'newsletter'] as const).map((list) => ({ list, count: counts.perList.get(list) ?? 0 })),
          duplicates_refused: counts.duplicates,
        }
      })
    },
  }
}

function policyJson(policy: ReportPolicy) {
  const { policy_id, name, mode, effect, version, in_force } = policy
  return { policy_id, name, mode, effect, version, in_force }
}

export type Reports = ReturnType<typeof createReports>
