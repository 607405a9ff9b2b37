// Webhook delivery: the outbox (audit events, denied decisions) fanned out by transaction-id
// bound, ordered at-least-once delivery signed per Standard Webhooks (checked with the library's
// own verify), the retry schedule on a fake clock, disabling, the SSRF guard at delivery time,
// a late-committing lower event id, and the worker's life inside the handler.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import t, { type Test } from 'tap'
import { Webhook } from 'standardwebhooks'
import { recordEvent } from '../../storage/audit.ts'
import type { Database } from '../../database/schema.ts'
import type { Kysely } from 'kysely'
import { createWebhookWorker } from '../../jobs/webhook-delivery.ts'
import { createSender } from '../../services/webhook-sender.ts'
import { createHandler } from '../../server.ts'
import { RETRY_SCHEDULE_MS } from '../../domain/webhooks.ts'
import { silentLogger } from '../../log.ts'
import { DATABASE_KIND, FakeClock } from '../support/helpers.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

interface Received {
  headers: Record<string, string>
  body: string
  status: number
}

/** A receiver on 127.0.0.1 whose answer per request `respond` decides (default 204). */
async function receiver(t: Test, respond: (index: number, request: IncomingMessage, response: ServerResponse) => number | void = () => 204) {
  const received: Received[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const status = respond(received.length, request, response)
      if (status === undefined) return
      received.push({ headers: request.headers as Record<string, string>, body: Buffer.concat(chunks).toString(), status })
      response.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()))
  const port = (server.address() as { port: number }).port
  return { received, port, url: `http://127.0.0.1:${port}/hook`, accepted: () => received.filter((r) => r.status >= 200 && r.status < 300) }
}

async function event(db: Kysely<Database>, organizationId: string, type: 'key.created' | 'policy.updated' | 'lead.created' | 'approval.requested' | 'agent.suspended', data: Record<string, unknown>, at: number, target = { type: 'key', id: crypto.randomUUID() as string }) {
  await db.transaction().execute((trx) => recordEvent(trx, { organizationId, actor: { type: 'user', id: crypto.randomUUID() }, type, target, data, occurredAt: new Date(at), requestId: 'req-1' }))
}

/** An endpoint for the test, deleted when the test ends (so later tests' events do not reach it). */
async function subscribe(t: Test, app: ProductApp, url: string, eventTypes: string[]): Promise<{ webhook_id: string; secret: string }> {
  const res = await app.call('POST', '/webhooks', { token: app.vars.ADMIN_KEY_A, json: { url, event_types: eventTypes } })
  if (res.status !== 201) throw new Error(`POST /webhooks answered ${res.status}: ${await res.text()}`)
  const body = await jsonOf(res)
  t.teardown(async () => void (await app.call('DELETE', `/webhooks/${body.webhook_id}`, { token: app.vars.ADMIN_KEY_A })).arrayBuffer())
  return body
}

// One app for the file (private targets allowed: the receivers are on 127.0.0.1). The tests drive
// their own worker on a fake clock: the app's background one (started by createTestApp) is stopped.
const clock = new FakeClock(Date.now())
const app = await productApp(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' }, clock })
await app.app.close()
const worker = createWebhookWorker(app.config, { db: app.db, clock: clock.read, logger: silentLogger })
t.teardown(() => worker.close())

t.test('with no active endpoint a pass only moves the cursor; an endpoint created later gets only what comes after it', async (t) => {
  clock.now = Date.now() - 100_000
  const A = app.vars.ORG_A!
  const active = await app.db.selectFrom('webhooks').select('webhook_id').where('status', '=', 'active').execute()
  t.same(active, [], 'no endpoint is active')
  await event(app.db, A, 'key.created', { name: 'before' }, clock.now)
  const before = await app.db.selectFrom('audit_events').select('xid').where('organization_id', '=', A).orderBy('event_id', 'desc').limit(1).executeTakeFirstOrThrow()
  const deliveries = async () => Number((await app.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n)
  const queued = await deliveries()
  await worker.tick()
  const cursor = await app.db.selectFrom('webhook_fanout').select('xid_through').executeTakeFirstOrThrow()
  t.ok(Number(cursor.xid_through) > Number(before.xid), 'the cursor moved past the event')
  t.equal(await deliveries(), queued, 'nothing was queued')

  const hook = await receiver(t)
  await subscribe(t, app, hook.url, ['key.created'])
  await event(app.db, A, 'key.created', { name: 'after' }, clock.now)
  await worker.tick()
  t.same(
    hook.accepted().map((r) => JSON.parse(r.body).data.name),
    ['after'],
    'the endpoint gets the event written after it, not the one before',
  )
})

t.test('a receiver that fails at first gets every event exactly once, in order, with a valid signature', async (t) => {
  // Near the real time: the library's verify allows five minutes of skew.
  clock.now = Date.now() - 200_000
  const hook = await receiver(t, (index) => (index < 2 ? 500 : 200))
  const { webhook_id, secret } = await subscribe(t, app, hook.url, ['key.created', 'policy.changed'])
  const A = app.vars.ORG_A!
  for (let i = 1; i <= 5; i++) await event(app.db, A, i % 2 ? 'key.created' : 'policy.updated', { name: `k${i}` }, clock.now)
  await event(app.db, A, 'lead.created', { email: 'not@subscribed.example' }, clock.now)

  await worker.tick()
  t.equal(hook.received.length, 1, 'the first attempt failed, and the later events wait behind it')
  clock.advance(4_999)
  await worker.tick()
  t.equal(hook.received.length, 1, 'no retry before 5 s')
  clock.advance(1)
  await worker.tick()
  t.equal(hook.received.length, 2, 'the second attempt after 5 s')
  clock.advance(300_000)
  await worker.tick()
  t.equal(hook.received.length, 7, 'after 5 min the first succeeds and the other four follow')
  await worker.tick()
  t.equal(hook.received.length, 7, 'nothing is sent twice')

  const accepted = hook.accepted()
  t.same(accepted.map((r) => JSON.parse(r.body).data.name), ['k1', 'k2', 'k3', 'k4', 'k5'], 'each event once, in order')
  t.same(accepted.map((r) => JSON.parse(r.body).type), ['key.created', 'policy.updated', 'key.created', 'policy.updated', 'key.created'])
  t.same(new Set(hook.received.slice(0, 3).map((r) => r.headers['webhook-id'])).size, 1, 'webhook-id is the same for every attempt of one event')
  const verifier = new Webhook(secret)
  for (const request of accepted) {
    const payload = verifier.verify(request.body, request.headers) as any
    t.same(Object.keys(payload), ['type', 'timestamp', 'data'])
    t.same(Object.keys(payload.data).sort(), ['actor', 'event_id', 'name', 'organization_id', 'target'])
    t.equal(payload.data.organization_id, A)
    t.equal(request.headers['webhook-id'], `evt_${payload.data.event_id}`)
    t.equal(request.headers['content-type'], 'application/json')
  }
  t.throws(() => verifier.verify(accepted[0]!.body.replace('k1', 'k9'), accepted[0]!.headers), 'a changed body does not verify')
  t.throws(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(accepted[0]!.body, accepted[0]!.headers), 'another secret does not verify')

  const log = await jsonOf(await app.call('GET', `/webhooks/${webhook_id}/deliveries`, { token: app.vars.ADMIN_KEY_A }))
  t.equal(log.deliveries.length, 5, 'lead.created was not subscribed')
  const first = log.deliveries.at(-1)
  t.match(first, { status: 'delivered', attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null, delivered_at: new Date(clock.now).toISOString() })
  t.ok(log.deliveries.every((d: any) => d.status === 'delivered'))
  const row = await app.db.selectFrom('webhooks').select(['failing_since', 'status']).where('webhook_id', '=', webhook_id).executeTakeFirstOrThrow()
  t.same(row, { failing_since: null, status: 'active' }, 'a success clears the failure run')
})

t.test('approval.requested carries what an approver needs; decision.denied comes from the decision log; no secret in any payload', async (t) => {
  clock.now = Date.now()
  const hook = await receiver(t)
  const { secret } = await subscribe(t, app, hook.url, ['approval.requested', 'decision.denied', 'key.created'])
  const A = app.vars.ORG_A!
  const agent = await jsonOf(await app.call('POST', '/agents', { token: app.vars.MANAGER_KEY_A, json: { handle: 'pay-bot' } }))
  const asked = await jsonOf(
    await app.call('POST', '/decisions', {
      token: app.vars.MEMBER_KEY_A,
      json: { agent: 'pay-bot', action: 'payments.refund', resource: 'order/8812', args: { amount: 120, card_token: 'tok_live_secret' } },
    }),
  )
  t.equal(asked.decision, 'require_approval')
  const approvalId = asked.approval.approval_id
  // The decision's own transaction wrote approval.requested.
  // A denied decision, through the route: an unknown agent is denied by default.
  const denied = await jsonOf(await app.call('POST', '/decisions', { token: app.vars.MEMBER_KEY_A, json: { agent: 'stranger', action: 'files.delete', resource: 'x' } }))
  t.equal(denied.decision, 'deny')
  // The route writes key.created; a second event whose data tries to carry secrets: they never leave.
  const key = await jsonOf(await app.call('POST', '/keys', { token: app.vars.ADMIN_KEY_A, json: { name: 'ci', role: 'viewer' } }))
  await event(app.db, A, 'key.created', { name: 'ci', api_key: key.api_key, password: 'hunter2', nested: { token: 'stw_at_x', authorization: 'Bearer y' } }, clock.now, { type: 'key', id: key.key_id })

  await worker.tick()
  const verifier = new Webhook(secret)
  const payloads = hook.received.map((r) => verifier.verify(r.body, r.headers) as any)
  t.same(payloads.map((p) => p.type), ['approval.requested', 'decision.denied', 'key.created', 'key.created'])
  const [approval, decision, routeKeyEvent, keyEvent] = payloads
  t.match(routeKeyEvent.data, { key_id: key.key_id, name: 'ci', role: 'viewer', target: { type: 'key', id: key.key_id } })
  t.equal(approval.type, 'approval.requested')
  t.match(approval.data, {
    approval_id: approvalId,
    decision_id: asked.decision_id,
    agent: { agent_id: agent.agent_id, handle: 'pay-bot' },
    action: 'payments.refund',
    resource: 'order/8812',
    args: { amount: 120 },
    expires_at: asked.approval.expires_at,
    approvers_required: 1,
    links: {
      approval: `https://api.example.com/approvals/${approvalId}`,
      approve: `https://api.example.com/approvals/${approvalId}/approve`,
      deny: `https://api.example.com/approvals/${approvalId}/deny`,
    },
    organization_id: A,
    target: { type: 'approval', id: approvalId },
  })
  t.notOk('card_token' in approval.data.args, 'a secret-looking argument is left out')
  t.equal(decision.type, 'decision.denied')
  t.match(decision.data, { decision_id: denied.decision_id, agent: { handle: 'stranger' }, action: 'files.delete', resource: 'x', decision: 'deny', organization_id: A, event_id: null })
  t.equal(hook.received[1]!.headers['webhook-id'], `dec_${denied.decision_id}`)
  t.same(keyEvent.data.nested, {})
  const all = hook.received.map((r) => r.body).join('\n')
  for (const secretText of [key.api_key, 'hunter2', 'stw_at_x', 'Bearer y', 'tok_live_secret', secret, secret.slice(6), app.vars.ADMIN_KEY_A!, app.vars.USER_PASSWORD_A!]) {
    t.notOk(all.includes(secretText), `no ${secretText.slice(0, 8)}… in any payload`)
  }
  // A key's display prefix (its first six random characters, shown in every key list) is public.
  const withoutDisplayPrefixes = all.replace(/"(?:display_)?prefix":"stw_key_[A-Za-z0-9]{6}"/g, '')
  t.notOk(/stw_|whsec_|password/.test(withoutDisplayPrefixes), 'no credential prefix or password field at all')
})

t.test('the retry schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), giving up, then disabling after 5 days of failures', async (t) => {
  clock.now = Date.parse('2026-11-22T12:00:00Z')
  const hook = await receiver(t, () => 503)
  const { webhook_id } = await subscribe(t, app, hook.url, ['key.created'])
  const A = app.vars.ORG_A!
  const start = clock.now
  await event(app.db, A, 'key.created', { name: 'first' }, clock.now)
  const attemptsAt: number[] = []
  await worker.tick()
  attemptsAt.push(clock.now)
  for (const delay of RETRY_SCHEDULE_MS) {
    clock.advance(delay - 1)
    await worker.tick()
    t.equal(hook.received.length, attemptsAt.length, `not before ${delay} ms`)
    clock.advance(1)
    await worker.tick()
    attemptsAt.push(clock.now)
    t.equal(hook.received.length, attemptsAt.length, `attempt ${attemptsAt.length} after ${delay} ms`)
  }
  t.same(
    attemptsAt.slice(1).map((at, i) => at - attemptsAt[i]!),
    [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
  )
  t.same(
    hook.received.map((r) => Number(r.headers['webhook-timestamp'])),
    attemptsAt.map((at) => Math.floor(at / 1000)),
    'webhook-timestamp is the time of each attempt',
  )
  const [given] = (await jsonOf(await app.call('GET', `/webhooks/${webhook_id}/deliveries`, { token: app.vars.ADMIN_KEY_A }))).deliveries
  t.match(given, { status: 'failed', attempts: 8, last_status_code: 503, last_error: 'HTTP 503', next_attempt_at: null, delivered_at: null })
  clock.advance(36_000_000)
  await worker.tick()
  t.equal(hook.received.length, 8, 'a given-up event is not tried again')

  // More events keep failing until the endpoint has failed for 5 days: then it is disabled.
  let guard = 0
  for (;;) {
    const row = await app.db.selectFrom('webhooks').select(['status', 'disabled_at']).where('webhook_id', '=', webhook_id).executeTakeFirstOrThrow()
    if (row.status === 'disabled' || guard++ > 200) break
    const next = await app.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.min('next_attempt_at').as('at')).where('webhook_id', '=', webhook_id).where('status', '=', 'pending').executeTakeFirst()
    if (next?.at) clock.now = Math.max(clock.now, new Date(next.at as Date).getTime())
    else await event(app.db, A, 'key.created', { name: `more-${guard}` }, clock.now)
    await worker.tick()
  }
  const row = await app.db.selectFrom('webhooks').selectAll().where('webhook_id', '=', webhook_id).executeTakeFirstOrThrow()
  t.equal(row.status, 'disabled')
  const failingFor = new Date(row.disabled_at!).getTime() - start
  t.ok(failingFor >= 5 * 86_400_000 && failingFor < 5 * 86_400_000 + 36_000_001, `disabled after ${(failingFor / 3_600_000).toFixed(1)} h of failures`)
  const read = await jsonOf(await app.call('GET', `/webhooks/${webhook_id}`, { token: app.vars.ADMIN_KEY_A }))
  t.equal(read.status, 'disabled')
  t.equal(read.disabled_reason, `Every delivery attempt failed since ${new Date(start).toISOString()}`)
  const audit = await app.db.selectFrom('audit_events').selectAll().where('type', '=', 'webhook.disabled').execute()
  t.equal(audit.length, 1)
  t.same([audit[0]!.actor_type, audit[0]!.target_type, audit[0]!.target_id], ['system', 'webhook', webhook_id])
  const sent = hook.received.length
  await event(app.db, A, 'key.created', { name: 'after' }, clock.now)
  clock.advance(86_400_000)
  await worker.tick()
  t.equal(hook.received.length, sent, 'a disabled endpoint gets nothing')
})

t.test('replay sends the event again with the same webhook-id', async (t) => {
  clock.now = Date.now()
  const hook = await receiver(t)
  const { webhook_id, secret } = await subscribe(t, app, hook.url, ['key.created'])
  await event(app.db, app.vars.ORG_A!, 'key.created', { name: 'once' }, clock.now)
  await worker.tick()
  const [delivered] = (await jsonOf(await app.call('GET', `/webhooks/${webhook_id}/deliveries`, { token: app.vars.ADMIN_KEY_A }))).deliveries
  const replay = await app.call('POST', `/webhooks/${webhook_id}/deliveries/${delivered.delivery_id}/replay`, { token: app.vars.ADMIN_KEY_A })
  t.equal(replay.status, 201)
  await worker.tick()
  t.equal(hook.received.length, 2)
  t.equal(hook.received[1]!.body, hook.received[0]!.body)
  t.equal(hook.received[1]!.headers['webhook-id'], hook.received[0]!.headers['webhook-id'])
  t.doesNotThrow(() => new Webhook(secret).verify(hook.received[1]!.body, hook.received[1]!.headers))
})

t.test('loopback targets are refused by default, at delivery too, whatever the name or form', async (t) => {
  const hook = await receiver(t)
  const sender = createSender({ allowPrivate: false, timeoutMs: 2000, maxResponseBytes: 1024 })
  t.teardown(() => sender.close())
  const cases: [string, RegExp][] = [
    [`http://localhost:${hook.port}/`, /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address; set WEBHOOK_ALLOW_PRIVATE=true/],
    [`http://127.0.0.1:${hook.port}/`, /^refused: 127\.0\.0\.1 is a loopback address; set WEBHOOK_ALLOW_PRIVATE=true/],
    [`http://127.0.0.1/`, /^refused: 127\.0\.0\.1 is a loopback address/],
    [`http://[::ffff:127.0.0.1]:${hook.port}/`, /^refused: \[::ffff:7f00:1\] is a loopback \(IPv4 inside IPv6\) address/],
    [`http://[::1]:${hook.port}/`, /^refused: \[::1\] is a loopback address/],
    [`http://0.0.0.0:${hook.port}/`, /^refused: 0\.0\.0\.0 is a unspecified/],
    [`http://2130706433:${hook.port}/`, /^refused: 127\.0\.0\.1 is a loopback address/],
  ]
  for (const [url, error] of cases) {
    const result = await sender(url, {}, '{}')
    t.equal(result.ok, false, url)
    t.match(result.error, error, url)
  }
  t.equal(hook.received.length, 0, 'the receiver never saw a request')
  const allowed = createSender({ allowPrivate: true, timeoutMs: 2000, maxResponseBytes: 1024 })
  t.teardown(() => allowed.close())
  t.same(await allowed(`http://localhost:${hook.port}/`, {}, '{}'), { ok: true, statusCode: 204, error: null }, 'WEBHOOK_ALLOW_PRIVATE=true lets it through')

  // End to end: an endpoint created by name (names are checked at delivery) gets a clear error in its log.
  const strict = createWebhookWorker({ ...app.config, webhookAllowPrivate: false }, { db: app.db, clock: clock.read, logger: silentLogger })
  t.teardown(() => strict.close())
  const { webhook_id } = await subscribe(t, app, `https://localhost:${hook.port}/hook`, ['key.created'])
  await event(app.db, app.vars.ORG_A!, 'key.created', { name: 'x' }, app.clock.now)
  await strict.tick()
  const [delivery] = (await jsonOf(await app.call('GET', `/webhooks/${webhook_id}/deliveries`, { token: app.vars.ADMIN_KEY_A }))).deliveries
  t.match(delivery, { status: 'pending', attempts: 1, last_status_code: null, last_error: /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/ })
  t.equal(hook.received.length, 1, 'only the allowed sender reached it')
})

t.test('a redirect is not followed; a slow receiver times out; a huge answer is not read whole', async (t) => {
  const target = await receiver(t)
  const hook = await receiver(t, (_index, _request, response) => {
    response.writeHead(302, { location: target.url }).end()
    return undefined
  })
  const sender = createSender({ allowPrivate: true, timeoutMs: 300, maxResponseBytes: 64 * 1024 })
  t.teardown(() => sender.close())
  t.same(await sender(hook.url, {}, '{}'), { ok: false, statusCode: 302, error: 'HTTP 302: redirects are not followed' })
  t.equal(target.received.length, 0)
  const slow = createServer(() => {})
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { slow.closeAllConnections(); slow.close(() => resolve()) }))
  const started = Date.now()
  t.same(await sender(`http://127.0.0.1:${(slow.address() as { port: number }).port}/`, {}, '{}'), { ok: false, statusCode: null, error: 'no answer within 300 ms' })
  t.ok(Date.now() - started < 2000)
  const big = createServer((_request, response) => {
    response.writeHead(200)
    response.end(Buffer.alloc(8 * 1024 * 1024, 120))
  })
  await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { big.closeAllConnections(); big.close(() => resolve()) }))
  t.same(await sender(`http://127.0.0.1:${(big.address() as { port: number }).port}/`, {}, '{}'), { ok: true, statusCode: 200, error: null })
})

t.test('an event committed late with a lower event_id is still delivered, and in order', { skip: DATABASE_KIND === 'pglite' ? 'PGlite runs one transaction at a time' : false }, async (t) => {
  clock.now = Date.now()
  const hook = await receiver(t)
  await subscribe(t, app, hook.url, ['key.created'])
  const A = app.vars.ORG_A!
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  let lowId = 0
  const slow = app.db.transaction().execute(async (trx) => {
    await recordEvent(trx, { organizationId: A, actor: { type: 'system', id: null }, type: 'key.created', target: { type: 'key', id: null }, data: { name: 'late' }, occurredAt: new Date(clock.now) })
    lowId = Number((await trx.selectFrom('audit_events').select((eb) => eb.fn.max('event_id').as('id')).executeTakeFirstOrThrow()).id)
    await held
  })
  while (lowId === 0) await new Promise((resolve) => setTimeout(resolve, 10))
  await event(app.db, A, 'key.created', { name: 'early' }, clock.now)
  const highId = Number((await app.db.selectFrom('audit_events').select((eb) => eb.fn.max('event_id').as('id')).executeTakeFirstOrThrow()).id)
  t.ok(lowId < highId, `the open transaction holds event ${lowId}, below the committed ${highId}`)
  await worker.tick()
  t.equal(hook.received.length, 0, 'nothing is fanned out past a transaction still open')
  release()
  await slow
  await worker.tick()
  t.same(hook.received.map((r) => JSON.parse(r.body).data.name), ['late', 'early'])
  t.same(hook.received.map((r) => JSON.parse(r.body).data.event_id), [lowId, highId])
})

t.test('the handler runs the worker between start() and close()', async (t) => {
  const hook = await receiver(t)
  await subscribe(t, app, hook.url, ['lead.created'])
  await event(app.db, app.vars.ORG_A!, 'lead.created', { email_domain: 'example.com' }, app.clock.now)
  const handler = createHandler(app.config, { db: app.db, clock: app.clock.read, logger: silentLogger, listenUrl: null })
  await new Promise((resolve) => setTimeout(resolve, 1200))
  t.equal(hook.received.length, 0, 'nothing before start()')
  handler.start()
  for (let i = 0; i < 50 && hook.received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 100))
  t.equal(hook.received.length, 1, 'delivered by the started worker')
  await handler.close()
  await event(app.db, app.vars.ORG_A!, 'lead.created', { email_domain: 'example.org' }, app.clock.now)
  await new Promise((resolve) => setTimeout(resolve, 1500))
  t.equal(hook.received.length, 1, 'nothing after close()')
})
