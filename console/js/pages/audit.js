// Audit: the log of every change, filterable, and the check of its tamper-evident chain.
import { api, qs } from '../api.js'
import { errorBox, field, h, localToIso, pretty, put, table, unavailable, when } from '../dom.js'

export function render(main) {
  const type = h('input', { type: 'text', placeholder: 'policy.created' })
  const from = h('input', { type: 'datetime-local' })
  const to = h('input', { type: 'datetime-local' })
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const more = h('div', { class: 'actions' })
  const verifyOut = h('div', { 'aria-live': 'polite' })
  const form = h('form', { method: 'post', class: 'filters', 'aria-label': 'Filter audit events' }, field('Event type', type), field('From', from), field('To', to), h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Filter' })))
  const verify = h('button', { type: 'button', text: 'Verify the chain' })
  put(main, h('h1', { text: 'Audit log' }), h('div', { class: 'actions' }, verify), verifyOut, form, results, more)
  let rows = []

  async function load(cursor) {
    try {
      const data = await api('GET', `/audit${qs({ type: type.value.trim(), from: localToIso(from.value), to: localToIso(to.value), cursor })}`)
      rows = cursor ? rows.concat(data.events ?? []) : data.events ?? []
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No events match.' })
          : table('Audit events', [
              ['Time', (e) => when(e.occurred_at)],
              ['Type', (e) => h('code', { text: e.type })],
              ['Actor', (e) => `${e.actor?.type ?? ''} ${e.actor?.id ?? ''}`.trim() || '—'],
              ['Target', (e) => `${e.target?.type ?? ''} ${e.target?.id ?? ''}`.trim() || '—'],
              ['Data', (e) => pretty(e.data ?? {})],
            ], rows),
      )
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
    } catch (error) {
      put(more)
      put(results, error.status === 404 ? unavailable('Audit logs') : errorBox(error))
    }
  }
  verify.addEventListener('click', async () => {
    put(verifyOut, h('p', { class: 'muted', text: 'Verifying…' }))
    try {
      const result = await api('GET', '/audit/verify')
      put(
        verifyOut,
        result.ok
          ? h('p', { class: 'ok', text: `The chain is intact${result.sealed_through ? ` (sealed through ${result.sealed_through})` : ''}.` })
          : h('div', { class: 'panel' }, h('p', { class: 'error', text: 'The chain does not match: the log was changed.' }), pretty(result.first_mismatch)),
      )
    } catch (error) {
      put(verifyOut, error.status === 404 ? unavailable('Audit checks') : errorBox(error))
    }
  })
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    void load()
  })
  void load()
}
