// Decisions: the log, filterable by agent, action, outcome, where it came from (the API, the MCP
// gateway, ToolHive) and time, with the reasons and what monitor-mode policies would have decided;
// an MCP tool call shows its tool and arguments. One decision in full at #/decisions/ID.
import { api, qs } from '../api.js'
import { badge, errorBox, field, h, localToIso, pretty, put, table, unavailable, when } from '../dom.js'
import { argsInShort, clientOf, toolLine, toolOf, VIA, viaLabel } from '../mcp.js'

function reasonText(reasons) {
  if (!Array.isArray(reasons) || reasons.length === 0) return '—'
  return reasons.map((r) => (r.rule ? `rule: ${r.rule}` : `${r.name ?? r.policy_id}${r.version ? ` v${r.version}` : ''}`)).join('; ')
}

/** The action, and for an MCP tool call its tool and arguments in short. */
function actionCell(decision) {
  const tool = toolOf(decision.action)
  if (!tool) return h('code', { text: decision.action })
  return h('span', {}, h('code', { text: decision.action }), h('br'), h('span', { class: 'muted' }, toolLine(tool, decision.resource), ' ', h('code', { text: argsInShort(decision.args) })))
}

function wouldBe(decision) {
  const monitor = decision.monitor
  if (!monitor || !monitor.decision || monitor.decision === decision.decision) return h('span', { class: 'muted', text: 'same' })
  return h('span', {}, badge(monitor.decision), ' ', h('span', { class: 'muted', text: reasonText(monitor.reasons) }))
}

export function render(main, params) {
  if (params[0]) return renderOne(main, params[0])
  const agent = h('input', { type: 'text', name: 'agent' })
  const action = h('input', { type: 'text', name: 'action' })
  const outcome = h('select', { name: 'decision' }, ['', 'allow', 'deny', 'require_approval'].map((v) => h('option', { value: v, text: v ? v.replace('_', ' ') : 'Any' })))
  const via = h('select', { name: 'via' }, [['', 'Any'], ...VIA].map(([value, text]) => h('option', { value, text })))
  const from = h('input', { type: 'datetime-local', name: 'from' })
  const to = h('input', { type: 'datetime-local', name: 'to' })
  const form = h(
    'form',
    { class: 'filters', method: 'post', 'aria-label': 'Filter decisions' },
    field('Agent', agent), field('Action', action), field('Decision', outcome), field('Through', via), field('From', from), field('To', to),
    h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Filter' })),
  )
  const results = h('div', {})
  const more = h('div', { class: 'actions' })
  put(main, h('h1', { text: 'Decisions' }), form, results, more)
  let rows = []

  async function load(cursor) {
    const query = qs({ agent: agent.value.trim(), action: action.value.trim(), decision: outcome.value, via: via.value, from: localToIso(from.value), to: localToIso(to.value), cursor })
    try {
      const data = await api('GET', `/decisions${query}`)
      rows = cursor ? rows.concat(data.decisions ?? []) : data.decisions ?? []
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No decisions match.' })
          : table('Decisions', [
              ['Time', (d) => when(d.evaluated_at)],
              ['Agent', (d) => h('code', { text: d.agent })],
              ['Action', actionCell],
              ['Through', (d) => viaLabel(d.via)],
              ['Resource', (d) => d.resource || '—'],
              ['Decision', (d) => badge(d.decision)],
              ['Reasons', (d) => reasonText(d.reasons)],
              ['Monitor would be', wouldBe],
              ['', (d) => h('a', { href: `#/decisions/${encodeURIComponent(d.decision_id)}`, 'aria-label': `Details of ${d.action} at ${when(d.evaluated_at)}`, text: 'Details' })],
            ], rows),
      )
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
    } catch (error) {
      put(more)
      put(results, error.status === 404 ? unavailable('Decisions') : errorBox(error))
    }
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    void load()
  })
  void load()
}

function renderOne(main, id) {
  put(main, h('p', { class: 'muted', text: 'Loading…' }))
  api('GET', `/decisions/${encodeURIComponent(id)}`)
    .then((d) => {
      const tool = toolOf(d.action)
      const client = clientOf(d.context)
      put(
        main,
        h('p', {}, h('a', { href: '#/decisions', text: 'Back to decisions' })),
        h('h1', {}, 'Decision ', badge(d.decision)),
        h(
          'div',
          { class: 'card' },
          h(
            'dl',
            {},
            [
              ['Decision id', d.decision_id], ['Time', when(d.evaluated_at)], ['Agent', d.agent], ['Action', d.action], ['Resource', d.resource || '—'],
              ['Through', viaLabel(d.via)], ...(client ? [['MCP client', client]] : []), ...(d.context?.on_behalf_of ? [['On behalf of', d.context.on_behalf_of]] : []),
              ['Policies decided', d.policy_decision ?? d.decision], ['Reasons', reasonText(d.reasons)],
              ['Monitor would be', d.monitor?.decision ?? '—'], ['Monitor reasons', reasonText(d.monitor?.reasons)],
              ['Approval', d.approval_id ?? d.approval?.approval_id ?? '—'], ['Arguments hash', d.args_sha256 ?? '—'],
              ['Ruleset revision', d.ruleset_revision ?? '—'], ['Requested by', d.requested_by ?? '—'],
            ].map(([k, v]) => [h('dt', { text: k }), h('dd', { text: String(v) })]),
          ),
          tool ? h('p', {}, toolLine(tool, d.resource)) : null,
          h('h2', { text: tool?.kind === 'tool' ? 'Tool arguments' : 'Arguments' }), pretty(d.args ?? {}),
          h('h2', { text: 'Context' }), pretty(d.context ?? {}),
          d.errors?.length ? [h('h2', { text: 'Condition errors' }), pretty(d.errors)] : null,
        ),
      )
    })
    .catch((error) => put(main, h('p', {}, h('a', { href: '#/decisions', text: 'Back to decisions' })), h('h1', { text: 'Decision' }), error.status === 404 && !/decision not found/i.test(error.message) ? unavailable('Decisions') : errorBox(error)))
}
