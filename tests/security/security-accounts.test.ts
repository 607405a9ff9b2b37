// Accounts and tenancy under attack: an Admin cannot attach another organization's user nor
// learn whether an email has an account (invitations); invitation secrets work once, until they
// expire or are revoked, and an existing account joins only with its own password.
import t from 'tap'
import { INVITATION_REFUSED } from '../../routes/invitations.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const PASSWORD = 'a long enough password'
const REFUSED = { status: 'Bad Request', error: INVITATION_REFUSED }

async function invite(app: ProductApp, token: string, email: string, role = 'viewer'): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await app.call('POST', '/invitations', { token, json: { email, role } })
  return { status: res.status, body: await jsonOf(res), headers: res.headers }
}

async function accept(app: ProductApp, token: string, password = PASSWORD): Promise<{ status: number; body: any }> {
  const res = await app.call('POST', '/invitations/accept', { json: { token, password } })
  return { status: res.status, body: await jsonOf(res) }
}

async function memberEmails(app: ProductApp, token: string): Promise<string[]> {
  return (await jsonOf(await app.call('GET', '/members', { token }))).members.map((m: { email: string }) => m.email).sort()
}

t.test("an Admin of A inviting B's user: 201, yet B's user is not a member of A and signs in to B as before", async (t) => {
  const app = await productApp(t)
  const { vars } = app
  const before = await memberEmails(app, vars.OWNER_KEY_A!)
  const invited = await invite(app, vars.ADMIN_KEY_A!, vars.USER_EMAIL_B!, 'admin')
  t.equal(invited.status, 201)
  t.match(invited.body.token, /^stw_inv_[a-z2-7]{39}$/)
  t.same(await memberEmails(app, vars.OWNER_KEY_A!), before, 'nobody joined A')
  // Holding the secret is not enough to attach an existing account: its password is needed.
  t.same(await accept(app, invited.body.token, 'a guess of twelve chars'), { status: 400, body: REFUSED })
  t.same(await memberEmails(app, vars.OWNER_KEY_A!), before)
  const login = await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_B, password: vars.USER_PASSWORD_B } })
  t.equal(login.status, 200)
  const session = await jsonOf(login)
  t.equal(session.organization_id, vars.ORG_B)
  t.equal(session.role, 'owner')
})

t.test('the invite answer is the same for an email with an account elsewhere and for an unknown one', async (t) => {
  const app = await productApp(t)
  const { vars } = app
  const known = await invite(app, vars.ADMIN_KEY_A!, vars.USER_EMAIL_B!)
  const unknown = await invite(app, vars.ADMIN_KEY_A!, 'nobody-here@example.com')
  t.equal(known.status, 201)
  t.equal(unknown.status, 201)
  const strip = ({ invitation_id, token, email: _email, ...rest }: any) => {
    t.match(invitation_id, /^[0-9a-f-]{36}$/)
    t.match(token, /^stw_inv_/)
    return rest
  }
  t.same(strip(known.body), strip(unknown.body))
  t.same(Object.keys(known.body), Object.keys(unknown.body))
  t.same([...known.headers.keys()].sort(), [...unknown.headers.keys()].sort())
  t.same(strip(known.body), { role: 'viewer', invited_by: `key:${vars.ADMIN_KEY_ID_A}`, created_at: '2026-11-22T12:00:00.000Z', expires_at: '2026-11-29T12:00:00.000Z' })
  // The list shows only what the inviter typed, and never the secrets.
  const list = await jsonOf(await app.call('GET', '/invitations', { token: vars.ADMIN_KEY_A }))
  t.same(list.invitations.map((i: { email: string }) => i.email).sort(), [vars.USER_EMAIL_B, 'nobody-here@example.com'].sort())
  t.notMatch(JSON.stringify(list), /stw_inv_|user_id|secret/)
  // A password at invite time is refused: the invitee chooses it.
  const withPassword = await app.call('POST', '/invitations', { token: vars.ADMIN_KEY_A, json: { email: 'p@example.com', role: 'viewer', password: PASSWORD } })
  t.same({ status: withPassword.status, body: await jsonOf(withPassword) }, { status: 400, body: { status: 'Bad Request', error: 'Field password is not accepted: the invitee chooses it when accepting' } })
})

t.test('accepting', async (t) => {
  const app = await productApp(t)
  const { vars } = app

  t.test('a new user: the account is made with the password, and signs in with the invited role', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'Fresh.Person@Example.com', 'manager')
    t.notOk((await memberEmails(app, vars.OWNER_KEY_A!)).includes('Fresh.Person@Example.com'), 'not a member before accepting')
    const accepted = await accept(app, invited.body.token)
    t.equal(accepted.status, 201)
    t.same(accepted.body, { organization_id: vars.ORG_A, user_id: accepted.body.user_id, email: 'Fresh.Person@Example.com', role: 'manager', created_at: '2026-11-22T12:00:00.000Z' })
    const login = await jsonOf(await app.call('POST', '/auth/login', { json: { email: 'fresh.person@example.com', password: PASSWORD } }))
    t.equal(login.role, 'manager')
    t.same((await jsonOf(await app.call('GET', '/invitations', { token: vars.ADMIN_KEY_A }))).invitations, [], 'no longer open')
  })

  t.test('a used secret is refused', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'twice@example.com')
    t.equal((await accept(app, invited.body.token)).status, 201)
    t.same(await accept(app, invited.body.token), { status: 400, body: REFUSED })
  })

  t.test('an existing account joins with its own password, which stays unchanged', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, vars.USER_EMAIL_B!, 'viewer')
    const accepted = await accept(app, invited.body.token, vars.USER_PASSWORD_B)
    t.equal(accepted.status, 201)
    t.equal(accepted.body.role, 'viewer')
    t.ok((await memberEmails(app, vars.OWNER_KEY_A!)).includes(vars.USER_EMAIL_B!))
    const login = await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_B, password: vars.USER_PASSWORD_B, organization_id: vars.ORG_B } })
    t.equal(login.status, 200)
    await login.body?.cancel()
  })

  t.test('five wrong passwords revoke the invitation', async (t) => {
    const owner = (await jsonOf(await app.call('GET', '/members', { token: vars.OWNER_KEY_A }))).members.find((m: { role: string }) => m.role === 'owner')
    const invited = await invite(app, vars.OWNER_KEY_B!, owner.email)
    for (let i = 0; i < 5; i++) t.same(await accept(app, invited.body.token, `wrong password ${i}`), { status: 400, body: REFUSED })
    t.same(await accept(app, invited.body.token, vars.USER_PASSWORD_A), { status: 400, body: REFUSED }, 'even the right password now')
    t.same((await jsonOf(await app.call('GET', '/invitations', { token: vars.OWNER_KEY_B }))).invitations, [])
  })

  t.test('an expired secret is refused', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'late@example.com')
    app.clock.advance(7 * 86_400_000)
    try {
      t.same(await accept(app, invited.body.token), { status: 400, body: REFUSED })
      t.same((await jsonOf(await app.call('GET', '/invitations', { token: vars.ADMIN_KEY_A }))).invitations, [])
      // The email may be invited again; the old secret stays dead.
      const again = await invite(app, vars.ADMIN_KEY_A!, 'late@example.com')
      t.equal(again.status, 201)
      t.same(await accept(app, invited.body.token), { status: 400, body: REFUSED })
    } finally {
      app.clock.advance(-7 * 86_400_000)
    }
  })

  t.test('a revoked secret is refused; Admins cannot revoke invitations to the Owner role', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'revoked@example.com')
    const del = await app.call('DELETE', `/invitations/${invited.body.invitation_id}`, { token: vars.ADMIN_KEY_A })
    t.equal(del.status, 204)
    t.same(await accept(app, invited.body.token), { status: 400, body: REFUSED })
    const gone = await app.call('DELETE', `/invitations/${invited.body.invitation_id}`, { token: vars.ADMIN_KEY_A })
    t.same({ status: gone.status, body: await jsonOf(gone) }, { status: 404, body: { status: 'Not Found', error: 'Invitation not found' } })
    const ownerInvite = await invite(app, vars.OWNER_KEY_A!, 'future-owner@example.com', 'owner')
    const refused = await app.call('DELETE', `/invitations/${ownerInvite.body.invitation_id}`, { token: vars.ADMIN_KEY_A })
    t.same({ status: refused.status, body: await jsonOf(refused) }, { status: 403, body: { status: 'Forbidden', error: 'Only Owners manage Owners' } })
    // Another organization's invitation is not there at all.
    const foreign = await app.call('DELETE', `/invitations/${ownerInvite.body.invitation_id}`, { token: vars.OWNER_KEY_B })
    t.equal(foreign.status, 404)
    await foreign.body?.cancel()
  })

  t.test('malformed, mistyped and foreign-kind secrets get the same answer', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'typo@example.com')
    const secret: string = invited.body.token
    const typo = secret.slice(0, -1) + (secret.endsWith('a') ? 'b' : 'a')
    for (const token of ['', 'nope', typo, vars.ADMIN_KEY_A!, secret.replace('stw_inv_', 'stw_key_')]) {
      t.same(await accept(app, token), { status: 400, body: REFUSED }, token.slice(0, 12))
    }
    // An invitation secret is not a bearer credential.
    const bearer = await app.call('GET', '/members', { token: secret })
    t.equal(bearer.status, 401)
    await bearer.body?.cancel()
    const short = await app.call('POST', '/invitations/accept', { json: { token: secret, password: 'short' } })
    t.same(await jsonOf(short), { status: 'Bad Request', error: 'Field password must have at least 12 characters' })
  })

  t.test('of parallel accepts exactly one succeeds', async (t) => {
    const invited = await invite(app, vars.ADMIN_KEY_A!, 'racer@example.com')
    // From eight clients: one client may have only a few password hashes in progress at once.
    const results = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await app.call('POST', '/invitations/accept', { json: { token: invited.body.token, password: PASSWORD }, conn: { remoteAddress: `127.0.0.${10 + i}` } })
        return { status: res.status, body: await jsonOf(res) }
      }),
    )
    t.same(results.map((r) => r.status).sort(), [201, 400, 400, 400, 400, 400, 400, 400])
    t.equal((await memberEmails(app, vars.OWNER_KEY_A!)).filter((email) => email === 'racer@example.com').length, 1)
  })

  t.test('inviting a member of the organization, or an email already invited, is 409', async (t) => {
    const member = await invite(app, vars.ADMIN_KEY_A!, vars.USER_EMAIL_A!)
    t.same(member, { status: 409, body: { status: 'Conflict', error: 'Already a member of this organization; change the role with PATCH /members/{user_id}' }, headers: member.headers })
    t.equal((await invite(app, vars.ADMIN_KEY_A!, 'pending@example.com')).status, 201)
    const pending = await invite(app, vars.ADMIN_KEY_A!, 'PENDING@example.com')
    t.same(pending.body, { status: 'Conflict', error: 'An invitation for this email is already open; revoke it first to issue a new secret' })
  })

  t.test('members join only by invitation: POST /members is gone', async (t) => {
    const res = await app.call('POST', '/members', { token: vars.ADMIN_KEY_A, json: { email: vars.USER_EMAIL_B, role: 'viewer' } })
    t.equal(res.status, 405)
    await res.body?.cancel()
  })
})
