// API keys: create (the secret shown once, with a copy button), rotate, revoke.
import { api, currentSession, roleRank } from '../api.js'
import { announce, badge, errorBox, field, h, put, secretBox, table, when } from '../dom.js'

const ROLES = ['viewer', 'member', 'manager', 'admin', 'owner']

function stateOf(key) {
  if (key.revoked_at) return 'revoked'
  if (key.expires_at && Date.parse(key.expires_at) <= Date.now()) return 'expired'
  return 'active'
}

export function render(main) {
  const mine = currentSession().role
  const name = h('input', { type: 'text', required: true, maxlength: 100 })
  const role = h('select', {}, ROLES.filter((r) => roleRank(r) <= roleRank(mine)).map((r) => h('option', { value: r, text: r, selected: r === 'viewer' })))
  const secret = h('div', {})
  const message = h('div', {})
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const form = h('form', { method: 'post', class: 'filters', 'aria-label': 'New API key' }, field('Key name', name), field('Role', role), h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Create key' })))
  put(main, h('h1', { text: 'API keys' }), h('section', { class: 'panel', 'aria-labelledby': 'new-key' }, h('h2', { id: 'new-key', text: 'New key' }), form), secret, message, results)

  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    put(message)
    try {
      const created = await api('POST', '/keys', { name: name.value.trim(), role: role.value })
      put(secret, secretBox(`Secret of key “${created.name}”`, created.api_key))
      name.value = ''
      announce('Key created; copy its secret now')
      void load()
    } catch (error) {
      put(message, errorBox(error))
    }
  })

  async function rotate(key) {
    try {
      const created = await api('POST', `/keys/${key.key_id}/rotate`, {})
      put(secret, secretBox(`New secret of key “${created.name}”`, created.api_key))
      announce('Key rotated; copy the new secret now')
      void load()
    } catch (error) {
      put(message, errorBox(error))
    }
  }

  function revokeButton(key) {
    const button = h('button', { type: 'button', class: 'danger', 'aria-label': `Revoke ${key.name}`, text: 'Revoke' })
    let armed = false
    button.addEventListener('click', async () => {
      if (!armed) {
        armed = true
        button.textContent = 'Confirm revoke'
        button.setAttribute('aria-label', `Confirm revoking ${key.name}`)
        return
      }
      try {
        await api('DELETE', `/keys/${key.key_id}`)
        announce(`Key ${key.name} revoked`)
        void load()
      } catch (error) {
        put(message, errorBox(error))
      }
    })
    return button
  }

  async function load() {
    try {
      const data = await api('GET', '/keys')
      put(
        results,
        table('API keys', [
          ['Name', (k) => k.name],
          ['Prefix', (k) => h('code', { text: k.prefix })],
          ['Role', (k) => k.role],
          ['State', (k) => badge(stateOf(k))],
          ['Created', (k) => when(k.created_at)],
          ['Last used', (k) => when(k.last_used_at)],
          ['Expires', (k) => when(k.expires_at)],
          ['Actions', (k) => (stateOf(k) === 'active' ? h('div', { class: 'actions' }, h('button', { type: 'button', 'aria-label': `Rotate ${k.name}`, text: 'Rotate', onclick: () => rotate(k) }), revokeButton(k)) : '')],
        ], data.keys ?? []),
      )
    } catch (error) {
      put(results, errorBox(error))
    }
  }
  void load()
}
