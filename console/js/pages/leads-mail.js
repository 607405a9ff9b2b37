// Lead mail, a section of the leads page: whether SMTP is configured, each list's mail settings
// (notification addresses; for the newsletter double opt-in, the consent text and its version,
// the confirmation link's lifetime), changed by Owners, and the outbox with every attempt.
import { api, can, qs } from '../api.js'
import { badge, errorBox, field, h, put, splitList, table, when } from '../dom.js'

const TITLES = { 'demo-requests': 'Demo requests', newsletter: 'Newsletter' }

function settingsForm(settings, onSaved) {
  const owner = can('owner')
  const notify = h('textarea', { rows: 2, value: settings.notify.join('\n'), disabled: !owner })
  const controls = [field('Notify (one address a line)', notify, { hint: 'Each new lead of this list is emailed here. Empty: no notification.' })]
  const extra = {}
  if (settings.list === 'newsletter') {
    extra.double_opt_in = h('input', { type: 'checkbox', checked: settings.double_opt_in, disabled: !owner })
    extra.consent_text = h('textarea', { rows: 3, maxlength: 4000, value: settings.consent_text ?? '', disabled: !owner })
    extra.consent_version = h('input', { type: 'text', maxlength: 100, value: settings.consent_version ?? '', disabled: !owner })
    extra.hours = h('input', { type: 'number', min: 1, max: 720, value: Math.round(settings.confirm_ttl_seconds / 3600), disabled: !owner })
    controls.push(
      field('Double opt-in', extra.double_opt_in, { inline: true, hint: 'A subscription stays pending until the subscriber follows the link in a confirmation mail.' }),
      field('Consent text', extra.consent_text, { hint: 'Quoted in the confirmation mail.' }),
      field('Consent version', extra.consent_version, { hint: 'Recorded with each subscription and its confirmation.' }),
      field('Confirmation link lifetime (hours)', extra.hours),
    )
  }
  const status = h('div', {})
  const save = h('button', { type: 'submit', class: 'primary', text: 'Save', disabled: !owner })
  const form = h('form', { method: 'post', class: 'panel', 'aria-label': `${TITLES[settings.list]} mail settings` }, h('h3', { text: TITLES[settings.list] }), ...controls, h('div', { class: 'actions' }, save), status)
  if (!owner) form.append(h('p', { class: 'muted', text: 'Only Owners change these settings.' }))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const body = { notify: splitList(notify.value) }
    if (settings.list === 'newsletter') {
      body.double_opt_in = extra.double_opt_in.checked
      body.consent_text = extra.consent_text.value.trim() || null
      body.consent_version = extra.consent_version.value.trim() || null
      body.confirm_ttl_seconds = Math.round(Number(extra.hours.value) * 3600)
    }
    try {
      await api('PATCH', `/leads/lists/${settings.list}`, body)
      put(status, h('p', { class: 'ok', role: 'status', text: 'Saved.' }))
      onSaved()
    } catch (error) {
      put(status, errorBox(error))
    }
  })
  return form
}

function outboxSection() {
  const filter = h('select', {}, ['', 'pending', 'sent', 'failed', 'cancelled'].map((s) => h('option', { value: s, text: s || 'any' })))
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const more = h('div', { class: 'actions' })
  let rows = []
  async function load(cursor) {
    try {
      const data = await api('GET', `/leads/outbox${qs({ status: filter.value, cursor })}`)
      rows = cursor ? rows.concat(data.mails) : data.mails
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No mail queued.' })
          : table('Lead mail outbox', [
              ['queued', (r) => when(r.created_at)],
              ['kind', (r) => r.kind],
              ['to', (r) => r.recipients.join(', ')],
              ['subject', (r) => r.subject],
              ['status', (r) => badge(r.status)],
              ['attempts', (r) => String(r.attempts)],
              ['next attempt', (r) => when(r.next_attempt_at)],
              ['last error', (r) => r.last_error ?? '—'],
            ], rows),
      )
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
    } catch (error) {
      put(more)
      put(results, errorBox(error))
    }
  }
  filter.addEventListener('change', () => load())
  void load()
  return h('section', { 'aria-label': 'Outbox' }, h('h3', { text: 'Outbox' }), field('Status', filter), results, more, h('div', { class: 'actions' }, h('button', { type: 'button', text: 'Refresh', onclick: () => load() })))
}

/** Appends the lead-mail section to the leads page. */
export function renderLeadMail(main) {
  const section = h('section', { 'aria-label': 'Lead mail' }, h('h2', { text: 'Mail' }))
  const body = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  section.append(body)
  main.append(section)
  async function load() {
    try {
      const data = await api('GET', '/leads/lists')
      put(
        body,
        data.smtp_configured
          ? h('p', { class: 'muted', text: 'SMTP is configured: notifications and confirmations are sent from the outbox, retried with backoff.' })
          : h('p', { class: 'error', role: 'status', text: 'SMTP is not configured (SMTP_URL or SMTP_HOST, and SMTP_FROM): no mail is sent.' }),
        ...data.lists.map((settings) => settingsForm(settings, load)),
        outboxSection(),
      )
    } catch (error) {
      put(body, errorBox(error))
    }
  }
  void load()
}
