// Policies as code (#/policies/code): paste or upload a JSON policy file (the whole desired set),
// see the plan (created, changed field by field, archived; what it would have decided on the
// logged decisions) and apply exactly that plan as one ruleset revision. The server refuses an
// apply when the policies changed since the plan (docs/policies-as-code.md).
import { api, can, currentSession, qs } from '../api.js'
import { announce, badge, errorBox, field, h, put, table, unavailable, when } from '../dom.js'

const WRITABLE = ['name', 'description', 'effect', 'agents', 'actions', 'resources', 'condition', 'approval', 'mode', 'enabled', 'limits']

/** The policies of a pasted file: `{"policies": [...]}` or a bare array; throws a readable message. */
export function policiesOf(text) {
  let parsed
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new Error(`The file is not JSON: ${error.message}`)
  }
  const policies = Array.isArray(parsed) ? parsed : parsed?.policies
  if (!Array.isArray(policies)) throw new Error('The file must be {"policies": [...]} (or an array of policies)')
  return policies
}

function show(value) {
  return value === null || value === undefined ? '—' : typeof value === 'string' ? value : JSON.stringify(value)
}

function planView(plan) {
  const changes = plan.create.length + plan.change.length + plan.archive.length
  const changed = Object.entries(plan.replay.changed)
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'plan-title' },
    h('h2', { id: 'plan-title', tabindex: '-1', text: 'Plan' }),
    h('p', { role: 'status', text: changes === 0 ? `Nothing to change: the ${plan.unchanged} policies in force match the file.` : `${plan.create.length} to create, ${plan.change.length} to change, ${plan.archive.length} to archive, ${plan.unchanged} unchanged.` }),
    plan.create.length === 0
      ? null
      : [h('h3', { text: 'Created' }), table('Policies created', [['Name', (c) => c.name], ['Effect', (c) => badge(c.policy.effect)], ['Actions', (c) => h('code', { text: c.policy.actions.join(', ') })], ['Mode', (c) => badge(c.policy.mode)]], plan.create)],
    plan.change.length === 0
      ? null
      : [
          h('h3', { text: 'Changed' }),
          table('Policies changed', [
            ['Name', (c) => h('a', { href: `#/policies/${c.policy_id}`, text: c.name })],
            ['Version', (c) => `${c.version} → ${c.version + 1}`],
            ['Fields', (c) => h('ul', {}, Object.entries(c.fields).map(([name, { from, to }]) => h('li', {}, h('strong', { text: `${name}: ` }), h('code', { text: show(from) }), ' → ', h('code', { text: show(to) }))))],
          ], plan.change),
        ],
    plan.archive.length === 0
      ? null
      : [h('h3', { text: 'Archived' }), table('Policies archived', [['Name', (c) => h('a', { href: `#/policies/${c.policy_id}`, text: c.name })], ['Version', (c) => String(c.version)]], plan.archive)],
    h('h3', { text: 'On the logged decisions' }),
    h('p', {
      text:
        changes === 0
          ? 'Nothing replayed: nothing would change.'
          : `${plan.replay.evaluated} logged decision${plan.replay.evaluated === 1 ? '' : 's'} replayed; ${changed.length === 0 ? 'no outcome would change' : changed.map(([k, n]) => `${n} ${k}`).join(', ')}.`,
    }),
    plan.replay.sample.length === 0
      ? null
      : table('Decisions that would change', [['When', (s) => when(s.evaluated_at)], ['Agent', (s) => s.agent], ['Action', (s) => h('code', { text: s.action })], ['Resource', (s) => s.resource || '—'], ['Outcome', (s) => h('span', {}, badge(s.from), ' → ', badge(s.to))]], plan.replay.sample),
  )
}

export function renderPolicyCode(main) {
  const writable = can('manager')
  const text = h('textarea', { class: 'code', rows: 14, spellcheck: 'false', placeholder: '{"policies": [{"name": "…", "effect": "deny", "actions": ["…"]}]}' })
  const file = h('input', { type: 'file', accept: 'application/json,.json' })
  const message = h('div', {})
  const out = h('div', {})
  const planButton = h('button', { type: 'button', class: 'primary', text: 'Plan' })
  const applyButton = h('button', { type: 'button', text: 'Apply this plan', hidden: true })
  /** The file and base last planned: apply sends exactly these, never text edited since. */
  let planned = null

  const forget = () => {
    planned = null
    applyButton.hidden = true
  }
  text.addEventListener('input', forget)
  file.addEventListener('change', async () => {
    const chosen = file.files?.[0]
    if (!chosen) return
    text.value = await chosen.text()
    forget()
    announce(`Loaded ${chosen.name}`)
  })

  async function current() {
    put(message)
    try {
      const all = []
      let cursor
      do {
        const page = await api('GET', `/policies${qs({ organization_id: currentSession().organizationId, cursor, limit: 100 })}`)
        all.push(...page.policies)
        cursor = page.next_cursor
      } while (cursor)
      text.value = JSON.stringify({ policies: all.map((p) => Object.fromEntries(WRITABLE.filter((k) => k in p).map((k) => [k, p[k]]))) }, null, 2)
      forget()
      announce(`Loaded the ${all.length} policies in force`)
    } catch (error) {
      put(message, errorBox(error))
    }
  }

  async function plan() {
    forget()
    put(message)
    let policies
    try {
      policies = policiesOf(text.value)
    } catch (error) {
      put(message, errorBox(error))
      return
    }
    put(out, h('p', { class: 'muted', role: 'status', text: 'Planning…' }))
    try {
      const answer = await api('POST', '/policies/plan', { policies })
      put(out, planView(answer))
      if (writable && answer.create.length + answer.change.length + answer.archive.length > 0) {
        planned = { policies, base: answer.base }
        applyButton.hidden = false
      }
      out.querySelector('#plan-title')?.focus()
    } catch (error) {
      put(out, error.status === 404 ? unavailable('Policy sets') : errorBox(error))
    }
  }

  async function apply() {
    if (!planned) return
    applyButton.disabled = true
    try {
      const answer = await api('POST', '/policies/apply', planned)
      forget()
      const summary = answer.applied ? `Applied: ${answer.create.length} created, ${answer.change.length} changed, ${answer.archive.length} archived.` : 'Nothing to apply.'
      put(message, h('p', { class: 'ok', role: 'status', text: summary }))
      put(out)
      announce(summary)
    } catch (error) {
      if (error.status === 409) forget()
      put(message, errorBox(error.status === 409 ? new Error(`${error.message}. Plan again to see the new difference.`) : error))
    } finally {
      applyButton.disabled = false
    }
  }

  planButton.addEventListener('click', plan)
  applyButton.addEventListener('click', apply)
  put(
    main,
    h('p', {}, h('a', { href: '#/policies', text: '← Policies' })),
    h('h1', { text: 'Policies as code' }),
    h('p', { class: 'muted', text: 'The file is the whole desired set: policies are matched by name; a policy in force the file does not name is archived; a field left out takes its default. Apply writes the plan as one ruleset revision, and is refused if the policies changed since the plan.' }),
    field('Policy file (JSON)', text, { hint: '{"policies": [...]}: each entry a policy as the API takes it (name, effect, actions, …).' }),
    field('Or upload a file', file),
    h('div', { class: 'actions' }, planButton, h('button', { type: 'button', text: 'Start from the policies in force', onclick: current }), applyButton),
    message,
    out,
  )
}
