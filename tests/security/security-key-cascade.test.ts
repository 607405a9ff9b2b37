// A key made with a key must not outlive it: revoking a key revokes every key it issued,
// transitively, and every token minted from them, on the very next request, in this process and
// in another one sharing the database. Rotation is a continuation: ending the old key leaves the
// successor (and what the old key issued) alive, while revoking the successor reaches them.
import t from 'tap'
import { HttpError } from '../../http/errors.ts'
import { createCredentials } from '../../services/credentials.ts'
import { silentLogger } from '../../log.ts'
import { TEST_DATABASE_URL, testConfig } from '../support/helpers.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

async function statusOf(app: ProductApp, token: string, path = '/keys'): Promise<number> {
  const res = await app.call('GET', path, { token })
  await res.body?.cancel()
  return res.status
}

async function newKey(app: ProductApp, token: string, role = 'admin'): Promise<{ key_id: string; api_key: string; created_by: string }> {
  const res = await app.call('POST', '/keys', { token, json: { role, name: 'child' } })
  if (res.status !== 201) throw new Error(`POST /keys answered ${res.status}: ${await res.text()}`)
  return jsonOf(res)
}

async function revoke(app: ProductApp, token: string, keyId: string): Promise<number> {
  const res = await app.call('DELETE', `/keys/${keyId}`, { token })
  await res.body?.cancel()
  return res.status
}

t.test('revoking a key revokes the keys it issued, their keys, and every token minted from them', async (t) => {
  const app = await productApp(t)
  const { vars } = app
  const a = await newKey(app, vars.OWNER_KEY_A!)
  const b = await newKey(app, a.api_key)
  const c = await newKey(app, b.api_key, 'manager')
  t.equal(b.created_by, `key:${a.key_id}`)
  const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: c.api_key } }))
  const sibling = await newKey(app, vars.OWNER_KEY_A!)
  // Warm the credential cache: the revocation must win over it.
  for (const token of [a.api_key, b.api_key, sibling.api_key]) t.equal(await statusOf(app, token), 200)
  t.equal(await statusOf(app, c.api_key, `/policies/${vars.POLICY_A}`), 200)
  t.equal(await statusOf(app, minted.access_token, `/policies/${vars.POLICY_A}`), 200)

  t.equal(await revoke(app, vars.OWNER_KEY_A!, a.key_id), 204)
  t.equal(await statusOf(app, a.api_key), 401)
  t.equal(await statusOf(app, b.api_key), 401, 'the key A issued')
  t.equal(await statusOf(app, c.api_key, `/policies/${vars.POLICY_A}`), 401, 'the key B issued')
  t.equal(await statusOf(app, minted.access_token, `/policies/${vars.POLICY_A}`), 401, "a token of C's")
  const relogin = await app.call('POST', '/auth/login', { json: { api_key: c.api_key } })
  t.equal(relogin.status, 401)
  await relogin.body?.cancel()
  t.equal(await statusOf(app, sibling.api_key), 200, 'a key its creator made separately lives on')
  t.equal(await statusOf(app, vars.OWNER_KEY_A!), 200, 'the issuer of the revoked key lives on')
  const listed = (await jsonOf(await app.call('GET', '/keys', { token: vars.OWNER_KEY_A }))).keys
  const revokedAt = (id: string) => listed.find((k: { key_id: string }) => k.key_id === id).revoked_at
  t.same([a, b, c].map((k) => revokedAt(k.key_id)), Array(3).fill('2026-11-22T12:00:00.000Z'))
  t.equal(revokedAt(sibling.key_id), null)
})

t.test('revoking a child leaves its issuer alone', async (t) => {
  const app = await productApp(t)
  const a = await newKey(app, app.vars.OWNER_KEY_A!)
  const b = await newKey(app, a.api_key)
  t.equal(await revoke(app, a.api_key, b.key_id), 204)
  t.equal(await statusOf(app, b.api_key), 401)
  t.equal(await statusOf(app, a.api_key), 200)
})

t.test('rotation is a continuation, not a child', async (t) => {
  const app = await productApp(t)
  const { vars } = app
  const a = await newKey(app, vars.OWNER_KEY_A!)
  const b = await newKey(app, a.api_key)
  const grandchild = await newKey(app, b.api_key, 'viewer')

  t.test('a key rotating itself: ending the old one spares the successor and what the old one issued', async (t) => {
    const rotated = await app.call('POST', `/keys/${b.key_id}/rotate`, { token: b.api_key, json: { expires_in: 60 } })
    t.equal(rotated.status, 201)
    const successor = await jsonOf(rotated)
    t.equal(await statusOf(app, b.api_key), 200, 'the old key works during the overlap')
    t.equal(await revoke(app, vars.OWNER_KEY_A!, b.key_id), 204, 'the overlap is cut short')
    t.equal(await statusOf(app, b.api_key), 401)
    t.equal(await statusOf(app, successor.api_key), 200, 'the successor lives on')
    t.equal(await statusOf(app, grandchild.api_key, `/policies/${vars.POLICY_A}`), 200, 'what the old key issued lives on')

    t.test("revoking the successor's issuer reaches the successor and what the old key issued", async (t) => {
      t.equal(await revoke(app, vars.OWNER_KEY_A!, a.key_id), 204)
      t.equal(await statusOf(app, successor.api_key), 401)
      t.equal(await statusOf(app, grandchild.api_key, `/policies/${vars.POLICY_A}`), 401)
    })
  })

  t.test('an immediate rotation by the issuing user does not revoke the successor', async (t) => {
    const key = await newKey(app, vars.OWNER_KEY_A!)
    const session = await jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }))
    const rotated = await jsonOf(await app.call('POST', `/keys/${key.key_id}/rotate`, { token: session.access_token }))
    t.equal(await statusOf(app, key.api_key), 401)
    t.equal(await statusOf(app, rotated.api_key), 200)
  })
})

t.test('revoking again reaches a key issued before and still active', async (t) => {
  const app = await productApp(t)
  const a = await newKey(app, app.vars.OWNER_KEY_A!)
  const b = await newKey(app, a.api_key)
  // As if A had been revoked before this rule existed, leaving B behind.
  await app.db.updateTable('api_keys').set({ revoked_at: new Date(app.clock.now) }).where('id', '=', a.key_id).execute()
  t.equal(await revoke(app, app.vars.OWNER_KEY_A!, a.key_id), 204)
  t.equal(await statusOf(app, b.api_key), 401)
})

t.test('in another process sharing the database, the issued key stops on the next request (PostgreSQL LISTEN/NOTIFY)', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
  const app = await productApp(t)
  const a = await newKey(app, app.vars.OWNER_KEY_A!)
  const b = await newKey(app, a.api_key)
  const peer = createCredentials(testConfig(), { db: app.db, clock: app.clock.read, logger: silentLogger, listenUrl: TEST_DATABASE_URL })
  peer.start()
  t.teardown(() => peer.close())
  const statusIn = async (token: string): Promise<number> => {
    try {
      const outcome = await peer.authenticate(`Bearer ${token}`, app.clock.now)
      return outcome instanceof HttpError ? outcome.status : 200
    } catch (error) {
      return (error as { status?: number }).status ?? -1
    }
  }
  const until = Date.now() + 15_000
  while (!peer.cacheEnabled() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10))
  t.ok(peer.cacheEnabled(), 'the peer is subscribed')
  t.equal(await statusIn(b.api_key), 200, 'cached in the peer')
  t.equal(await revoke(app, app.vars.OWNER_KEY_A!, a.key_id), 204)
  let seen = 0
  for (const stop = Date.now() + 1000; Date.now() < stop; ) {
    seen = await statusIn(b.api_key)
    if (seen === 401) break
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  t.equal(seen, 401, 'the peer refused the issued key within a second')
})
