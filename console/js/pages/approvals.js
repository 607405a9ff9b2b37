// Approvals: what waits for a human, oldest first, refreshed every 2 seconds (and at once after
// an action), with the full arguments, the agent, the policy and version, and a countdown to
// expiry. Approve / Deny take an optional note. One approval at #/approvals/ID, whatever its
// status: the page an MCP client's URL elicitation opens for a person to decide a tool call.
import { api, currentSession } from '../api.js'
import { announce, badge, errorBox, h, pretty, put, unavailable, uid, when } from '../dom.js'
import { toolLine, toolOf } from '../mcp.js'
import { personName, policyLabel, rememberSelf } from '../names.js'

const REFRESH_MS = 2000
const DEFAULT_APPROVER_ROLES = ['owner', 'admin', 'manager']

export function render(main, params = []) {
  if (params[0]) return renderOne(main, params[0])
  const status = h('p', { class: 'muted', role: 'status', text: 'Loading pending approvals…' })
  const list = h('ul', { class: 'cards', 'aria-label': 'Pending approvals' })
  const message = h('div', {})
  // What was just approved or denied stays on screen (the card itself leaves the queue).
  const confirmation = h('div', { class: 'confirmation', role: 'status', 'aria-live': 'polite', tabindex: '-1' })
  put(main, h('h1', { text: 'Approvals' }), h('p', { class: 'muted', text: 'Actions agents asked for that a policy sends to a human. The list refreshes every 2 seconds.' }), message, confirmation, status, list)

  let stopped = false
  let timer = null
  let tick = null
  let count = null
  const cards = new Map()

  async function load() {
    if (stopped) return
    try {
      const data = await api('GET', '/approvals?status=pending')
      if (stopped) return
      update(data.approvals ?? [])
      put(message)
      schedule()
    } catch (error) {
      if (stopped) return
      if (error.status === 404) {
        put(status)
        put(list)
        put(message, unavailable('Approvals'))
        return
      }
      put(message, errorBox(error))
      // Unreachable (or, across origins, perhaps absent): try again, less often.
      schedule(error.status === 0 ? 10 * REFRESH_MS : REFRESH_MS)
    }
  }

  function schedule(ms = REFRESH_MS) {
    clearTimeout(timer)
    if (!stopped) timer = setTimeout(load, ms)
  }

  function update(approvals) {
    const seen = new Set()
    approvals = approvals.map(normalize)
    for (const approval of approvals) {
      const id = approval.approval_id
      seen.add(id)
      if (!cards.has(id)) {
        const card = approvalCard(approval, afterAction)
        cards.set(id, card)
        list.append(card.el)
      } else cards.get(id).refresh(approval)
    }
    for (const [id, card] of cards) {
      if (!seen.has(id)) {
        card.el.remove()
        cards.delete(id)
      }
    }
    // Keep the order the server gives (oldest first).
    for (const approval of approvals) list.append(cards.get(approval.approval_id).el)
    const text = approvals.length === 0 ? 'Nothing waits for approval.' : `${approvals.length} pending approval${approvals.length === 1 ? '' : 's'}.`
    status.textContent = text
    if (count !== null && count !== approvals.length) announce(text)
    count = approvals.length
  }

  function afterAction(text) {
    // The card acted on goes away: the confirmation says what happened and keeps the keyboard on the page.
    put(confirmation, h('p', { class: 'ok', text }))
    confirmation.focus()
    void load()
  }

  tick = setInterval(() => {
    for (const card of cards.values()) card.countdown()
  }, 1000)
  void load()
  return () => {
    stopped = true
    clearTimeout(timer)
    clearInterval(tick)
  }
}

/** The approval with what it asks for at the top (a server may nest it under request or decision). */
function normalize(approval) {
  const asked = approval.request ?? approval.decision_request ?? {}
  return {
    ...approval,
    action: approval.action ?? asked.action,
    resource: approval.resource ?? asked.resource,
    args: approval.args ?? asked.args,
    context: approval.context ?? asked.context,
    agent: approval.agent ?? asked.agent,
  }
}

/** "Refund review (version 2)" for each policy that asked for the approval. */
async function policiesText(approval) {
  const refs = approval.policies ?? []
  if (refs.length === 0) return '—'
  return (await Promise.all(refs.map(policyLabel))).join(', ')
}

const approving = (approval) => (approval.votes ?? []).filter((vote) => vote.vote === 'approve')

/** "1 of 2", then who approved (emails when this role may read the members). */
async function progressText(approval) {
  const required = approval.approvers_required ?? 1
  const votes = approving(approval)
  const text = `${votes.length} of ${required}`
  if (votes.length === 0) return text
  const names = await Promise.all(votes.map(async (vote) => (await personName(vote.user_id)) ?? 'another approver'))
  return `${text}: approved by ${names.join(', ')}`
}

/** What the person who just voted should read: what was decided, or what is still needed. */
function outcomeText(verb, before, after) {
  const what = `${after.action} by ${agentOf(after)}`
  if (verb === 'deny') return `Denied: ${what}. The call does not go through.`
  if (after.status === 'approved') return `Approved: ${what}. The call goes through once, with exactly these arguments.`
  const missing = Math.max(0, (after.approvers_required ?? 1) - approving(after).length)
  return `Your approval of ${what} is counted (${approving(after).length} of ${after.approvers_required}): ${missing} more approver${missing === 1 ? '' : 's'} needed.`
}

function agentOf(approval) {
  const agent = approval.agent
  if (agent && typeof agent === 'object') return agent.handle ?? agent.agent_id
  return agent ?? approval.agent_handle ?? '—'
}

function mayApprove(approval) {
  const session = currentSession()
  const roles = approval.approver_roles ?? approval.approval?.approver_roles ?? DEFAULT_APPROVER_ROLES
  return session !== null && roles.includes(session.role)
}

function remaining(expiresAt) {
  const ms = Date.parse(expiresAt) - Date.now()
  if (!Number.isFinite(ms)) return '—'
  if (ms <= 0) return 'expired'
  const s = Math.floor(ms / 1000)
  const parts = s >= 3600 ? [Math.floor(s / 3600), 'h ', Math.floor((s % 3600) / 60), 'm'] : [Math.floor(s / 60), 'm ', String(s % 60).padStart(2, '0'), 's']
  return parts.join('')
}

function approvalCard(approval, afterAction, single = false) {
  const titleId = uid('approval')
  const countdown = h('span', { class: 'countdown' })
  const note = h('input', { type: 'text', maxlength: 1000 })
  const noteId = uid('note')
  note.id = noteId
  const message = h('div', {})
  const tool = toolOf(approval.action)
  const el = h(single ? 'section' : 'li', { class: 'card', 'aria-labelledby': titleId })
  const act = async (verb, button) => {
    for (const b of el.querySelectorAll('button')) b.disabled = true
    try {
      const body = note.value.trim() ? { note: note.value.trim() } : {}
      const after = normalize(await api('POST', `/approvals/${encodeURIComponent(approval.approval_id)}/${verb}`, body))
      // The one new vote is this person's: from now on their own votes show their email.
      const known = new Set((approval.votes ?? []).map((vote) => vote.user_id))
      const mine = (after.votes ?? []).find((vote) => !known.has(vote.user_id))
      if (mine) rememberSelf(mine.user_id)
      afterAction(outcomeText(verb, approval, after))
    } catch (error) {
      put(message, errorBox(error))
      for (const b of el.querySelectorAll('button')) b.disabled = false
      button.focus()
    }
  }
  const approve = h('button', { type: 'button', class: 'primary', text: 'Approve' })
  const deny = h('button', { type: 'button', class: 'danger', text: 'Deny' })
  approve.addEventListener('click', () => act('approve', approve))
  deny.addEventListener('click', () => act('deny', deny))
  const progress = h('dd', {})
  const policy = h('dd', { text: '…' })
  void policiesText(approval).then((text) => {
    policy.textContent = text
  })
  put(
    el,
    h('h2', { id: titleId }, h('code', { text: approval.action ?? '—' }), ' by ', h('code', { text: agentOf(approval) })),
    h(
      'dl',
      {},
      h('dt', { text: 'Status' }), h('dd', {}, badge(approval.status ?? 'pending')),
      tool ? [h('dt', { text: 'MCP' }), h('dd', {}, toolLine(tool, approval.resource))] : null,
      h('dt', { text: 'Resource' }), h('dd', {}, h('code', { text: approval.resource || '—' })),
      h('dt', { text: 'Policy' }), policy,
      h('dt', { text: 'On behalf of' }), h('dd', { text: approval.context?.on_behalf_of ?? '—' }),
      h('dt', { text: 'Requested' }), h('dd', { text: when(approval.created_at ?? approval.requested_at) }),
      h('dt', { text: 'Expires in' }), h('dd', {}, countdown, h('span', { class: 'muted', text: ` (${when(approval.expires_at)})` })),
      h('dt', { text: 'Approvals' }), progress,
    ),
    h('h3', { class: 'hint', text: 'Arguments' }),
    pretty(approval.args ?? {}),
    (approval.status ?? 'pending') !== 'pending'
      ? null
      : mayApprove(approval)
        ? h('div', {}, h('label', { for: noteId, text: 'Note (optional)' }), note, h('div', { class: 'actions' }, approve, deny))
        : h('p', { class: 'muted', text: 'Your role cannot decide this approval.' }),
    message,
  )
  const card = {
    el,
    refresh(next) {
      approval = next
      const shown = next
      void progressText(next).then((text) => {
        // A later refresh may have answered first: only the newest approval's text is shown.
        if (approval === shown) progress.textContent = text
      })
      card.countdown()
    },
    countdown() {
      countdown.textContent = remaining(approval.expires_at)
    },
  }
  card.refresh(approval)
  return card
}

/** What a person reading one approval needs to know of where it stands. */
const STANDING = {
  pending: 'Waiting for a decision. This page refreshes every 2 seconds.',
  approved: 'Approved: the call goes through once, with exactly these arguments, when the agent or its gateway asks again.',
  consumed: 'Approved and used: the call went through.',
  denied: 'Denied: the call does not go through.',
  expired: 'Expired: nobody decided in time, so the call does not go through.',
  cancelled: 'Cancelled: the call does not go through.',
}

/** One approval (the page an MCP client's URL elicitation opens), refreshed while it is pending. */
function renderOne(main, id) {
  const status = h('p', { class: 'muted', role: 'status', text: 'Loading the approval…' })
  const holder = h('div', {})
  const message = h('div', {})
  put(main, h('p', {}, h('a', { href: '#/approvals', text: 'All pending approvals' })), h('h1', { text: 'Approval' }), message, status, holder)
  let stopped = false
  let timer = null
  let card = null
  let shown = null

  async function load() {
    if (stopped) return
    try {
      const approval = normalize(await api('GET', `/approvals/${encodeURIComponent(id)}`))
      if (stopped) return
      put(message)
      const standing = approval.status ?? 'pending'
      // A change of status changes what may be done: the card is built again.
      if (card === null || standing !== shown) {
        card = approvalCard(approval, afterAction, true)
        put(holder, card.el)
        if (shown !== null) announce(STANDING[standing] ?? standing)
        shown = standing
      } else card.refresh(approval)
      status.textContent = STANDING[standing] ?? standing
      clearTimeout(timer)
      if (standing === 'pending') timer = setTimeout(load, REFRESH_MS)
    } catch (error) {
      if (stopped) return
      put(status)
      put(message, error.status === 404 && !/approval not found/i.test(error.message) ? unavailable('Approvals') : errorBox(error))
      if (error.status === 0) timer = setTimeout(load, 10 * REFRESH_MS)
    }
  }

  function afterAction(text) {
    announce(text)
    status.tabIndex = -1
    status.focus()
    void load()
  }

  const tick = setInterval(() => card?.countdown(), 1000)
  void load()
  return () => {
    stopped = true
    clearTimeout(timer)
    clearInterval(tick)
  }
}
