// The default start loads neither the OTLP encoder nor prom-client: every module resolved
// from here on is recorded (tests/support/import-recorder.mjs), a handler is built with the
// default settings, started, asked a few requests and closed; then the same with tracing and
// metrics on, as the check that the recorder sees those imports when they happen.
import { register } from 'node:module'
import { MessageChannel } from 'node:worker_threads'
import t from 'tap'
import { createHandler } from '../../server.ts'
import { FakeClock, memoryLogger, openTestDatabase, testConfig } from '../support/helpers.ts'
import { otlpReceiver } from '../support/otlp-receiver.ts'

const resolved: string[] = []
const { port1, port2 } = new MessageChannel()
port1.on('message', (url: string) => resolved.push(url))
port1.unref()
register('../support/import-recorder.mjs', import.meta.url, { data: { port: port2 }, transferList: [port2] })

/** Waits until the recorder has posted everything resolved so far (a sentinel import comes last). */
async function settled(): Promise<string[]> {
  const sentinel = `data:text/javascript,export default ${Math.random()}`
  await import(sentinel)
  while (!resolved.includes(sentinel)) await new Promise((resolve) => setTimeout(resolve, 5))
  return resolved.splice(0)
}

async function run(env: Record<string, string>): Promise<string[]> {
  await settled()
  const database = await openTestDatabase(t)
  const app = createHandler(testConfig(env), { db: database.db, clock: new FakeClock().read, logger: memoryLogger() })
  app.start()
  for (const path of ['/health', '/decisions', '/nowhere', '/metrics']) await (await app.fetch(new Request(`http://localhost${path}`))).arrayBuffer()
  await app.close()
  return (await settled()).filter((url) => /\/services\/otlp\.ts|prom-client/.test(url))
}

t.test('the default start imports neither the OTLP encoder nor prom-client', async (t) => {
  t.same(await run({}), [])
})

t.test('with tracing and metrics on, they are imported (the recorder works)', async (t) => {
  const receiver = await otlpReceiver(t)
  const loaded = await run({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, METRICS_TOKEN: 'x'.repeat(32) })
  t.ok(loaded.some((url) => url.endsWith('/services/otlp.ts')), 'the OTLP encoder')
  t.ok(loaded.some((url) => url.includes('/prom-client/')), 'prom-client')
})
