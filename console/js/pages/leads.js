// Leads: demo requests and newsletter subscriptions, searchable, exported as CSV (built in the
// browser from every page of the current search; cells that a spreadsheet would evaluate are
// prefixed with a quote).
import { api, qs } from '../api.js'
import { errorBox, field, h, put, table, when } from '../dom.js'
import { renderLeadMail } from './leads-mail.js'
import { renderLeadSpam } from './leads-spam.js'

const LISTS = {
  demo: { path: '/leads/demo-requests', title: 'Demo requests', columns: ['received_at', 'email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id'] },
  newsletter: { path: '/leads/newsletter', title: 'Newsletter', columns: ['received_at', 'email', 'status', 'source', 'via', 'analytics_distinct_id'] },
}

export function csvCell(value) {
  let text = value === null || value === undefined ? '' : String(value)
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

export function render(main) {
  const list = h('select', {}, Object.entries(LISTS).map(([v, l]) => h('option', { value: v, text: l.title })))
  const search = h('input', { type: 'search', maxlength: 200 })
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const more = h('div', { class: 'actions' })
  const message = h('div', {})
  const exportButton = h('button', { type: 'button', text: 'Export CSV' })
  const form = h('form', { method: 'post', class: 'filters', role: 'search', 'aria-label': 'Search leads' }, field('List', list), field('Search', search), h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Search' })), h('div', { class: 'field' }, exportButton))
  put(main, h('h1', { text: 'Leads' }), form, message, results, more)
  renderLeadMail(main)
  renderLeadSpam(main)
  let rows = []

  async function load(cursor) {
    const spec = LISTS[list.value]
    try {
      const data = await api('GET', `${spec.path}${qs({ q: search.value.trim(), cursor })}`)
      rows = cursor ? rows.concat(data.leads) : data.leads
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No leads match.' })
          : table(spec.title, spec.columns.map((c) => [c.replace(/_/g, ' '), (r) => (c === 'received_at' ? when(r[c]) : r[c] ?? '—')]), rows),
      )
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
    } catch (error) {
      put(more)
      put(results, errorBox(error))
    }
  }

  exportButton.addEventListener('click', async () => {
    const spec = LISTS[list.value]
    put(message, h('p', { class: 'muted', role: 'status', text: 'Exporting…' }))
    try {
      const all = []
      let cursor
      do {
        const data = await api('GET', `${spec.path}${qs({ q: search.value.trim(), limit: 100, cursor })}`)
        all.push(...data.leads)
        cursor = data.next_cursor
      } while (cursor)
      const lines = [spec.columns.join(','), ...all.map((r) => spec.columns.map((c) => csvCell(r[c])).join(','))]
      const url = URL.createObjectURL(new Blob([lines.join('\r\n') + '\r\n'], { type: 'text/csv' }))
      const link = h('a', { href: url, download: `${list.value}-leads.csv` })
      document.body.append(link)
      link.click()
      link.remove()
      setTimeout(() => URL.revokeObjectURL(url), 10_000)
      put(message, h('p', { class: 'ok', role: 'status', text: `Exported ${all.length} leads.` }))
    } catch (error) {
      put(message, errorBox(error))
    }
  })
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    void load()
  })
  list.addEventListener('change', () => load())
  void load()
}
