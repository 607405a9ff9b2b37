// Overview: the first page after sign-in. What the agents asked and what was decided, as pictures
// (decisions by outcome over time, how long approvals wait and what waits now, the most denied
// agents and actions, and, for those who read leads, where leads came from), each with its
// numbers one click away. Everything comes from the /reports routes of the period chosen.
import { api, can, qs } from '../api.js'
import { bars, columnsOf, formatNumber, stackedColumns } from '../charts.js'
import { errorBox, field, h, put, unavailable } from '../dom.js'

const PERIODS = [
  { value: '7d', text: 'Last 7 days', days: 7, bucket: 'day' },
  { value: '24h', text: 'Last 24 hours', days: 1, bucket: 'hour' },
  { value: '30d', text: 'Last 30 days', days: 30, bucket: 'day' },
]

export const OUTCOMES = [
  { key: 'allow', label: 'allowed' },
  { key: 'require_approval', label: 'sent for approval' },
  { key: 'deny', label: 'denied' },
]

/** "45 s", "3 min 20 s", "2 h 5 min", "3 d 4 h". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return '—'
  const s = Math.round(Number(seconds))
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`
  if (s < 86400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ''}`
}

const localZone = () => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
  } catch {
    return 'UTC'
  }
}

function section(title, ...children) {
  const id = `overview-${title.toLowerCase().replace(/[^a-z]+/g, '-')}`
  return h('section', { class: 'panel overview-part', 'aria-labelledby': id }, h('h2', { id, text: title }), ...children)
}

export function render(main) {
  const period = h('select', { name: 'period' }, PERIODS.map((p) => h('option', { value: p.value, text: p.text })))
  const range = h('p', { class: 'muted', role: 'status' }, 'Loading…')
  const parts = h('div', { class: 'overview' })
  put(main, h('h1', { text: 'Overview' }), h('div', { class: 'filters' }, field('Period', period)), range, parts)
  let stopped = false
  // The server's clock sets "now": the first answer's end anchors the other periods.
  let anchor = null
  let seq = 0

  async function load() {
    const chosen = PERIODS.find((p) => p.value === period.value) ?? PERIODS[0]
    const mine = ++seq
    const span = anchor ? { from: new Date(Date.parse(anchor) - chosen.days * 86_400_000).toISOString(), to: anchor } : {}
    const common = { ...span, tz: localZone() }
    const wantLeads = can('admin')
    const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ error }))
    const [decisions, approvals, denials, leads] = await Promise.all([
      settle(api('GET', `/reports/decisions${qs({ ...common, bucket: chosen.bucket, group: 'outcome' })}`)),
      settle(api('GET', `/reports/approvals${qs(common)}`)),
      settle(api('GET', `/reports/denials${qs({ ...common, limit: 10 })}`)),
      wantLeads ? settle(api('GET', `/reports/leads${qs({ ...common, bucket: 'day' })}`)) : Promise.resolve(null),
    ])
    if (stopped || mine !== seq) return
    if (decisions.error?.status === 404) {
      put(range)
      put(parts, unavailable('Reports'))
      return
    }
    if (decisions.value) {
      anchor ??= decisions.value.to
      range.textContent = `${chosen.text}: ${new Date(decisions.value.from).toLocaleString()} to ${new Date(decisions.value.to).toLocaleString()} (${decisions.value.tz ?? 'UTC'}).`
    } else range.textContent = ''
    put(
      parts,
      section('Decisions by outcome', decisions.error ? errorBox(decisions.error) : decisionsPart(decisions.value)),
      section('Approval wait', approvals.error ? errorBox(approvals.error) : approvalsPart(approvals.value)),
      section('Top denials', denials.error ? errorBox(denials.error) : denialsPart(denials.value)),
      // Leads are read by Owners and Admins of one organization only: elsewhere the part is left out.
      leads?.value ? section('Leads by source', leadsPart(leads.value)) : null,
    )
  }

  period.addEventListener('change', () => void load())
  void load()
  return () => {
    stopped = true
  }
}

function decisionsPart(report) {
  const buckets = columnsOf(report)
  const keys = new Set((report.series ?? []).map((one) => one.key))
  const series = [...OUTCOMES, ...[...keys].filter((k) => !OUTCOMES.some((o) => o.key === k)).map((key) => ({ key, label: key.replace(/_/g, ' ') }))]
  const totals = Object.fromEntries(series.map((one) => [one.key, buckets.reduce((sum, b) => sum + (b.values[one.key] ?? 0), 0)]))
  const total = Object.values(totals).reduce((a, b) => a + b, 0)
  const summary = `${formatNumber(total)} decision${total === 1 ? '' : 's'}: ${series.map((one) => `${formatNumber(totals[one.key])} ${one.label}`).join(', ')}.`
  if (total === 0) return h('p', { class: 'muted', text: 'No decisions in this period.' })
  return [
    h('p', { class: 'chart-summary', text: summary }),
    stackedColumns({ title: `Decisions by outcome per ${report.bucket === 'hour' ? 'hour' : 'day'}`, description: summary, buckets, series }),
  ]
}

function approvalsPart(report) {
  const wait = report.time_to_decision_seconds ?? {}
  const pending = report.pending ?? []
  const waiting = report.pending_total ?? pending.length
  const oldest = pending.reduce((max, p) => Math.max(max, p.waiting_seconds ?? 0), 0)
  const outcomes = [
    { label: 'Approved', value: report.approved ?? 0, key: 'approved' },
    { label: 'Denied', value: report.denied ?? 0, key: 'denied' },
    { label: 'Expired', value: report.expired ?? 0, key: 'expired' },
    { label: 'Cancelled', value: report.cancelled ?? 0, key: 'cancelled' },
  ]
  const summary = `${formatNumber(report.requested ?? 0)} requested: ${outcomes.map((o) => `${formatNumber(o.value)} ${o.label.toLowerCase()}`).join(', ')}.`
  return [
    h(
      'dl',
      { class: 'stats' },
      h('div', {}, h('dt', { text: 'Median time to decision' }), h('dd', { text: duration(wait.p50) })),
      h('div', {}, h('dt', { text: '90th percentile' }), h('dd', { text: duration(wait.p90) })),
      h('div', {}, h('dt', { text: 'Pending now' }), h('dd', { text: waiting ? `${formatNumber(waiting)} (oldest waiting ${duration(oldest)})` : '0' })),
    ),
    (report.requested ?? 0) === 0
      ? h('p', { class: 'muted', text: 'No approvals were requested in this period.' })
      : [h('p', { class: 'chart-summary', text: summary }), bars({ title: 'Approvals by outcome', description: summary, rows: outcomes, labelHeader: 'Outcome', unit: 'approvals' })],
    pending.length
      ? h(
          'div',
          {},
          h('h3', { text: 'Waiting now' }),
          h('ul', { class: 'waiting' }, pending.slice(0, 10).map((p) => h('li', {}, h('a', { href: `#/approvals/${encodeURIComponent(p.approval_id)}` }, h('code', { text: p.action })), ` by ${p.agent}, waiting ${duration(p.waiting_seconds)}`))),
        )
      : null,
  ]
}

function denialsPart(report) {
  const agents = (report.agents ?? []).map((a) => ({ label: a.agent, value: a.count, key: 'deny' }))
  const actions = (report.actions ?? []).map((a) => ({ label: a.action, value: a.count, key: 'deny' }))
  if (agents.length === 0 && actions.length === 0) return h('p', { class: 'muted', text: 'Nothing was denied in this period.' })
  const text = (rows, what) => `The ${what} denied most: ${rows.map((r) => `${r.label} ${formatNumber(r.value)}`).join(', ')}.`
  return h(
    'div',
    { class: 'side-by-side' },
    h('div', {}, h('h3', { text: 'By agent' }), bars({ title: 'Denials by agent', description: text(agents, 'agents'), rows: agents, labelHeader: 'Agent', unit: 'denials' })),
    h('div', {}, h('h3', { text: 'By action' }), bars({ title: 'Denials by action', description: text(actions, 'actions'), rows: actions, labelHeader: 'Action', unit: 'denials' })),
  )
}

function leadsPart(report) {
  const sources = (report.per_source ?? []).map((s) => ({ label: s.source ?? '(no source)', value: s.count }))
  const total = sources.reduce((sum, s) => sum + s.value, 0)
  if (total === 0) return h('p', { class: 'muted', text: 'No leads in this period.' })
  const summary = `${formatNumber(total)} lead${total === 1 ? '' : 's'}: ${sources.map((s) => `${s.label} ${formatNumber(s.value)}`).join(', ')}${report.duplicates_refused ? `; ${formatNumber(report.duplicates_refused)} duplicate${report.duplicates_refused === 1 ? '' : 's'} refused` : ''}.`
  return [h('p', { class: 'chart-summary', text: summary }), bars({ title: 'Leads by source', description: summary, rows: sources, labelHeader: 'Source', unit: 'leads' })]
}
