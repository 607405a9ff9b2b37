// A policy's hits over the last 30 days (GET /reports/policies/{id}), drawn under its editor; for
// a monitor-mode policy, how many of those decisions enforcing it would have changed: the
// evidence for promoting it to enforce.
import { api, qs } from '../api.js'
import { columnsOf, formatNumber, stackedColumns } from '../charts.js'
import { errorBox, h, put } from '../dom.js'

const DAYS = 30

const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'

/** A section to place on the policy's page; it fills itself in (or says why it cannot). */
export function policyHits(policyId) {
  const holder = h('section', { class: 'panel overview-part', 'aria-labelledby': 'hits-title' }, h('h2', { id: 'hits-title', text: 'Hits over time' }), h('p', { class: 'muted', text: 'Loading…' }))
  void load(policyId, holder)
  return holder
}

async function load(policyId, holder) {
  const title = h('h2', { id: 'hits-title', text: 'Hits over time' })
  try {
    // The server's "now" ends the window: read the default window first, then the 30 days before its end.
    const path = `/reports/policies/${encodeURIComponent(policyId)}`
    const first = await api('GET', `${path}${qs({ tz: localZone(), bucket: 'day' })}`)
    const report = await api('GET', `${path}${qs({ tz: localZone(), bucket: 'day', to: first.to, from: new Date(Date.parse(first.to) - DAYS * 86_400_000).toISOString() })}`)
    put(holder, title, ...part(report))
  } catch (error) {
    // A server without reports: the page simply has no chart (a policy not found is said by the editor).
    if (error.status === 404) holder.remove()
    else put(holder, title, errorBox(error))
  }
}

function part(report) {
  const monitor = report.would_change !== null && report.would_change !== undefined
  const hits = report.hits.reduce((sum, p) => sum + p.count, 0)
  const changed = monitor ? report.would_change.reduce((sum, p) => sum + p.count, 0) : 0
  const what = `${formatNumber(hits)} decision${hits === 1 ? '' : 's'} in the last ${DAYS} days matched this policy`
  const summary = monitor
    ? `${what} in monitor mode; enforcing it would have changed ${formatNumber(changed)} of them.`
    : `${what}.`
  if (hits === 0) return [h('p', { class: 'chart-summary', text: `No decision in the last ${DAYS} days matched this policy.` })]
  // A would-change decision is also a hit: the bars stack the changed part on the unchanged one.
  const changedAt = new Map((report.would_change ?? []).map((p) => [p.t, p.count]))
  const series = monitor
    ? [{ key: 'same', label: 'same answer' }, { key: 'changed', label: 'would have changed' }]
    : [{ key: 'hits', label: 'hits' }]
  const buckets = columnsOf({
    bucket: report.bucket,
    tz: report.tz,
    series: monitor
      ? [
          { key: 'same', points: report.hits.map((p) => ({ t: p.t, count: Math.max(0, p.count - (changedAt.get(p.t) ?? 0)) })) },
          { key: 'changed', points: report.hits.map((p) => ({ t: p.t, count: changedAt.get(p.t) ?? 0 })) },
        ]
      : [{ key: 'hits', points: report.hits }],
  })
  return [
    h('p', { class: 'chart-summary', role: 'status', text: summary }),
    monitor && changed > 0 ? h('p', { class: 'hint', text: 'Promoting this policy to enforce would have given those decisions a different answer. Preview them with “Preview changes (replay)”.' }) : null,
    stackedColumns({ title: `Hits per day of ${report.policy?.name ?? 'this policy'}`, description: summary, buckets, series, noun: 'hits' }),
  ]
}
