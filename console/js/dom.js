// DOM helpers. Text always goes in as text (textContent), never as HTML: nothing a server or a
// user sent can become markup or script.

/**
 * h('button', { class: 'primary', onclick: fn, 'aria-label': 'x' }, 'Save') builds an element.
 * Properties starting with "on" are listeners; `text` sets textContent; null/false skip.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value)
    else if (name === 'text') el.textContent = String(value)
    else if (name === 'value') el.value = value
    else if (name === 'checked') el.checked = Boolean(value)
    else if (name === 'class') el.className = value
    else el.setAttribute(name, value === true ? '' : String(value))
  }
  append(el, children)
  return el
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue
    el.append(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

/** Replaces an element's content. */
export function put(el, ...children) {
  el.replaceChildren()
  append(el, children)
  return el
}

let idCounter = 0
export function uid(prefix = 'id') {
  idCounter += 1
  return `${prefix}-${idCounter}`
}

/** A labelled form field; `control` is an input/select/textarea built with h(). */
export function field(labelText, control, { hint, inline } = {}) {
  if (!control.id) control.id = uid('f')
  const parts = [h('label', { for: control.id, text: labelText }), control]
  if (hint) {
    const hintEl = h('p', { class: 'hint', id: uid('hint'), text: hint })
    control.setAttribute('aria-describedby', hintEl.id)
    parts.push(hintEl)
  }
  return h('div', { class: inline ? 'field inline' : 'field' }, parts)
}

/** Says something to screen readers without moving focus. */
export function announce(message) {
  const live = document.getElementById('live')
  if (!live) return
  live.textContent = ''
  setTimeout(() => {
    live.textContent = message
  }, 50)
}

export function when(iso) {
  if (!iso) return '—'
  const date = new Date(iso)
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString()
}

export function badge(value) {
  return h('span', { class: `badge ${String(value).replace(/[^a-z_]/g, '')}`, text: String(value).replace('_', ' ') })
}

export function pretty(value) {
  return h('pre', {}, JSON.stringify(value ?? null, null, 2))
}

/** A message for a page whose API this server does not have yet (404 on the list route). */
export function unavailable(what) {
  return h('div', { class: 'panel', role: 'status' }, h('p', {}, h('strong', { text: `${what} are not available on this server.` })), h('p', { class: 'muted', text: 'The server answered 404: it does not offer this feature yet. Nothing is wrong with your session.' }))
}

export function errorBox(error) {
  return h('p', { class: 'error', role: 'alert', text: error?.message ?? String(error) })
}

/** A one-time secret with a copy button: shown once, never stored by the console. */
export function secretBox(title, secret) {
  const input = h('input', { type: 'text', readonly: true, value: secret, 'aria-label': `${title} (shown once)` })
  const status = h('span', { role: 'status', class: 'ok' })
  const copy = h('button', {
    type: 'button',
    text: 'Copy',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(secret)
        status.textContent = 'Copied'
      } catch {
        input.select()
        status.textContent = 'Selected: press Ctrl+C to copy'
      }
    },
  })
  return h(
    'div',
    { class: 'secret', role: 'region', 'aria-label': title },
    h('p', {}, h('strong', { text: title }), ' — shown this once. Copy it now: the server keeps only its hash.'),
    input,
    h('div', { class: 'actions' }, copy, status),
  )
}

/** Renders rows into a table with a caption; `columns` is [[header, (row) => cell]]. */
export function table(caption, columns, rows) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', { class: 'visually-hidden', text: caption }),
      h('thead', {}, h('tr', {}, columns.map(([title]) => h('th', { scope: 'col', text: title })))),
      h('tbody', {}, rows.map((row) => h('tr', {}, columns.map(([, cell]) => h('td', {}, cell(row)))))),
    ),
  )
}

/** Comma- or newline-separated text to a list of trimmed non-empty entries. */
export function splitList(text) {
  return String(text)
    .split(/[\n,]/)
    .map((part) => part.trim())
    .filter(Boolean)
}

/** "2026-01-02T03:04" from a datetime-local input to RFC 3339 in UTC, or undefined. */
export function localToIso(value) {
  if (!value) return undefined
  const date = new Date(value)
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString()
}
