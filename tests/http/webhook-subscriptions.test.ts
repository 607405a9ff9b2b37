// Webhook subscriptions beyond the named ones: any audit type, a family (`policy.*`) and `*`
// reach the endpoint through the real fan-out and delivery; the first release's names keep
// covering exactly what they did; unknown names and families are refused with 400.
import { createServer } from 'node:http'
import t, { type Test } from 'tap'
import type { Kysely } from 'kysely'
import { recordEvent } from '../../storage/audit.ts'
import type { AuditEventType } from '../../domain/audit.ts'
import type { Database } from '../../database/schema.ts'
import { coveredTypes, WEBHOOK_EVENT_TYPES, WEBHOOK_SUBSCRIPTIONS } from '../../domain/webhooks.ts'
import { createWebhookWorker } from '../../jobs/webhook-delivery.ts'
import { silentLogger } from '../../log.ts'
import { FakeClock } from '../support/helpers.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

async function receiver(t: Test) {
  const types: string[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      types.push(JSON.parse(Buffer.concat(chunks).toString()).type)
      response.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()))
  return { types, url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook` }
}

async function subscribe(t: Test, app: ProductApp, url: string, eventTypes: string[]): Promise<void> {
  const res = await app.call('POST', '/webhooks', { token: app.vars.ADMIN_KEY_A, json: { url, event_types: eventTypes } })
  const body = await jsonOf(res)
  if (res.status !== 201) throw new Error(`POST /webhooks answered ${res.status}: ${JSON.stringify(body)}`)
  t.teardown(async () => void (await app.call('DELETE', `/webhooks/${body.webhook_id}`, { token: app.vars.ADMIN_KEY_A })).arrayBuffer())
}

async function event(db: Kysely<Database>, organizationId: string, type: AuditEventType, at: number): Promise<void> {
  await db.transaction().execute((trx) =>
    recordEvent(trx, { organizationId, actor: { type: 'user', id: crypto.randomUUID() }, type, target: { type: type.split('.')[0]!, id: crypto.randomUUID() }, data: {}, occurredAt: new Date(at), requestId: 'req-1' }),
  )
}

const clock = new FakeClock(Date.now())
const app = await productApp(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' }, clock })
await app.app.close()
const worker = createWebhookWorker(app.config, { db: app.db, clock: clock.read, logger: silentLogger })
t.teardown(() => worker.close())

// What a security team wants pushed, none of which the named subscriptions cover.
const WANTED: AuditEventType[] = ['member.changed', 'login.failed', 'key.rotated', 'approval.cancelled', 'approval.consumed']

t.test('* and families reach the endpoint with the types no named subscription covered', async (t) => {
  const all = await receiver(t)
  const approvals = await receiver(t)
  const named = await receiver(t)
  await subscribe(t, app, all.url, ['*'])
  await subscribe(t, app, approvals.url, ['approval.*'])
  await subscribe(t, app, named.url, ['approval.requested', 'key.created'])
  const A = app.vars.ORG_A!
  // A real change of the organization's settings (default_decision set to allow): settings.changed.
  const patched = await app.call('PATCH', '/organization', { token: app.vars.OWNER_KEY_A, json: { default_decision: 'allow' } })
  t.equal(patched.status, 200, 'the settings change is made')
  for (const type of WANTED) await event(app.db, A, type, clock.now)
  await event(app.db, A, 'approval.requested', clock.now)
  await event(app.db, app.vars.ORG_B!, 'key.rotated', clock.now)
  // On a shared PostgreSQL another session's open transaction holds the fan-out's bound back
  // (it reads only below the oldest running transaction): tick until it has passed ours.
  for (let i = 0; i < 100 && all.types.length < 9; i++) {
    await worker.tick()
    if (all.types.length < 9) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // The two endpoints created after the `*` one are events of the organization too.
  t.same(all.types, ['webhook.created', 'webhook.created', 'settings.changed', ...WANTED, 'approval.requested'], '* gets every event of its organization, in order, and none of another')
  t.same(approvals.types, ['approval.cancelled', 'approval.consumed', 'approval.requested'], 'approval.* gets the approval family only')
  t.same(named.types, ['approval.requested'], 'a named subscription still gets only what it covers')
  await app.call('PATCH', '/organization', { token: app.vars.OWNER_KEY_A, json: { default_decision: 'deny' } })
})

t.test('* covers denied decisions too; a single audit type is its own subscription', async (t) => {
  t.ok(coveredTypes(['*']).includes('decision.denied'))
  t.same(coveredTypes(['key.rotated']), ['key.rotated'])
  t.same(coveredTypes(['decision.*']), ['decision.denied'])
  t.same(coveredTypes(['nope.*', 'nope']), [], 'unknown names cover nothing')
})

t.test("the first release's names are accepted and cover what they did", async (t) => {
  t.same(coveredTypes(['policy.changed']), ['policy.created', 'policy.updated', 'policy.archived', 'policy.rolled_back'])
  t.same(coveredTypes(['mcp_server.changed']), ['mcp_server.created', 'mcp_server.updated', 'mcp_server.deleted'])
  t.same(coveredTypes(['decision.denied']), ['decision.denied'])
  for (const name of WEBHOOK_EVENT_TYPES) if (name !== 'policy.changed' && name !== 'mcp_server.changed' && name !== 'decision.denied') t.same(coveredTypes([name]), [name], name)
  const res = await app.call('POST', '/webhooks', { token: app.vars.ADMIN_KEY_A, json: { url: 'https://hooks.example.com/', event_types: [...WEBHOOK_EVENT_TYPES] } })
  const body = await jsonOf(res)
  t.equal(res.status, 201)
  t.same(body.event_types, [...WEBHOOK_EVENT_TYPES])
  await app.call('DELETE', `/webhooks/${body.webhook_id}`, { token: app.vars.ADMIN_KEY_A })
})

t.test('unknown names, families and patterns are refused with 400', async (t) => {
  const message =
    'Field event_types may hold only an audit type (such as key.rotated), a family (such as policy.*), * or a named subscription (policy.changed, mcp_server.changed, decision.denied)'
  for (const bad of ['key.exploded', 'nope.*', 'policy.**', '**', 'policy', '*.created', 'POLICY.*']) {
    const res = await app.call('POST', '/webhooks', { token: app.vars.ADMIN_KEY_A, json: { url: 'https://hooks.example.com/', event_types: ['*', bad] } })
    t.equal(res.status, 400, bad)
    t.same(await jsonOf(res), { status: 'Bad Request', error: `${message} (at event_types.1)` }, bad)
  }
  t.ok(WEBHOOK_SUBSCRIPTIONS.includes('member.*') && WEBHOOK_SUBSCRIPTIONS.includes('login.failed'), 'the audit vocabulary is subscribable')
})
