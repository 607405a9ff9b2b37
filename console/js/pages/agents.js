// Agents: the inventory, discovered agents to adopt (status active) or suspend, one agent's
// capabilities, and agent keys (the secret shown once).
import { api, can, qs } from '../api.js'
import { announce, badge, errorBox, field, h, put, secretBox, table, unavailable, when } from '../dom.js'
import { renderUsage } from './agent-usage.js'

export function render(main, params) {
  if (params[0]) return renderOne(main, params[0])
  const status = h('select', {}, [['', 'All'], ['discovered', 'Discovered'], ['active', 'Active'], ['suspended', 'Suspended']].map(([v, t]) => h('option', { value: v, text: t })))
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const message = h('div', {})
  const form = h('form', { class: 'filters', method: 'post', 'aria-label': 'Filter agents' }, field('Status', status), h('div', { class: 'field' }, h('button', { type: 'submit', text: 'Show' })))
  const more = h('div', { class: 'actions' })
  put(main, h('h1', { text: 'Agents' }), h('p', { class: 'muted', text: 'Discovered agents asked for a decision under a new name: adopt them (active) or suspend them.' }), form, message, results, more)

  async function setStatus(agent, next) {
    try {
      await api('PATCH', `/agents/${encodeURIComponent(agent.agent_id)}`, { status: next })
      announce(`${agent.handle} is now ${next}`)
      void load()
    } catch (error) {
      put(message, errorBox(error))
    }
  }

  function actionsFor(agent) {
    if (!can('manager')) return ''
    const buttons = []
    if (agent.status !== 'active') buttons.push(h('button', { type: 'button', 'aria-label': `${agent.status === 'discovered' ? 'Adopt' : 'Reactivate'} ${agent.handle}`, text: agent.status === 'discovered' ? 'Adopt' : 'Reactivate', onclick: () => setStatus(agent, 'active') }))
    if (agent.status !== 'suspended') buttons.push(h('button', { type: 'button', class: 'danger', 'aria-label': `Suspend ${agent.handle}`, text: 'Suspend', onclick: () => setStatus(agent, 'suspended') }))
    return h('div', { class: 'actions' }, buttons)
  }

  let agents = []
  async function load(cursor) {
    try {
      const data = await api('GET', `/agents${qs({ status: status.value, cursor })}`)
      agents = cursor ? agents.concat(data.agents ?? []) : data.agents ?? []
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
      put(
        results,
        agents.length === 0
          ? h('p', { role: 'status', text: 'No agents.' })
          : table('Agents', [
              ['Handle', (a) => h('a', { href: `#/agents/${a.agent_id}`, text: a.handle })],
              ['Name', (a) => a.display_name || '—'],
              ['Status', (a) => badge(a.status)],
              ['Last seen', (a) => when(a.last_seen_at)],
              ['Actions', actionsFor],
            ], agents),
      )
    } catch (error) {
      put(results, error.status === 404 ? unavailable('Agents') : errorBox(error))
    }
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    void load()
  })
  void load()
}

function renderOne(main, id) {
  const details = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const capabilities = h('section', { 'aria-labelledby': 'caps-title' })
  const keys = h('section', { 'aria-labelledby': 'agent-keys-title' })
  const usage = h('section', { 'aria-labelledby': 'usage-title' })
  put(main, h('p', {}, h('a', { href: '#/agents', text: 'Back to agents' })), h('h1', { text: 'Agent' }), details, capabilities, usage, keys)
  const path = `/agents/${encodeURIComponent(id)}`
  renderUsage(usage, path)
  api('GET', path)
    .then((agent) => {
      put(
        details,
        h('div', { class: 'card' }, h('dl', {}, [
          ['Handle', agent.handle], ['Name', agent.display_name || '—'], ['Status', agent.status], ['Description', agent.description || '—'],
          ['Owner', agent.owner_user_id ?? '—'], ['Labels', Object.entries(agent.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || '—'],
          ['Created', when(agent.created_at)], ['Last seen', when(agent.last_seen_at)],
        ].map(([k, v]) => [h('dt', { text: k }), h('dd', { text: String(v) })]))),
      )
      if (can('admin')) renderKeyForm(keys, agent)
    })
    .catch((error) => put(details, error.status === 404 && !/agent not found/i.test(error.message) ? unavailable('Agents') : errorBox(error)))
  api('GET', `${path}/capabilities`)
    .then((data) =>
      put(
        capabilities,
        h('h2', { id: 'caps-title', text: 'Capabilities' }),
        (data.capabilities ?? []).length === 0
          ? h('p', { text: 'No policy names an action this agent could take.' })
          : table('Capabilities', [
              ['Action', (c) => h('code', { text: c.action })],
              ['Decision', (c) => badge(c.decision)],
              ['Condition', (c) => (c.condition ? h('code', { text: c.condition }) : '—')],
              ['Otherwise', (c) => (c.otherwise ? badge(c.otherwise) : c.rule ? `rule: ${c.rule}` : '—')],
              ['Policies', (c) => (c.policies ?? []).map((p) => (typeof p === 'string' ? p : `${p.name ?? p.policy_id}${p.version ? ` v${p.version}` : ''}`)).join('; ')],
            ], data.capabilities),
      ),
    )
    .catch((error) => put(capabilities, h('h2', { id: 'caps-title', text: 'Capabilities' }), error.status === 404 ? unavailable('Capabilities') : errorBox(error)))
}

function renderKeyForm(section, agent) {
  const name = h('input', { type: 'text', value: `${agent.handle} key`, maxlength: 100 })
  const out = h('div', {})
  const form = h('form', { method: 'post', 'aria-label': 'New agent key' }, field('Key name', name), h('button', { type: 'submit', class: 'primary', text: 'Create agent key' }), out)
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    try {
      const created = await api('POST', `/agents/${encodeURIComponent(agent.agent_id)}/keys`, { name: name.value.trim() })
      put(out, secretBox('Agent key secret', created.api_key))
      announce('Agent key created; copy its secret now')
    } catch (error) {
      put(out, errorBox(error))
    }
  })
  put(section, h('h2', { id: 'agent-keys-title', text: 'Agent keys' }), h('p', { class: 'muted', text: 'A key bound to this agent may only ask decisions for it and read its own capabilities.' }), form)
}
