// The console shell: sign-in, navigation and a hash router (#/approvals, #/policies/ID…). The
// hash never holds a secret; pages are modules with render(main, params) → cleanup.
import { can, currentSession, onSessionChange, signIn, signOut } from './api.js'
import { announce, errorBox, field, h, put } from './dom.js'
import * as overview from './pages/overview.js'
import * as approvals from './pages/approvals.js'
import * as decisions from './pages/decisions.js'
import * as policies from './pages/policies.js'
import * as agents from './pages/agents.js'
import * as keys from './pages/keys.js'
import * as members from './pages/members.js'
import * as audit from './pages/audit.js'
import * as leads from './pages/leads.js'

const PAGES = [
  { path: 'overview', title: 'Overview', page: overview, role: 'viewer' },
  { path: 'approvals', title: 'Approvals', page: approvals, role: 'viewer' },
  { path: 'decisions', title: 'Decisions', page: decisions, role: 'viewer' },
  { path: 'policies', title: 'Policies', page: policies, role: 'viewer' },
  { path: 'agents', title: 'Agents', page: agents, role: 'viewer' },
  { path: 'keys', title: 'Keys', page: keys, role: 'admin' },
  { path: 'members', title: 'Members', page: members, role: 'admin' },
  { path: 'audit', title: 'Audit', page: audit, role: 'admin' },
  { path: 'leads', title: 'Leads', page: leads, role: 'admin' },
]

const main = document.getElementById('main')
const nav = document.getElementById('nav')
const who = document.getElementById('who')
let cleanup = null

function route() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(2) : ''
  const [path = '', ...rest] = hash.split('/').map((part) => decodeURIComponent(part))
  return { path, params: rest }
}

function renderNav(current) {
  const visible = PAGES.filter((p) => can(p.role))
  put(
    nav,
    h(
      'ul',
      {},
      visible.map((p) => h('li', {}, h('a', { href: `#/${p.path}`, 'aria-current': p.path === current ? 'page' : null, text: p.title }))),
    ),
  )
  nav.hidden = false
  const session = currentSession()
  put(
    who,
    h('span', { text: `${session.email} · ${session.role}` }),
    h('button', { type: 'button', text: 'Sign out', onclick: () => signOut() }),
  )
}

function show() {
  cleanup?.()
  cleanup = null
  const session = currentSession()
  if (!session) {
    nav.hidden = true
    put(nav)
    put(who)
    document.title = 'Sign in · Steward console'
    renderSignIn()
    return
  }
  const { path, params } = route()
  const entry = PAGES.find((p) => p.path === path) ?? null
  if (!entry) {
    location.replace('#/overview')
    return
  }
  renderNav(entry.path)
  document.title = `${entry.title} · Steward console`
  if (!can(entry.role)) {
    put(main, h('h1', { text: entry.title }), h('p', { class: 'panel', role: 'status', text: `Your role (${session.role}) does not include this page.` }))
  } else {
    put(main)
    cleanup = entry.page.render(main, params) ?? null
  }
  // After a navigation, focus goes to the new page's heading, so keyboard and screen-reader users start there.
  if (navigated) {
    const heading = main.querySelector('h1')
    if (heading) {
      heading.tabIndex = -1
      heading.focus()
    }
  }
  navigated = false
}

let navigated = false

function renderSignIn() {
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true })
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true })
  const message = h('div', {})
  const submit = h('button', { type: 'submit', class: 'primary', text: 'Sign in' })
  const form = h(
    'form',
    { method: 'post', novalidate: false },
    field('Email', email),
    field('Password', password),
    message,
    submit,
  )
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    submit.disabled = true
    put(message)
    try {
      const grant = await signIn(email.value.trim(), password.value)
      const orgs = grant.organizations ?? []
      if (orgs.length > 1) chooseOrganization(orgs, email.value.trim(), password.value, grant.organization_id)
      else password.value = ''
    } catch (error) {
      put(message, errorBox(error.status === 400 ? new Error('Wrong email or password.') : error))
      submit.disabled = false
      password.focus()
    }
  })
  const reason = signOut.reason
  signOut.reason = null
  put(
    main,
    h(
      'section',
      { class: 'signin panel', 'aria-labelledby': 'signin-title' },
      h('h1', { id: 'signin-title', text: 'Sign in to Steward' }),
      reason ? h('p', { role: 'status', class: 'error', text: reason }) : null,
      form,
      h('p', { class: 'hint', text: 'Your session is kept in this tab’s memory only: reloading or closing the page signs you out.' }),
    ),
  )
  email.focus()
}

/** "Acme (admin)"; two organizations of the same name also show the start of their ids. */
function organizationLabel(org, orgs) {
  const name = org.name || org.organization_id
  const twin = orgs.some((o) => o !== org && (o.name || o.organization_id) === name)
  return `${name} (${org.role}${twin ? `, id ${org.organization_id.slice(0, 8)}` : ''})`
}

/** Several organizations: the first is already signed in; another one means signing in there. */
function chooseOrganization(orgs, email, password, current) {
  const select = h('select', {}, orgs.map((o) => h('option', { value: o.organization_id, selected: o.organization_id === current, text: organizationLabel(o, orgs) })))
  const message = h('div', {})
  const form = h('form', { method: 'post' }, field('Organization', select), message, h('button', { type: 'submit', class: 'primary', text: 'Continue' }))
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    try {
      password = password || ''
      if (select.value !== current) await signIn(email, password, select.value)
      else {
        currentSession().chosen = true
        show()
      }
      password = ''
    } catch (error) {
      put(message, errorBox(error))
    }
  })
  put(main, h('section', { class: 'signin panel', 'aria-labelledby': 'org-title' }, h('h1', { id: 'org-title', text: 'Choose an organization' }), form))
  select.focus()
}

let lastSession = null
onSessionChange((session) => {
  // A silent refresh changes tokens, not the page.
  const same = session && lastSession && session.organizationId === lastSession.organizationId
  lastSession = session
  if (same) return
  // Several organizations: the sign-in form asks which one first.
  if (session && (session.organizations ?? []).length > 1 && !session.chosen) return
  if (session) {
    // Land on the Overview unless the address names a page this role has (no hashchange: one render).
    const page = PAGES.find((p) => p.path === route().path)
    if (!page || !can(page.role)) history.replaceState(null, '', '#/overview')
    announce('Signed in')
  }
  // Signing in or out replaces the whole page: focus its heading (or the sign-in form's field).
  navigated = Boolean(session)
  show()
})

window.addEventListener('hashchange', () => {
  if (location.hash === '#main') return
  navigated = true
  show()
})
document.getElementById('skip')?.addEventListener('click', (event) => {
  event.preventDefault()
  main.focus()
})
show()
