// Webhook endpoints: create (secret once), list, read, delete, the delivery log and replay; roles,
// tenant isolation, bad input, the SSRF refusal of IP literals at create time, and the audit
// events each change writes in its own transaction.
import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const NOW = '2026-11-22T12:00:00.000Z'
const ADMIN = vars.ADMIN_KEY_A!

async function create(token: string, json: unknown) {
  const res = await app.call('POST', '/webhooks', { token, json })
  return { res, body: await jsonOf(res) }
}

async function auditOf(type: string) {
  return app.db.selectFrom('audit_events').selectAll().where('organization_id', '=', A).where('type', '=', type).orderBy('event_id').execute()
}

t.test('POST /webhooks: 201, Location, the secret once, then never again', async (t) => {
  const { res, body } = await create(ADMIN, { url: 'https://hooks.example.com/steward', event_types: ['approval.requested', 'policy.changed'], description: 'Ops' })
  t.equal(res.status, 201)
  t.equal(res.headers.get('location'), `https://api.example.com/webhooks/${body.webhook_id}`)
  t.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
  t.equal(Buffer.from(body.secret.slice(6), 'base64').length, 32, 'the secret is 32 random bytes')
  t.same(body, {
    webhook_id: body.webhook_id,
    organization_id: A,
    url: 'https://hooks.example.com/steward',
    event_types: ['approval.requested', 'policy.changed'],
    description: 'Ops',
    status: 'active',
    created_at: NOW,
    created_by: `key:${vars.ADMIN_KEY_ID_A}`,
    disabled_at: null,
    disabled_reason: null,
    secret: body.secret,
  })
  t.doesNotThrow(() => new Webhook(body.secret).sign('msg_1', new Date(), '{}'), 'the secret is one the standardwebhooks library takes')
  const { secret, ...shown } = body
  const read = await app.call('GET', `/webhooks/${body.webhook_id}`, { token: ADMIN })
  t.equal(read.status, 200)
  const readBody = await jsonOf(read)
  t.same(readBody, shown)
  const list = await jsonOf(await app.call('GET', '/webhooks', { token: ADMIN }))
  t.same(list, { webhooks: [shown], next_cursor: null })
  t.notOk(JSON.stringify(list).includes(secret.slice(6)), 'the list never shows the secret')
  const events = await auditOf('webhook.created')
  t.equal(events.length, 1)
  t.same(
    { actor: [events[0]!.actor_type, events[0]!.actor_id], target: [events[0]!.target_type, events[0]!.target_id], data: typeof events[0]!.data === 'string' ? JSON.parse(events[0]!.data) : events[0]!.data },
    { actor: ['key', vars.ADMIN_KEY_ID_A], target: ['webhook', body.webhook_id], data: { url: 'https://hooks.example.com/steward', event_types: ['approval.requested', 'policy.changed'], description: 'Ops' } },
  )
  t.notOk(JSON.stringify(events).includes(secret.slice(6)), 'the audit event holds no secret')
})

t.test('roles: Admin and Owner manage webhooks; Manager, Member and Viewer get 403', async (t) => {
  const owner = await create(vars.OWNER_KEY_A!, { url: 'https://owner.example.com/', event_types: ['key.created'] })
  t.equal(owner.res.status, 201)
  for (const role of ['MANAGER', 'MEMBER', 'VIEWER']) {
    const token = vars[`${role}_KEY_A`]!
    for (const [method, path] of [['GET', '/webhooks'], ['POST', '/webhooks'], ['GET', `/webhooks/${owner.body.webhook_id}`], ['DELETE', `/webhooks/${owner.body.webhook_id}`], ['GET', `/webhooks/${owner.body.webhook_id}/deliveries`]] as const) {
      const res = await app.call(method, path, { token, json: method === 'POST' ? { url: 'https://x.example.com/', event_types: ['key.created'] } : undefined })
      t.equal(res.status, 403, `${role} ${method} ${path}`)
      t.same(await jsonOf(res), { status: 'Forbidden', error: `This credential's role (${role.toLowerCase()}) lacks the webhooks:manage permission` })
    }
  }
  const unauthenticated = await app.call('GET', '/webhooks')
  t.equal(unauthenticated.status, 401)
})

t.test("another organization's webhooks and deliveries answer exactly like random ids", async (t) => {
  const { body } = await create(vars.ADMIN_KEY_B!, { url: 'https://b.example.com/', event_types: ['key.created'] })
  const other = body.webhook_id
  const random = crypto.randomUUID()
  for (const id of [other, random, 'not-a-uuid']) {
    for (const [method, path] of [['GET', `/webhooks/${id}`], ['DELETE', `/webhooks/${id}`], ['GET', `/webhooks/${id}/deliveries`], ['GET', `/webhooks/${id}/deliveries/${random}`], ['POST', `/webhooks/${id}/deliveries/${random}/replay`]] as const) {
      const res = await app.call(method, path, { token: ADMIN })
      t.equal(res.status, 404, `${method} ${path}`)
      t.same(await jsonOf(res), { status: 'Not Found', error: 'Webhook not found' })
    }
  }
  const list = await jsonOf(await app.call('GET', '/webhooks', { token: ADMIN }))
  t.notOk(list.webhooks.some((webhook: any) => webhook.webhook_id === other), 'the list holds only the caller organization')
  const still = await app.call('GET', `/webhooks/${other}`, { token: vars.ADMIN_KEY_B })
  t.equal(still.status, 200, 'org B still has it')
})

t.test('bad input answers 400 with a message, never 500', async (t) => {
  const ok = { url: 'https://hooks.example.com/', event_types: ['key.created'] }
  const cases: [unknown, string][] = [
    [{}, 'Field url is required'],
    [{ url: 'https://hooks.example.com/' }, 'Field event_types is required'],
    [{ ...ok, event_types: [] }, 'Field event_types must name at least one event type'],
    [{ ...ok, event_types: ['key.exploded'] }, 'Field event_types may hold only an audit type (such as key.rotated), a family (such as policy.*), * or a named subscription (policy.changed, mcp_server.changed, decision.denied) (at event_types.0)'],
    [{ ...ok, event_types: 'key.created' }, 'Field event_types must be an array of event types'],
    [{ ...ok, url: 7 }, 'Field url must be a string'],
    [{ ...ok, url: 'hooks.example.com' }, 'Field url must be an absolute URL'],
    [{ ...ok, url: 'ftp://hooks.example.com/' }, 'Field url must be an https URL'],
    [{ ...ok, url: 'https://user:pw@hooks.example.com/' }, 'Field url must not hold a user name or password'],
    [{ ...ok, url: 'https://hooks.example.com/#x' }, 'Field url must not hold a fragment'],
    [{ ...ok, url: `https://hooks.example.com/${'a'.repeat(2100)}` }, 'Field url is longer than 2048 characters'],
    [{ ...ok, description: 'a\u0001b' }, 'Field description holds a control character'],
    [{ ...ok, description: 'x'.repeat(501) }, 'Field description is longer than 500 characters'],
    [{ ...ok, secret: 'whsec_mine' }, 'Field secret is read-only'],
    [{ ...ok, extra: 1 }, 'Unknown field: extra'],
    [{ ...ok, url: 'http://hooks.example.com/' }, 'Field url must be an https URL (plain http only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://127.0.0.1/' }, 'Field url is refused: 127.0.0.1 is a loopback address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://[::ffff:127.0.0.1]:8443/' }, 'Field url is refused: [::ffff:7f00:1] is a loopback (IPv4 inside IPv6) address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://169.254.169.254/latest' }, 'Field url is refused: 169.254.169.254 is a link-local address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://10.0.0.8/' }, 'Field url is refused: 10.0.0.8 is a private address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://[fd00::1]/' }, 'Field url is refused: [fd00::1] is a unique-local address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://100.64.1.1/' }, 'Field url is refused: 100.64.1.1 is a shared address space (CGNAT) address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
    [{ ...ok, url: 'https://0x7f000001/' }, 'Field url is refused: 127.0.0.1 is a loopback address (allowed only with WEBHOOK_ALLOW_PRIVATE=true)'],
  ]
  for (const [json, error] of cases) {
    const { res, body } = await create(ADMIN, json)
    t.equal(res.status, 400, JSON.stringify(json).slice(0, 80))
    t.same(body, { status: 'Bad Request', error })
  }
  const nul = await app.call('POST', '/webhooks', { token: ADMIN, body: '{"url":"https://a.example.com/\u0000","event_types":["key.created"]}', headers: { 'content-type': 'application/json' } })
  t.equal(nul.status, 400)
  const huge = await app.call('POST', '/webhooks', { token: ADMIN, body: JSON.stringify({ ...ok, description: 'x'.repeat(100_000) }), headers: { 'content-type': 'application/json' } })
  t.equal(huge.status, 413)
  const array = await app.call('POST', '/webhooks', { token: ADMIN, json: [ok] })
  t.equal(array.status, 400)
  for (const query of ['limit=0', 'limit=101', 'limit=x', 'cursor=%%%', 'cursor=WyJ4Il0']) {
    const res = await app.call('GET', `/webhooks?${query}`, { token: ADMIN })
    t.equal(res.status, 400, query)
  }
})

t.test('duplicate event types are stored once; a name is not refused at create (it is checked at delivery)', async (t) => {
  const { res, body } = await create(ADMIN, { url: 'https://localhost.example.com:8443/in', event_types: ['key.created', 'key.created'] })
  t.equal(res.status, 201)
  t.same(body.event_types, ['key.created'])
})

t.test('list pages newest first with next_cursor', async (t) => {
  const fresh = await productApp(t)
  const ids: string[] = []
  for (let i = 0; i < 5; i++) {
    fresh.clock.advance(1000)
    const res = await fresh.call('POST', '/webhooks', { token: fresh.vars.ADMIN_KEY_A, json: { url: `https://h${i}.example.com/`, event_types: ['key.created'] } })
    ids.push((await jsonOf(res)).webhook_id)
  }
  const first = await jsonOf(await fresh.call('GET', '/webhooks?limit=2', { token: fresh.vars.ADMIN_KEY_A }))
  t.same(first.webhooks.map((w: any) => w.webhook_id), [ids[4], ids[3]])
  const second = await jsonOf(await fresh.call('GET', `/webhooks?limit=2&cursor=${first.next_cursor}`, { token: fresh.vars.ADMIN_KEY_A }))
  t.same(second.webhooks.map((w: any) => w.webhook_id), [ids[2], ids[1]])
  const third = await jsonOf(await fresh.call('GET', `/webhooks?limit=2&cursor=${second.next_cursor}`, { token: fresh.vars.ADMIN_KEY_A }))
  t.same(third, { webhooks: [third.webhooks[0]], next_cursor: null })
  t.equal(third.webhooks[0].webhook_id, ids[0])
})

t.test('DELETE: 204, then 404; a webhook.deleted event in the same transaction', async (t) => {
  const { body } = await create(ADMIN, { url: 'https://gone.example.com/', event_types: ['lead.created'] })
  const res = await app.call('DELETE', `/webhooks/${body.webhook_id}`, { token: ADMIN })
  t.equal(res.status, 204)
  t.equal(await res.text(), '')
  const again = await app.call('DELETE', `/webhooks/${body.webhook_id}`, { token: ADMIN })
  t.equal(again.status, 404)
  const read = await app.call('GET', `/webhooks/${body.webhook_id}`, { token: ADMIN })
  t.equal(read.status, 404)
  const events = (await auditOf('webhook.deleted')).filter((event) => event.target_id === body.webhook_id)
  t.equal(events.length, 1)
  t.equal(events[0]!.actor_id, vars.ADMIN_KEY_ID_A)
})

t.test('delivery log and replay through the routes', async (t) => {
  const { body } = await create(ADMIN, { url: 'https://log.example.com/', event_types: ['key.created'] })
  const id = body.webhook_id
  const empty = await jsonOf(await app.call('GET', `/webhooks/${id}/deliveries`, { token: ADMIN }))
  t.same(empty, { deliveries: [], next_cursor: null })
  // A delivery as the worker leaves it: delivered once.
  const deliveryId = crypto.randomUUID()
  await app.db
    .insertInto('webhook_deliveries')
    .values({
      delivery_id: deliveryId,
      webhook_id: id,
      organization_id: A,
      event_id: 42,
      decision_id: null,
      message_id: 'evt_42',
      type: 'key.created',
      occurred_at: new Date(NOW),
      payload: '{"type":"key.created","timestamp":"2026-11-22T12:00:00.000Z","data":{}}',
      status: 'delivered',
      attempts: 1,
      last_status_code: 204,
      last_attempt_at: new Date(NOW),
      delivered_at: new Date(NOW),
      created_at: new Date(NOW),
    })
    .execute()
  const expected = {
    delivery_id: deliveryId,
    webhook_id: id,
    event_id: 42,
    decision_id: null,
    message_id: 'evt_42',
    type: 'key.created',
    status: 'delivered',
    attempts: 1,
    last_status_code: 204,
    last_error: null,
    next_attempt_at: null,
    last_attempt_at: NOW,
    delivered_at: NOW,
    created_at: NOW,
    replay_of: null,
  }
  t.same(await jsonOf(await app.call('GET', `/webhooks/${id}/deliveries`, { token: ADMIN })), { deliveries: [expected], next_cursor: null })
  t.same(await jsonOf(await app.call('GET', `/webhooks/${id}/deliveries/${deliveryId}`, { token: ADMIN })), expected)
  const replay = await app.call('POST', `/webhooks/${id}/deliveries/${deliveryId}/replay`, { token: ADMIN })
  t.equal(replay.status, 201)
  const queued = await jsonOf(replay)
  t.equal(replay.headers.get('location'), `https://api.example.com/webhooks/${id}/deliveries/${queued.delivery_id}`)
  t.same(queued, { ...expected, delivery_id: queued.delivery_id, status: 'pending', attempts: 0, last_status_code: null, last_attempt_at: null, delivered_at: null, next_attempt_at: NOW, replay_of: deliveryId })
  const page = await jsonOf(await app.call('GET', `/webhooks/${id}/deliveries?limit=1`, { token: ADMIN }))
  t.same(page.deliveries.map((d: any) => d.delivery_id), [queued.delivery_id], 'newest first')
  const next = await jsonOf(await app.call('GET', `/webhooks/${id}/deliveries?limit=1&cursor=${page.next_cursor}`, { token: ADMIN }))
  t.same(next, { deliveries: [expected], next_cursor: null })
  // A delivery of another endpoint is not found through this one.
  const { body: other } = await create(ADMIN, { url: 'https://other.example.com/', event_types: ['key.created'] })
  const cross = await app.call('GET', `/webhooks/${other.webhook_id}/deliveries/${deliveryId}`, { token: ADMIN })
  t.equal(cross.status, 404)
  t.same(await jsonOf(cross), { status: 'Not Found', error: 'Delivery not found' })
  // Replay of a disabled endpoint: 409.
  await app.db.updateTable('webhooks').set({ status: 'disabled' }).where('webhook_id', '=', id).execute()
  const refused = await app.call('POST', `/webhooks/${id}/deliveries/${deliveryId}/replay`, { token: ADMIN })
  t.equal(refused.status, 409)
  t.same(await jsonOf(refused), { status: 'Conflict', error: 'The webhook is disabled; create a new one to receive events again' })
})

t.test('WEBHOOK_ALLOW_PRIVATE=true accepts http and internal addresses', async (t) => {
  const open = await productApp(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' } })
  const res = await open.call('POST', '/webhooks', { token: open.vars.ADMIN_KEY_A, json: { url: 'http://127.0.0.1:9/in', event_types: ['key.created'] } })
  t.equal(res.status, 201)
})
