// Spam defence and a person's data, sections of the leads page: each list's spam settings
// (honeypot field, CAPTCHA provider, secret, verify URL, fail mode, retention; changed by Owners),
// the submissions kept apart as spam with a Restore button, and, for Owners, the export and
// erasure of everything held about one email (sent in the request body, never in a URL).
import { api, can, qs } from '../api.js'
import { badge, errorBox, field, h, put, table, when } from '../dom.js'

const TITLES = { 'demo-requests': 'Demo requests', newsletter: 'Newsletter' }
const PROVIDERS = [['', 'none'], ['turnstile', 'Cloudflare Turnstile'], ['hcaptcha', 'hCaptcha'], ['recaptcha', 'Google reCAPTCHA']]

/** One list's settings form; after a save it is replaced by a form of the saved settings, saying so. */
function settingsForm(settings, notice = null) {
  const owner = can('owner')
  const honeypot = h('input', { type: 'text', maxlength: 64, value: settings.honeypot_field ?? '', disabled: !owner, placeholder: 'e.g. website' })
  const provider = h('select', { disabled: !owner }, PROVIDERS.map(([value, text]) => h('option', { value, text })))
  provider.value = settings.captcha_provider ?? ''
  const secret = h('input', { type: 'password', autocomplete: 'off', maxlength: 1024, disabled: !owner, placeholder: settings.captcha_secret_set ? 'stored: leave empty to keep' : '' })
  const verifyUrl = h('input', { type: 'url', maxlength: 2048, value: settings.captcha_provider ? (settings.captcha_verify_url ?? '') : '', disabled: !owner, placeholder: "the provider's own" })
  const failMode = h('select', { disabled: !owner }, h('option', { value: 'closed', text: 'closed: refuse while the provider is down' }), h('option', { value: 'open', text: 'open: keep as spam for review' }))
  failMode.value = settings.captcha_fail_mode
  const retention = h('input', { type: 'number', min: 1, max: 3650, value: settings.retention_days ?? '', disabled: !owner, placeholder: String(settings.retention_days_effective) })
  const status = h('div', {}, notice ? h('p', { class: 'ok', role: 'status', text: notice }) : null)
  const save = h('button', { type: 'submit', class: 'primary', text: 'Save', disabled: !owner })
  const form = h(
    'form',
    { method: 'post', class: 'panel', 'aria-label': `${TITLES[settings.list]} spam settings` },
    h('h3', { text: TITLES[settings.list] }),
    field('Honeypot field', honeypot, { hint: 'A hidden form field people leave empty. A submission with it filled is kept as spam and answered as a success. Empty: off.' }),
    field('CAPTCHA', provider, { hint: settings.captcha_token_field ? `The form posts the token in ${settings.captcha_token_field}.` : 'Verified server-side before a lead is stored.' }),
    field('CAPTCHA secret', secret, { hint: 'Write-only: sealed at rest, never shown again.' }),
    field('Verify URL', verifyUrl, { hint: "Empty: the provider's siteverify URL." }),
    field('When the provider is down', failMode),
    field('Keep spam (days)', retention, { hint: `Empty: the server default (${settings.retention_days_effective}).` }),
    h('div', { class: 'actions' }, save),
    status,
  )
  if (!owner) form.append(h('p', { class: 'muted', text: 'Only Owners change these settings.' }))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const body = {
      honeypot_field: honeypot.value.trim() || null,
      captcha_provider: provider.value || null,
      captcha_fail_mode: failMode.value,
      retention_days: retention.value === '' ? null : Number(retention.value),
    }
    if (secret.value !== '') body.captcha_secret = secret.value
    if (!provider.value) {
      body.captcha_secret = null
      body.captcha_verify_url = null
    } else body.captcha_verify_url = verifyUrl.value.trim() || null
    try {
      const saved = await api('PATCH', `/leads/lists/${settings.list}/spam`, body)
      const next = settingsForm(saved, 'Saved.')
      form.replaceWith(next)
      next.querySelector('button[type=submit]')?.focus()
    } catch (error) {
      put(status, errorBox(error))
    }
  })
  return form
}

function spamSection() {
  const filter = h('select', {}, [['', 'both lists'], ['demo-requests', 'Demo requests'], ['newsletter', 'Newsletter']].map(([value, text]) => h('option', { value, text })))
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const more = h('div', { class: 'actions' })
  const message = h('div', {})
  let rows = []
  async function restore(row) {
    try {
      await api('POST', `/leads/spam/${row.id}/restore`)
      put(message, h('p', { class: 'ok', role: 'status', text: `${row.email} is a lead of ${TITLES[row.list]} now.` }))
      void load()
    } catch (error) {
      put(message, errorBox(error))
    }
  }
  async function load(cursor) {
    try {
      const data = await api('GET', `/leads/spam${qs({ list: filter.value, cursor })}`)
      rows = cursor ? rows.concat(data.spam) : data.spam
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No spam kept.' })
          : table('Spam', [
              ['received', (r) => when(r.received_at)],
              ['list', (r) => TITLES[r.list]],
              ['email', (r) => r.email],
              ['reason', (r) => badge(r.reason)],
              ['deleted after', (r) => when(r.purge_after)],
              ['action', (r) => h('button', { type: 'button', text: 'Restore', 'aria-label': `Restore ${r.email} as a lead`, onclick: () => restore(r) })],
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
  return h('section', { 'aria-label': 'Spam kept apart' }, h('h3', { text: 'Kept as spam' }), field('List', filter), message, results, more, h('div', { class: 'actions' }, h('button', { type: 'button', text: 'Refresh', onclick: () => load() })))
}

function personSection() {
  const email = h('input', { type: 'email', maxlength: 254, required: true, autocomplete: 'off' })
  const status = h('div', {})
  const exportButton = h('button', { type: 'submit', text: 'Export' })
  const eraseButton = h('button', { type: 'button', class: 'danger', text: 'Erase' })
  const form = h('form', { method: 'post', class: 'panel', 'aria-label': "A person's data" }, h('h3', { text: "A person's data" }), field('Email', email, { hint: 'Everything held about this address: leads, subscriptions and consents, mails, spam. Matched ignoring case.' }), h('div', { class: 'actions' }, exportButton, eraseButton), status)
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    try {
      const data = await api('POST', '/leads/people/export', { email: email.value })
      const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }))
      const link = h('a', { href: url, download: 'person-export.json' })
      document.body.append(link)
      link.click()
      link.remove()
      setTimeout(() => URL.revokeObjectURL(url), 10_000)
      const n = Object.values(data.records).reduce((sum, rows) => sum + rows.length, 0)
      put(status, h('p', { class: 'ok', role: 'status', text: `Exported ${n} records.` }))
    } catch (error) {
      put(status, errorBox(error))
    }
  })
  eraseButton.addEventListener('click', async () => {
    if (!email.value.trim() || !window.confirm(`Erase everything held about ${email.value.trim()}? This cannot be undone.`)) return
    try {
      const data = await api('POST', '/leads/people/erase', { email: email.value })
      const n = Object.values(data.deleted).reduce((sum, count) => sum + count, 0)
      put(status, h('p', { class: 'ok', role: 'status', text: n === 0 ? 'Nothing was held about this address.' : `Erased ${n} records.` }))
    } catch (error) {
      put(status, errorBox(error))
    }
  })
  return form
}

/** Appends the spam and person-data sections to the leads page. */
export function renderLeadSpam(main) {
  const section = h('section', { 'aria-label': 'Spam defence' }, h('h2', { text: 'Spam' }))
  const body = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  section.append(body)
  main.append(section)
  async function load() {
    try {
      const lists = await Promise.all(Object.keys(TITLES).map((list) => api('GET', `/leads/lists/${list}/spam`)))
      put(body, ...lists.map((settings) => settingsForm(settings)), spamSection(), can('owner') ? personSection() : null)
    } catch (error) {
      put(body, errorBox(error))
    }
  }
  void load()
}
