// API key management (GET/POST /keys, GET/DELETE /keys/{key_id}, POST /keys/{key_id}/rotate),
// and revocation taking effect on the very next request, in this process and in another one.
import { Kysely, PostgresDialect } from 'kysely'
import t from 'tap'
import { silentLogger } from '../../log.ts'
import { createPostgresPool, type DatabaseHandle } from '../../database/connect.ts'
import type { Database } from '../../database/schema.ts'
import { TEST_DATABASE_URL } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app

async function newKey(role: string, token = vars.ADMIN_KEY_A): Promise<{ key_id: string; api_key: string }> {
  const res = await app.call('POST', '/keys', { token, json: { role, name: `${role} test key` } })
  if (res.status !== 201) throw new Error(`POST /keys answered ${res.status}: ${await res.text()}`)
  return jsonOf(res)
}

async function status(token: string): Promise<number> {
  const res = await app.call('GET', `/policies/${vars.POLICY_A}`, { token })
  await res.body?.cancel()
  return res.status
}

t.test('happy path', async (t) => {
  t.test('POST /keys returns the secret once; listings show only the prefix', async (t) => {
    const res = await app.call('POST', '/keys', { token: vars.ADMIN_KEY_A, json: { role: 'member', name: 'CI', expires_at: '2027-01-01T00:00:00Z' } })
    t.equal(res.status, 201)
    const body = await jsonOf(res)
    t.equal(res.headers.get('location'), `https://api.example.com/keys/${body.key_id}`)
    t.same(body, {
      key_id: body.key_id,
      organization_id: vars.ORG_A,
      name: 'CI',
      role: 'member',
      prefix: body.api_key.slice(0, 14),
      created_by: `key:${vars.ADMIN_KEY_ID_A}`,
      created_at: '2026-11-22T12:00:00.000Z',
      expires_at: '2027-01-01T00:00:00.000Z',
      revoked_at: null,
      last_used_at: null,
      replaced_by: null,
      api_key: body.api_key,
    })
    t.match(body.api_key, /^stw_key_[a-z2-7]{39}$/)
    t.equal(await status(body.api_key), 200)
    const one = await jsonOf(await app.call('GET', `/keys/${body.key_id}`, { token: vars.ADMIN_KEY_A }))
    t.notOk('api_key' in one)
    t.equal(one.prefix, body.prefix)
    const list = await jsonOf(await app.call('GET', '/keys', { token: vars.OWNER_KEY_A }))
    t.ok(list.keys.some((k: { key_id: string }) => k.key_id === body.key_id))
    t.ok(list.keys.every((k: Record<string, unknown>) => !('api_key' in k) && k.organization_id === vars.ORG_A))
  })

  t.test('a key expires at its expires_at', async (t) => {
    const fresh = await productApp(t)
    const res = await fresh.call('POST', '/keys', { token: fresh.vars.ADMIN_KEY_A, json: { role: 'viewer', expires_at: '2026-11-22T12:01:00Z' } })
    const key = await jsonOf(res)
    const probe = async () => (await fresh.call('GET', `/policies/${fresh.vars.POLICY_A}`, { token: key.api_key })).status
    t.equal(await probe(), 200)
    fresh.clock.advance(60_000)
    t.equal(await probe(), 401, 'expired, although cached a moment ago')
  })

  t.test('last_used_at is recorded in batches, at the latest on close', async (t) => {
    const fresh = await productApp(t)
    await (await fresh.call('GET', `/policies/${fresh.vars.POLICY_A}`, { token: fresh.vars.VIEWER_KEY_A })).body?.cancel()
    await fresh.app.close()
    const row = await fresh.db.selectFrom('api_keys').select('last_used_at').where('id', '=', fresh.vars.VIEWER_KEY_ID_A!).executeTakeFirstOrThrow()
    t.equal(new Date(row.last_used_at!).toISOString(), '2026-11-22T12:00:00.000Z')
  })
})

t.test('revocation', async (t) => {
  t.test('DELETE /keys/{id} makes the key and every token minted from it fail with 401 on the next request', async (t) => {
    const key = await newKey('manager')
    const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
    t.equal(await status(key.api_key), 200, 'key warm in the cache')
    t.equal(await status(minted.access_token), 200, 'token warm in the cache')
    const del = await app.call('DELETE', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A })
    t.equal(del.status, 204)
    t.equal(await del.text(), '')
    t.equal(await status(key.api_key), 401)
    t.equal(await status(minted.access_token), 401)
    const again = await app.call('POST', '/auth/login', { json: { api_key: key.api_key } })
    t.equal(again.status, 401)
    await again.body?.cancel()
    const listed = await jsonOf(await app.call('GET', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A }))
    t.equal(listed.revoked_at, '2026-11-22T12:00:00.000Z')
    t.equal((await app.call('DELETE', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A })).status, 204, 'revoking twice is a no-op')
  })

  t.test('rotation issues a new key and stops the old one at once', async (t) => {
    const key = await newKey('member')
    const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
    t.equal(await status(key.api_key), 200)
    t.equal(await status(minted.access_token), 200)
    const res = await app.call('POST', `/keys/${key.key_id}/rotate`, { token: vars.ADMIN_KEY_A })
    t.equal(res.status, 201)
    const next = await jsonOf(res)
    t.not(next.key_id, key.key_id)
    t.equal(next.role, 'member')
    t.equal(next.name, 'member test key')
    t.equal(await status(key.api_key), 401)
    t.equal(await status(minted.access_token), 401)
    t.equal(await status(next.api_key), 200)
    const old = await jsonOf(await app.call('GET', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A }))
    t.equal(old.replaced_by, next.key_id)
    const twice = await app.call('POST', `/keys/${key.key_id}/rotate`, { token: vars.ADMIN_KEY_A })
    t.equal(twice.status, 400)
    t.same(await jsonOf(twice), { status: 'Bad Request', error: 'This API key is revoked; create a new one instead' })
  })

  t.test('rotation with expires_in keeps the old key working until then', async (t) => {
    const key = await newKey('viewer')
    const next = await jsonOf(await app.call('POST', `/keys/${key.key_id}/rotate`, { token: vars.ADMIN_KEY_A, json: { expires_in: 60 } }))
    t.equal(await status(key.api_key), 200)
    t.equal(await status(next.api_key), 200)
    app.clock.advance(60_000)
    t.equal(await status(key.api_key), 401)
    t.equal(await status(next.api_key), 200)
  })

  t.test('a key revoked in another process sharing the database fails there on the next request (PostgreSQL LISTEN/NOTIFY)', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
    const schema = (await app.db.selectNoFrom((eb) => eb.fn<string>('current_schema', []).as('s')).executeTakeFirstOrThrow()).s
    const url = new URL(TEST_DATABASE_URL!)
    url.searchParams.set('options', `-c search_path=${schema}`)
    const pool = await createPostgresPool(url.toString(), silentLogger, 4)
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
    const second: DatabaseHandle = { db, kind: 'postgres', pool, close: () => db.destroy() }
    t.teardown(() => second.close())
    const { createTestApp } = await import('../support/helpers.ts')
    const peer = await createTestApp(t, { database: second, clock: app.clock })
    // Both processes subscribed before the cache is trusted.
    const admin = await createPostgresPool(TEST_DATABASE_URL!, silentLogger, 1)
    t.teardown(() => admin.end())
    for (let i = 0; i < 100; i++) {
      const { rows } = await admin.query(`select count(*)::int as n from pg_stat_activity where query = 'LISTEN steward_credentials'`)
      if (rows[0].n >= 2) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    const key = await newKey('viewer')
    const minted = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
    const peerStatus = async (token: string) => {
      const res = await peer.request(`/policies/${vars.POLICY_A}`, { headers: { authorization: `Bearer ${token}` } })
      await res.body?.cancel()
      return res.status
    }
    t.equal(await peerStatus(key.api_key), 200, 'warm in the peer')
    t.equal(await peerStatus(minted.access_token), 200, 'warm in the peer')
    const started = performance.now()
    t.equal((await app.call('DELETE', `/keys/${key.key_id}`, { token: vars.ADMIN_KEY_A })).status, 204)
    let delay = -1
    for (let i = 0; i < 400; i++) {
      if ((await peerStatus(key.api_key)) === 401 && (await peerStatus(minted.access_token)) === 401) {
        delay = performance.now() - started
        break
      }
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    t.ok(delay >= 0, 'the peer refused the key and its token')
    t.ok(delay < 1000, `within a second (took ${delay.toFixed(1)} ms)`)
    t.comment(`cross-process revocation delay: ${delay.toFixed(1)} ms`)
  })
})

t.test('errors and authorization', async (t) => {
  t.test("a key's role never exceeds its creator's", async (t) => {
    const res = await app.call('POST', '/keys', { token: vars.ADMIN_KEY_A, json: { role: 'owner' } })
    t.equal(res.status, 403)
    t.same(await jsonOf(res), { status: 'Forbidden', error: 'Cannot create a key whose role (owner) is above your own (admin)' })
    const owner = await app.call('POST', '/keys', { token: vars.OWNER_KEY_A, json: { role: 'owner' } })
    t.equal(owner.status, 201)
    const created = await jsonOf(owner)
    const revoke = await app.call('DELETE', `/keys/${created.key_id}`, { token: vars.ADMIN_KEY_A })
    t.equal(revoke.status, 403)
    t.same(await jsonOf(revoke), { status: 'Forbidden', error: 'Cannot revoke a key whose role (owner) is above your own (admin)' })
    const rotate = await app.call('POST', `/keys/${created.key_id}/rotate`, { token: vars.ADMIN_KEY_A })
    t.equal(rotate.status, 403)
    await rotate.body?.cancel()
  })

  t.test('invalid bodies: 400', async (t) => {
    const cases: Array<[unknown, string]> = [
      [{}, 'Field role is required'],
      [{ role: 'god' }, 'Field role must be one of owner, admin, manager, member, viewer'],
      [{ role: 'viewer', name: '' }, 'Field name must not be empty'],
      [{ role: 'viewer', expires_at: 'tomorrow' }, 'Field expires_at must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z'],
      [{ role: 'viewer', expires_at: '2020-01-01T00:00:00Z' }, 'Field expires_at must be in the future'],
      [{ role: 'viewer', organization_id: vars.ORG_B }, 'Field organization_id is read-only'],
      [{ role: 'viewer', api_key: 'stw_key_mine' }, 'Field api_key is read-only'],
      [{ role: 'viewer', colour: 'red' }, 'Unknown field: colour'],
    ]
    for (const [body, message] of cases) {
      const res = await app.call('POST', '/keys', { token: vars.ADMIN_KEY_A, json: body })
      t.equal(res.status, 400, message)
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    }
    const grace = await app.call('POST', `/keys/${vars.VIEWER_KEY_ID_A}/rotate`, { token: vars.ADMIN_KEY_A, json: { expires_in: -5 } })
    t.same(await jsonOf(grace), { status: 'Bad Request', error: 'Field expires_in must not be negative' })
  })

  t.test("another organization's key answers 404 like a missing one", async (t) => {
    const texts: string[] = []
    for (const id of [vars.VIEWER_KEY_ID_B, crypto.randomUUID(), 'nope']) {
      for (const [method, path] of [['GET', `/keys/${id}`], ['DELETE', `/keys/${id}`], ['POST', `/keys/${id}/rotate`]] as const) {
        const res = await app.call(method, path, { token: vars.ADMIN_KEY_A })
        t.equal(res.status, 404, `${method} ${path}`)
        texts.push(await res.text())
      }
    }
    t.equal(new Set(texts).size, 1)
    t.same(JSON.parse(texts[0]!), { status: 'Not Found', error: 'API key not found' })
    const untouched = await app.call('GET', `/policies/${vars.POLICY_B}`, { token: vars.VIEWER_KEY_B })
    t.equal(untouched.status, 200, "org B's key still works")
    await untouched.body?.cancel()
  })
})

t.test('an unknown path under a product resource answers 404 in the product error format', async (t) => {
  for (const path of ['/keys//rotate', '/policies/x/y/z', '/invitations/a/b']) {
    const res = await app.call('POST', path, { token: vars.ADMIN_KEY_A, json: {} })
    t.equal(res.status, 404, path)
    t.equal(res.headers.get('cache-control'), 'no-store', path)
    t.same(await jsonOf(res), { status: 'Not Found', error: `No resource at ${path}` }, path)
  }
})
