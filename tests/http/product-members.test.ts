// Members: Admins and Owners manage members; only Owners manage Owners; one Owner always remains;
// a removed member's session stops on the next request. People join by invitation only.
import t from 'tap'
import { inviteAndAccept, jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app

t.test('an Admin invites a new user, who accepts and can sign in with the role given', async (t) => {
  const member = await inviteAndAccept(app, vars.ADMIN_KEY_A!, 'New.Person@Example.com', 'manager', 'a long enough password')
  t.same(member, { organization_id: vars.ORG_A, user_id: member.user_id, email: 'New.Person@Example.com', role: 'manager', created_at: '2026-11-22T12:00:00.000Z' })
  const login = await jsonOf(await app.call('POST', '/auth/login', { json: { email: 'new.person@example.com', password: 'a long enough password' } }))
  t.equal(login.role, 'manager')
  const list = await jsonOf(await app.call('GET', '/members', { token: vars.OWNER_KEY_A }))
  t.same(list.members.map((m: { role: string }) => m.role).sort(), ['manager', 'owner'])
  t.notMatch(JSON.stringify(list), /password|scrypt/)

  t.test('a role change applies to the live session at once', async (t) => {
    t.equal((await app.call('PATCH', `/members/${member.user_id}`, { token: vars.ADMIN_KEY_A, json: { role: 'viewer' } })).status, 200)
    const res = await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: login.access_token, json: { name: 'n', effect: 'deny', actions: ['a'] } })
    t.equal(res.status, 403)
    await res.body?.cancel()
  })

  t.test('removal stops the session on the next request', async (t) => {
    const del = await app.call('DELETE', `/members/${member.user_id}`, { token: vars.ADMIN_KEY_A })
    t.equal(del.status, 204)
    const res = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: login.access_token })
    t.equal(res.status, 401)
    await res.body?.cancel()
  })
})

t.test('errors', async (t) => {
  const owner = (await jsonOf(await app.call('GET', '/members', { token: vars.OWNER_KEY_A }))).members.find((m: { role: string }) => m.role === 'owner')

  t.test('only Owners manage Owners', async (t) => {
    const promote = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: 'x@example.com', role: 'owner' } })
    t.equal(promote.status, 403)
    t.same(await jsonOf(promote), { status: 'Forbidden', error: 'Only Owners manage Owners' })
    const demote = await app.call('PATCH', `/members/${owner.user_id}`, { token: vars.ADMIN_KEY_A, json: { role: 'viewer' } })
    t.equal(demote.status, 403)
    await demote.body?.cancel()
    t.equal((await app.call('DELETE', `/members/${owner.user_id}`, { token: vars.ADMIN_KEY_A })).status, 403)
  })

  t.test('the last Owner cannot be demoted or removed', async (t) => {
    const demote = await app.call('PATCH', `/members/${owner.user_id}`, { token: vars.OWNER_KEY_A, json: { role: 'admin' } })
    t.equal(demote.status, 409)
    t.same(await jsonOf(demote), { status: 'Conflict', error: 'The organization must keep at least one Owner' })
    t.equal((await app.call('DELETE', `/members/${owner.user_id}`, { token: vars.OWNER_KEY_A })).status, 409)
  })

  t.test('Managers and below cannot manage members', async (t) => {
    for (const role of ['MANAGER', 'MEMBER', 'VIEWER']) {
      const res = await app.call('GET', '/members', { token: vars[`${role}_KEY_A`] })
      t.equal(res.status, 403, role)
      await res.body?.cancel()
    }
  })

  t.test('a member email follows the same address rule as the lead forms', async (t) => {
    for (const email of ['ops@acme.c', 'a..b@example.com', 'two@@example.com']) {
      const res = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email, role: 'viewer' } })
      t.same(await jsonOf(res), { status: 'Bad Request', error: 'Field email must be an email address' }, email)
    }
  })

  t.test('a member email is at most 254 characters, as a lead email is', async (t) => {
    const address = (local: number) => `${'x'.repeat(local)}@${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(61)}.com`
    t.equal(address(60).length, 254)
    const tooLong = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: address(61), role: 'viewer' } })
    t.equal(tooLong.status, 400)
    t.same(await jsonOf(tooLong), { status: 'Bad Request', error: 'Field email is too long' })
    const longest = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: address(60), role: 'viewer' } })
    t.equal(longest.status, 201, 'exactly 254 characters is invited')
    t.equal((await jsonOf(longest)).email, address(60))
  })

  t.test('nobody is attached directly; an existing member is 409; another organization\'s member is 404', async (t) => {
    const direct = await app.call('POST', '/members', { token: vars.ADMIN_KEY_A, json: { email: 'fresh@example.com', role: 'viewer', password: 'a long enough password' } })
    t.equal(direct.status, 405)
    t.equal(direct.headers.get('allow'), 'GET, HEAD, OPTIONS')
    await direct.body?.cancel()
    const again = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: vars.USER_EMAIL_A, role: 'viewer' } })
    t.equal(again.status, 409)
    await again.body?.cancel()
    const ownerB = (await jsonOf(await app.call('GET', '/members', { token: vars.OWNER_KEY_B }))).members[0]
    for (const id of [ownerB.user_id, crypto.randomUUID(), 'nope']) {
      const res = await app.call('PATCH', `/members/${id}`, { token: vars.OWNER_KEY_A, json: { role: 'viewer' } })
      t.equal(res.status, 404)
      t.same(await jsonOf(res), { status: 'Not Found', error: 'Member not found' })
    }
  })
})
