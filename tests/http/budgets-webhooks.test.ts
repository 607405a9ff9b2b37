// Budget events as webhooks (docs/budgets.md): an endpoint subscribed to limit.changed and
// limit.reached gets the policy's limits when they are written and the counter when a limit is
// first reached in a window, once per window, delivered by the webhook worker.
import { createServer } from 'node:http'
import t from 'tap'
import { createWebhookWorker } from '../../jobs/webhook-delivery.ts'
import { silentLogger } from '../../log.ts'
import { FakeClock } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

const received: any[] = []
const server = createServer((request, response) => {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    received.push(JSON.parse(Buffer.concat(chunks).toString()))
    response.writeHead(204).end()
  })
})
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()))
const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`

const clock = new FakeClock(Date.now() - 60_000)
const app = await productApp(t, { env: { WEBHOOK_ALLOW_PRIVATE: 'true' }, clock })
await app.app.close()
const worker = createWebhookWorker(app.config, { db: app.db, clock: clock.read, logger: silentLogger })
t.teardown(() => worker.close())
const { vars } = app

t.test('limit.changed when limits are written, limit.reached once per window', async (t) => {
  const hook = await app.call('POST', '/webhooks', { token: vars.ADMIN_KEY_A, json: { url, event_types: ['limit.reached', 'limit.changed'] } })
  t.equal(hook.status, 201)
  await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'hooked' } })
  const limit = { name: 'two a day', kind: 'count', max: 2, window: { type: 'day', tz: 'UTC' } }
  const created = await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.ADMIN_KEY_A, json: { name: 'Hooked', effect: 'allow', actions: ['hook.go'], limits: [limit] } })
  const policy = await jsonOf(created)
  const ask = async () => (await jsonOf(await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, json: { agent: 'hooked', action: 'hook.go', resource: 'r' } }))).decision
  t.same([await ask(), await ask(), await ask(), await ask()], ['allow', 'allow', 'deny', 'deny'])
  await worker.tick()
  t.same(
    received.map((body) => body.type),
    ['limit.changed', 'limit.reached'],
    'one change, and one reached for the window however many refusals follow',
  )
  t.match(received[0].data, { policy_id: policy.policy_id, version: 1, name: 'Hooked', limits: [limit] })
  t.match(received[1].data, { policy_id: policy.policy_id, policy_name: 'Hooked', limit: 'two a day', kind: 'count', scope: 'agent', max: 2, used: 2, window: { type: 'day', tz: 'UTC' } })
})
