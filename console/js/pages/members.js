// Members and invitations, within the role rules: Admins manage everyone but Owners; only Owners
// grant, change or remove the Owner role; an organization keeps at least one Owner.
import { api, currentSession } from '../api.js'
import { announce, errorBox, field, h, put, secretBox, table, when } from '../dom.js'

const ROLES = ['viewer', 'member', 'manager', 'admin', 'owner']

export function render(main) {
  const owner = currentSession().role === 'owner'
  const assignable = ROLES.filter((r) => owner || r !== 'owner')
  const message = h('div', {})
  const memberList = h('div', {}, h('p', { class: 'muted', text: 'Loading…' }))
  const inviteList = h('div', {})
  const secret = h('div', {})
  const email = h('input', { type: 'email', required: true, autocomplete: 'off' })
  const role = h('select', {}, assignable.map((r) => h('option', { value: r, text: r, selected: r === 'member' })))
  const form = h('form', { method: 'post', class: 'filters', 'aria-label': 'Invite someone' }, field('Email to invite', email), field('Role', role), h('div', { class: 'field' }, h('button', { type: 'submit', class: 'primary', text: 'Invite' })))
  put(
    main,
    h('h1', { text: 'Members' }),
    message,
    memberList,
    h('h2', { text: 'Invitations' }),
    h('section', { class: 'panel', 'aria-label': 'New invitation' }, form, h('p', { class: 'hint', text: 'Pass the invitation secret on yourself (it is shown once); the invitee accepts it with a password.' })),
    secret,
    inviteList,
  )

  const fail = (error) => put(message, errorBox(error))

  function roleControl(member) {
    const me = member.email === currentSession().email
    if (!owner && member.role === 'owner') return member.role
    const select = h('select', { 'aria-label': `Role of ${member.email}` }, assignable.map((r) => h('option', { value: r, text: r, selected: r === member.role })))
    select.disabled = me
    select.addEventListener('change', async () => {
      try {
        await api('PATCH', `/members/${member.user_id}`, { role: select.value })
        announce(`${member.email} is now ${select.value}`)
        void load()
      } catch (error) {
        select.value = member.role
        fail(error)
      }
    })
    return select
  }

  function removeControl(member) {
    if ((!owner && member.role === 'owner') || member.email === currentSession().email) return ''
    return h('button', {
      type: 'button',
      class: 'danger',
      'aria-label': `Remove ${member.email}`,
      text: 'Remove',
      onclick: async () => {
        try {
          await api('DELETE', `/members/${member.user_id}`)
          announce(`${member.email} removed`)
          void load()
        } catch (error) {
          fail(error)
        }
      },
    })
  }

  async function load() {
    try {
      const [members, invitations] = await Promise.all([api('GET', '/members'), api('GET', '/invitations')])
      put(memberList, table('Members', [['Email', (m) => m.email], ['Role', roleControl], ['Joined', (m) => when(m.created_at)], ['', removeControl]], members.members ?? []))
      put(
        inviteList,
        (invitations.invitations ?? []).length === 0
          ? h('p', { class: 'muted', text: 'No open invitations.' })
          : table('Open invitations', [
              ['Email', (i) => i.email], ['Role', (i) => i.role], ['Expires', (i) => when(i.expires_at)],
              ['', (i) => h('button', { type: 'button', 'aria-label': `Revoke invitation of ${i.email}`, text: 'Revoke', onclick: () => api('DELETE', `/invitations/${i.invitation_id}`).then(() => load(), fail) })],
            ], invitations.invitations),
      )
    } catch (error) {
      fail(error)
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    put(message)
    try {
      const invitation = await api('POST', '/invitations', { email: email.value.trim(), role: role.value })
      put(secret, secretBox(`Invitation secret for ${invitation.email}`, invitation.token))
      email.value = ''
      void load()
    } catch (error) {
      fail(error)
    }
  })
  void load()
}
