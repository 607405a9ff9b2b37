// The agent page's budgets section (docs/budgets.md): each limit that applies to the agent, with
// what is used against its max as a meter, what remains and when the window resets, from
// GET /agents/{agent_id}/usage.
import { api } from '../api.js'
import { errorBox, h, put, table, unavailable, when } from '../dom.js'

/** Minor units as the currency's major units when the runtime knows the currency; else as sent. */
function amount(value, usage) {
  if (usage.kind === 'count') return String(value)
  if (!usage.currency) return String(value)
  try {
    const format = new Intl.NumberFormat(undefined, { style: 'currency', currency: usage.currency })
    const digits = format.resolvedOptions().maximumFractionDigits ?? 2
    return format.format(value / 10 ** digits)
  } catch {
    return `${value} ${usage.currency}`
  }
}

function windowText(w) {
  if (w.type === 'rolling') return `last ${w.seconds} s`
  if (w.type === 'all_time' || w.type === 'per_call') return w.type.replace('_', ' ')
  return `${w.type} (${w.tz ?? 'UTC'})`
}

function meter(usage) {
  const label = `${usage.limit}: ${amount(usage.used, usage)} used of ${amount(usage.max, usage)}`
  return h('span', {}, h('meter', { min: '0', max: String(Math.max(usage.max, 1)), value: String(Math.min(usage.used, usage.max)), high: String(usage.max * 0.8), 'aria-label': label, title: label }), ` ${amount(usage.used, usage)} / ${amount(usage.max, usage)}`)
}

/** Fills `section` with the agent's usage of each limit that applies to it. */
export function renderUsage(section, agentPath) {
  put(section, h('h2', { id: 'usage-title', text: 'Budgets' }), h('p', { class: 'muted', text: 'Loading…' }))
  api('GET', `${agentPath}/usage`)
    .then((data) =>
      put(
        section,
        h('h2', { id: 'usage-title', text: 'Budgets' }),
        (data.limits ?? []).length === 0
          ? h('p', { text: 'No policy that governs this agent carries a limit.' })
          : table('Budgets', [
              ['Limit', (u) => h('span', {}, h('strong', { text: u.limit }), ` (${u.policy_name}${u.mode === 'monitor' ? ', monitor' : ''})`)],
              ['Actions', (u) => u.actions.join(', ')],
              ['Scope', (u) => (u.resource ? `${u.scope}: ${u.resource}` : u.scope)],
              ['Window', (u) => windowText(u.window)],
              ['Used', meter],
              ['Remaining', (u) => amount(u.remaining, u)],
              ['Resets', (u) => (u.resets_at ? when(u.resets_at) : '—')],
            ], data.limits),
      ),
    )
    .catch((error) => put(section, h('h2', { id: 'usage-title', text: 'Budgets' }), error.status === 404 ? unavailable('Budgets') : errorBox(error)))
}
