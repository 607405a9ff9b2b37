// Audit: the log of every change, filterable, and the check of its tamper-evident chain. Actors
// and targets read as emails, key names, agent handles and policy names; each row stays one line
// and opens (details/summary) to its data in full.
import { api, qs } from '../api.js'
import { errorBox, field, h, localToIso, pretty, put, table, unavailable, when } from '../dom.js'
import { refLabel } from '../names.js'

const PREVIEW_CHARS = 80

/** A cell that says who or what, filled in when the name is known (the id stays in its title). */
function refCell(ref) {
  const cell = h('span', { text: ref?.id ? `${ref.type} …` : '' })
  if (ref?.id) cell.title = `${ref.type} ${ref.id}`
  void refLabel(ref).then((text) => {
    cell.textContent = text
  })
  return cell
}

/** The data in one line (its keys and values, shortened), opening to the whole JSON. */
function dataCell(data) {
  const entries = Object.entries(data ?? {})
  if (entries.length === 0) return h('span', { class: 'muted', text: '—' })
  let preview = entries.map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? '…' : String(v)}`).join(', ')
  if (preview.length > PREVIEW_CHARS) preview = `${preview.slice(0, PREVIEW_CHARS - 1)}…`
  return h('details', { class: 'compact' }, h('summary', { text: preview }), pretty(data))
}

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
              ['Actor', (e) => refCell(e.actor)],
              ['Target', (e) => refCell(e.target)],
              ['Data', (e) => dataCell(e.data)],
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
