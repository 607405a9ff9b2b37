// Policies: the list; create and edit with the CEL condition checked as you type (the server
// compiles it: a simulation with the draft, which writes nothing); versions and rollback; a
// replay of the draft against logged decisions before saving.
import { api, can, currentSession, qs } from '../api.js'
import { announce, badge, errorBox, field, h, put, splitList, table, unavailable, when } from '../dom.js'
import { policyHits } from './policy-hits.js'
import { creatorCell } from '../names.js'
import { renderPolicyCode } from './policies-code.js'

const org = () => currentSession().organizationId

export function render(main, params) {
  if (params[0] === 'new') return renderEditor(main, null)
  if (params[0] === 'code') return renderPolicyCode(main)
  if (params[0]) return renderEditor(main, params[0])
  const results = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const more = h('div', { class: 'actions' })
  put(
    main,
    h('h1', { text: 'Policies' }),
    can('manager') ? h('p', {}, h('a', { class: 'button primary', href: '#/policies/new', text: 'New policy' }), ' ', h('a', { class: 'button', href: '#/policies/code', text: 'Policies as code' })) : null,
    results,
    more,
  )
  let rows = []
  async function load(cursor) {
    try {
      const data = await api('GET', `/policies${qs({ organization_id: org(), cursor })}`)
      rows = cursor ? rows.concat(data.policies) : data.policies
      put(
        results,
        rows.length === 0
          ? h('p', { role: 'status', text: 'No policies yet.' })
          : table('Policies', [
              ['Name', (p) => h('a', { href: `#/policies/${p.policy_id}`, text: p.name })],
              ['Effect', (p) => badge(p.effect)],
              ['Actions', (p) => h('code', { text: p.actions.join(', ') })],
              ['Agents', (p) => p.agents.join(', ')],
              ['Mode', (p) => badge(p.mode)],
              ['Enabled', (p) => (p.enabled ? 'yes' : 'no')],
              ['Version', (p) => String(p.version)],
              ['Updated', (p) => when(p.updated_at)],
            ], rows),
      )
      put(more, data.next_cursor ? h('button', { type: 'button', text: 'Load more', onclick: () => load(data.next_cursor) }) : null)
    } catch (error) {
      put(results, errorBox(error))
    }
  }
  void load()
}

function renderEditor(main, id) {
  const writable = can('manager')
  const name = h('input', { type: 'text', required: true, maxlength: 200 })
  const description = h('textarea', { rows: 2 })
  const effect = h('select', {}, ['deny', 'require_approval', 'allow'].map((v) => h('option', { value: v, text: v.replace('_', ' ') })))
  const agents = h('input', { type: 'text', value: '*' })
  const actions = h('input', { type: 'text', required: true })
  const resources = h('input', { type: 'text', value: '*' })
  const condition = h('textarea', { class: 'code', rows: 3, spellcheck: 'false' })
  const conditionError = h('div', { id: 'condition-error', 'aria-live': 'polite' })
  condition.setAttribute('aria-describedby', 'condition-error')
  const mode = h('select', {}, [['enforce', 'enforce'], ['monitor', 'monitor (shadow: logs what it would do)']].map(([v, t]) => h('option', { value: v, text: t })))
  const enabled = h('input', { type: 'checkbox', checked: true })
  const approvers = h('input', { type: 'number', min: 1, max: 5, inputmode: 'numeric' })
  const approverRoles = h('input', { type: 'text', placeholder: 'owner, admin, manager' })
  const timeout = h('input', { type: 'number', min: 30, max: 604800, inputmode: 'numeric' })
  const approvalBox = h(
    'fieldset',
    { class: 'panel' },
    h('legend', { text: 'Approval' }),
    field('Approvers required', approvers, { hint: '1 to 5 distinct people; empty: 1.', inline: true }),
    field('Approver roles', approverRoles, { hint: 'Comma-separated; empty: owner, admin, manager.', inline: true }),
    field('Approval timeout (seconds)', timeout, { hint: '30 to 604800; empty: 900. Silence is a deny.', inline: true }),
  )
  const showApproval = () => {
    approvalBox.hidden = effect.value !== 'require_approval'
  }
  effect.addEventListener('change', showApproval)
  const message = h('div', {})
  const replayOut = h('div', {})
  const controls = [name, description, effect, agents, actions, resources, condition, mode, enabled, approvers, approverRoles, timeout]
  if (!writable) for (const c of controls) c.disabled = true
  const save = h('button', { type: 'submit', class: 'primary', text: id ? 'Save changes' : 'Create policy' })
  const preview = h('button', { type: 'button', text: 'Preview changes (replay)' })
  const form = h(
    'form',
    { method: 'post', 'aria-label': 'Policy' },
    field('Name', name),
    field('Description', description),
    field('Effect', effect),
    field('Agents', agents, { hint: 'Agent handles, comma-separated; * matches any run of characters.' }),
    field('Actions', actions, { hint: 'Action patterns, comma-separated, such as payments.*' }),
    field('Resources', resources, { hint: 'Resource patterns, comma-separated.' }),
    h('div', { class: 'field' }, h('label', { for: 'condition', text: 'Condition (CEL)' }), condition, h('p', { class: 'hint', text: 'Optional. Variables: agent, action, resource, args, context, now. Checked by the server as you type.' }), conditionError),
    approvalBox,
    field('Mode', mode),
    h('div', { class: 'field check' }, enabled, ' ', h('label', { for: 'enabled', text: 'Enabled' })),
    message,
    writable ? h('div', { class: 'actions' }, save, preview) : h('p', { class: 'muted', text: 'Your role can read policies but not change them.' }),
  )
  condition.id = 'condition'
  showApproval()
  enabled.id = 'enabled'
  const versions = h('section', { 'aria-labelledby': 'versions-title' })
  put(main, h('p', {}, h('a', { href: '#/policies', text: 'Back to policies' })), h('h1', { text: id ? 'Edit policy' : 'New policy' }), form, replayOut, id ? policyHits(id) : null, id ? versions : null)

  const draft = () => {
    const body = {
      name: name.value.trim(),
      description: description.value,
      effect: effect.value,
      agents: splitList(agents.value),
      actions: splitList(actions.value),
      resources: splitList(resources.value),
      mode: mode.value,
      enabled: enabled.checked,
    }
    // Approval settings only when given, so the server's defaults apply otherwise.
    if (effect.value === 'require_approval' && (approvers.value || approverRoles.value.trim() || timeout.value)) {
      body.approval = {}
      if (approvers.value) body.approval.approvers_required = Number(approvers.value)
      if (approverRoles.value.trim()) body.approval.approver_roles = splitList(approverRoles.value)
      if (timeout.value) body.approval.timeout_seconds = Number(timeout.value)
    }
    // Sent only when there is one, so a server without conditions still takes the rest.
    if (condition.value.trim()) body.condition = condition.value
    else if (id && hasCondition) body.condition = null
    return body
  }

  let checkTimer = null
  let checkSeq = 0
  // null: not known yet; false: this server cannot simulate (or this role may not), so save checks.
  let canSimulate = null
  condition.addEventListener('input', () => {
    clearTimeout(checkTimer)
    checkTimer = setTimeout(checkCondition, 350)
  })
  async function checkCondition() {
    const text = condition.value
    const seq = ++checkSeq
    if (!text.trim()) return showConditionError(null)
    if (canSimulate === false) return showConditionError(null, 'The condition is checked when you save.')
    try {
      await api('POST', '/decisions/simulate', {
        agent: 'console-condition-check',
        action: 'console.condition-check',
        policies: [{ effect: 'deny', actions: ['console.condition-check'], condition: text }],
      })
      canSimulate = true
      if (seq === checkSeq) showConditionError(null, 'The condition compiles.')
    } catch (error) {
      if (seq !== checkSeq) return
      // No simulation on this server (404) or no permission for it (403): checked on save instead.
      if (error.status === 400) showConditionError(error.message.replace(/^policies\.0\./, ''))
      else if (error.status === 404 || error.status === 403) {
        canSimulate = false
        showConditionError(null, 'The condition is checked when you save.')
      }
    }
  }
  function showConditionError(text, ok) {
    condition.setAttribute('aria-invalid', text ? 'true' : 'false')
    put(conditionError, text ? h('p', { class: 'error', text }) : ok ? h('p', { class: 'hint', text: ok }) : null)
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    // A check still pending must not overwrite what the save answers.
    clearTimeout(checkTimer)
    checkSeq++
    put(message)
    save.disabled = true
    try {
      const body = draft()
      const saved = id
        ? await api('PATCH', `/policies/${encodeURIComponent(id)}${qs({ organization_id: org() })}`, body)
        : await api('POST', `/policies${qs({ organization_id: org() })}`, body)
      announce(id ? 'Policy saved' : 'Policy created')
      if (!id) location.hash = `#/policies/${saved.policy_id}`
      else {
        fill(saved)
        put(message, h('p', { class: 'ok', role: 'status', text: `Saved as version ${saved.version}.` }))
        void loadVersions()
      }
    } catch (error) {
      if (error.status === 400 && /condition/i.test(error.message)) {
        showConditionError(error.message)
        condition.focus()
      } else put(message, errorBox(error))
    } finally {
      save.disabled = false
    }
  })

  preview.addEventListener('click', async () => {
    put(replayOut, h('p', { class: 'muted', role: 'status', text: 'Replaying logged decisions against this draft…' }))
    try {
      const one = draft()
      if (id) one.policy_id = id
      const result = await api('POST', '/policies/replay', { policies: [one] })
      const changed = Object.entries(result.changed ?? {})
      put(
        replayOut,
        h(
          'section',
          { class: 'panel', 'aria-labelledby': 'replay-title' },
          h('h2', { id: 'replay-title', text: 'What would change' }),
          h('p', { role: 'status', text: `${result.evaluated} logged decisions evaluated; ${changed.reduce((n, [, c]) => n + c, 0)} would change.` }),
          changed.length ? h('ul', {}, changed.map(([k, n]) => h('li', { text: `${k}: ${n}` }))) : null,
          (result.sample ?? []).length
            ? table('Changed decisions', [
                ['Time', (s) => when(s.evaluated_at)], ['Agent', (s) => s.agent], ['Action', (s) => s.action], ['Resource', (s) => s.resource || '—'],
                ['Was', (s) => badge(s.from)], ['Would be', (s) => badge(s.to)],
              ], result.sample)
            : null,
        ),
      )
    } catch (error) {
      put(replayOut, error.status === 404 ? unavailable('Replays') : errorBox(error))
    }
  })

  let hasCondition = false
  function fill(p) {
    hasCondition = 'condition' in p
    name.value = p.name
    description.value = p.description ?? ''
    effect.value = p.effect
    agents.value = p.agents.join(', ')
    actions.value = p.actions.join(', ')
    resources.value = p.resources.join(', ')
    condition.value = typeof p.condition === 'string' ? p.condition : ''
    mode.value = p.mode
    enabled.checked = p.enabled
    approvers.value = p.approval?.approvers_required ?? ''
    approverRoles.value = (p.approval?.approver_roles ?? []).join(', ')
    timeout.value = p.approval?.timeout_seconds ?? ''
    showApproval()
  }

  async function loadVersions() {
    try {
      const data = await api('GET', `/policies/${encodeURIComponent(id)}/versions${qs({ organization_id: org() })}`)
      put(
        versions,
        h('h2', { id: 'versions-title', text: 'Versions' }),
        table('Versions', [
          ['Version', (v) => String(v.version)],
          ['Written', (v) => when(v.created_at)],
          ['By', (v) => creatorCell(v.created_by)],
          ['Effect', (v) => badge(v.effect)],
          ['Condition', (v) => (v.condition ? h('code', { text: v.condition }) : '—')],
          ['', (v) => (writable ? h('button', { type: 'button', 'aria-label': `Roll back to version ${v.version}`, text: 'Roll back', onclick: () => rollback(v.version) }) : '')],
        ], data.versions ?? []),
      )
    } catch (error) {
      put(versions, h('h2', { id: 'versions-title', text: 'Versions' }), error.status === 404 ? unavailable('Policy versions') : errorBox(error))
    }
  }

  async function rollback(version) {
    try {
      const saved = await api('POST', `/policies/${encodeURIComponent(id)}/rollback${qs({ organization_id: org() })}`, { version })
      fill(saved)
      announce(`Rolled back to version ${version}`)
      put(message, h('p', { class: 'ok', role: 'status', text: `Rolled back: now version ${saved.version}.` }))
      void loadVersions()
    } catch (error) {
      put(message, errorBox(error))
    }
  }

  if (id) {
    api('GET', `/policies/${encodeURIComponent(id)}${qs({ organization_id: org() })}`)
      .then((p) => {
        fill(p)
        void loadVersions()
      })
      .catch((error) => put(message, errorBox(error)))
  }
}
