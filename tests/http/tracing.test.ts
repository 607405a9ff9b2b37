// OpenTelemetry traces, against a local OTLP/HTTP receiver (tests/support/otlp-receiver.ts): one
// server span per request with the HTTP attributes and, for a decision, its outcome, agent and
// action; an incoming traceparent continued; webhook deliveries and MCP upstream requests sent
// with a traceparent of their own client span.
import { createServer } from 'node:http'
import t, { type Test } from 'tap'
import { createHandler } from '../../server.ts'
import { seedWorld } from '../../fixtures/seed.ts'
import { createTelemetry, tracedFetch, type Telemetry } from '../../services/telemetry.ts'
import { loadTracing } from '../../services/tracing.ts'
import { createWebhookWorker } from '../../jobs/webhook-delivery.ts'
import { FakeClock, memoryLogger, openTestDatabase, testConfig, TEST_DATABASE_URL } from '../support/helpers.ts'
import { decodeRequest, otlpReceiver } from '../support/otlp-receiver.ts'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT_ID = '00f067aa0ba902b7'

async function world(t: Test, env: Record<string, string>) {
  const database = await openTestDatabase(t)
  const clock = new FakeClock(Date.now())
  const config = testConfig(env)
  const logger = memoryLogger()
  const telemetry = createTelemetry(config, { db: database.db, clock: clock.read, logger }) as Telemetry
  const app = createHandler(config, { db: database.db, clock: clock.read, logger, listenUrl: database.kind === 'postgres' ? TEST_DATABASE_URL : null, telemetry })
  app.start()
  t.teardown(() => app.close())
  const vars = await seedWorld(database.db, clock.now)
  const call = (method: string, path: string, options: { token?: string; json?: unknown; headers?: Record<string, string> } = {}) => {
    const headers = new Headers(options.headers)
    if (options.token) headers.set('authorization', `Bearer ${options.token}`)
    if (options.json !== undefined) headers.set('content-type', 'application/json')
    return app.fetch(new Request(`http://localhost${path}`, { method, headers, body: options.json === undefined ? null : JSON.stringify(options.json) }), { remoteAddress: '127.0.0.1' })
  }
  return { db: database.db, clock, config, telemetry, vars, call, logger }
}

t.test('one server span per request, with its attributes and the incoming trace', async (t) => {
  const receiver = await otlpReceiver(t)
  const before = BigInt(Date.now()) * 1_000_000n
  const { call, vars, telemetry } = await world(t, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'steward-test' })
  t.equal((await call('POST', '/agents', { token: vars.MANAGER_KEY_A!, json: { handle: 'trace-bot' } })).status, 201)
  const decided = await call('POST', '/decisions', {
    token: vars.ADMIN_KEY_A!,
    json: { agent: 'trace-bot', action: 'payments.send', resource: 'invoice-7' },
    headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
  })
  t.equal(decided.status, 200)
  t.equal((await call('GET', '/nowhere')).status, 404)
  t.equal((await call('GET', '/decisions', { token: vars.ADMIN_KEY_A!, headers: { traceparent: 'garbage' } })).status, 200)
  await telemetry.flush()
  const after = BigInt(Date.now()) * 1_000_000n

  t.same(receiver.contentTypes, ['application/x-protobuf'], 'one batch, in the protobuf encoding (the OTLP default)')
  // The monotonic clock the spans read is anchored once, so allow it a second of drift from Date.now.
  const second = 1_000_000_000n
  t.ok(
    receiver.spans.every((span) => span.startNanos >= before - second && span.startNanos <= span.endNanos && span.endNanos <= after + second),
    'each span starts and ends, in Unix epoch nanoseconds, while the test ran',
  )
  t.equal(receiver.spans.length, 4, 'one span per request, nothing else')
  t.ok(receiver.spans.every((span) => span.kind === 2 && span.serviceName === 'steward-test'), 'server spans of the configured service')
  const [agent, decision, unknown, list] = receiver.spans
  t.same(agent!.attributes, { 'http.request.method': 'POST', 'http.response.status_code': 201, 'http.route': '/agents' })
  t.equal(decision!.name, 'POST /decisions')
  t.same(decision!.attributes, {
    'http.request.method': 'POST',
    'http.response.status_code': 200,
    'http.route': '/decisions',
    'steward.decision.outcome': 'require_approval',
    'steward.agent': 'trace-bot',
    'steward.action': 'payments.send',
  })
  t.equal(decision!.traceId, TRACE_ID, 'the incoming trace is continued')
  t.equal(decision!.parentSpanId, PARENT_ID, 'as a child of the caller span')
  t.not(agent!.traceId, TRACE_ID, 'a request without traceparent starts its own trace')
  t.equal(unknown!.name, 'GET', 'no route: the method alone names the span')
  t.same(unknown!.attributes, { 'http.request.method': 'GET', 'http.response.status_code': 404 }, 'and no http.route')
  t.equal(list!.parentSpanId, '', 'a malformed traceparent is ignored')
  t.match(list!.traceId, /^[0-9a-f]{32}$/)
})

t.test('OTEL_TRACES_SAMPLER decides which traces are kept', async (t) => {
  const sampled = `00-${TRACE_ID}-${PARENT_ID}-01`
  const OTHER_TRACE = '0af7651916cd43dd8448eb211c80319c'
  const unsampled = `00-${OTHER_TRACE}-${PARENT_ID}-00`
  // An all-zero trace id makes a traceparent invalid: its flags say nothing, a new trace starts.
  const invalid = `00-${'0'.repeat(32)}-${PARENT_ID}-01`
  const cases: [Record<string, string>, string[]][] = [
    // Parent-based: the caller's flag decides; the root sampler decides for a trace starting here.
    [{}, ['none', 'sampled', 'none']],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_always_off' }, ['sampled']],
    // Not parent-based: the caller's flag is ignored.
    [{ OTEL_TRACES_SAMPLER: 'always_on' }, ['none', 'sampled', 'unsampled', 'none']],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }, []],
    [{ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1' }, ['none', 'sampled', 'unsampled', 'none']],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }, ['sampled']],
    [{ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '1' }, ['none', 'sampled', 'none']],
  ]
  for (const [env, kept] of cases) {
    const receiver = await otlpReceiver(t)
    const { call, vars, telemetry } = await world(t, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, ...env })
    for (const [label, traceparent] of [['none', null], ['sampled', sampled], ['unsampled', unsampled], ['invalid', invalid]] as const) {
      const headers: Record<string, string> = { 'x-request-id': label, ...(traceparent ? { traceparent } : {}) }
      t.equal((await call('GET', '/decisions', { token: vars.ADMIN_KEY_A!, headers })).status, 200)
    }
    await telemetry.flush()
    const received = receiver.spans.map((span) => (span.traceId === TRACE_ID ? 'sampled' : span.traceId === OTHER_TRACE ? 'unsampled' : 'none'))
    t.same(received, kept, `${JSON.stringify(env)}: the spans kept`)
    t.same(receiver.spans.filter((span) => span.parentSpanId !== '').map((span) => span.traceId), received.filter((kind) => kind !== 'none').map((kind) => (kind === 'sampled' ? TRACE_ID : OTHER_TRACE)), 'only a valid traceparent gives a parent')
  }
})

t.test('webhook deliveries and MCP upstream requests carry the traceparent of their client span', async (t) => {
  const receiver = await otlpReceiver(t)
  const { call, vars, telemetry, db, clock, config, logger } = await world(t, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, WEBHOOK_ALLOW_PRIVATE: 'true' })
  const got: Record<string, string | undefined>[] = []
  const hook = createServer((request, response) => {
    got.push({ traceparent: request.headers.traceparent as string | undefined, path: request.url })
    request.resume()
    request.on('end', () => response.writeHead(204).end())
  })
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => hook.close(() => resolve())).then(() => hook.closeAllConnections()))
  const port = (hook.address() as { port: number }).port
  const created = await call('POST', '/webhooks', { token: vars.ADMIN_KEY_A!, json: { url: `http://127.0.0.1:${port}/hook`, event_types: ['key.*'] } })
  t.equal(created.status, 201)
  const key = await call('POST', '/keys', { token: vars.ADMIN_KEY_A!, json: { name: 'traced', role: 'viewer' } })
  t.equal(key.status, 201)
  const worker = createWebhookWorker(config, { db, clock: clock.read, logger, telemetry })
  t.teardown(() => worker.close())
  // Until the fan-out's bound passes the key's transaction (another session's open transaction
  // on a shared PostgreSQL holds it back).
  for (let i = 0; i < 100 && got.length === 0; i++) {
    await worker.tick()
    if (got.length === 0) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  // An MCP upstream request goes through the same client-span fetch.
  const upstream = tracedFetch(globalThis.fetch, telemetry, 'mcp.upstream')
  t.equal((await upstream(`http://127.0.0.1:${port}/mcp`, { method: 'POST', body: '{}' })).status, 204)
  await telemetry.flush()

  t.equal(got.length, 2, 'the key.created delivery and the upstream request')
  const clients = receiver.spans.filter((span) => span.kind === 3)
  t.same(clients.map((span) => span.name), ['webhook.delivery', 'mcp.upstream'])
  t.same(
    got.map((request) => request.traceparent),
    clients.map((span) => `00-${span.traceId}-${span.spanId}-01`),
    'each request carries its own client span',
  )
})

t.test('the export: an empty flush sends nothing, a 503 is retried, a 400 drops the batch and says so', async (t) => {
  const answers = [503, 200, 400]
  const seen: { status: number; bytes: number }[] = []
  const collector = createServer((request, response) => {
    let bytes = 0
    request.on('data', (chunk: Buffer) => (bytes += chunk.length))
    request.on('end', () => {
      const status = answers.shift() ?? 500
      seen.push({ status, bytes })
      response.writeHead(status).end()
    })
  })
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => collector.close(() => resolve())).then(() => collector.closeAllConnections()))
  const errors: string[] = []
  const tracing = await loadTracing({ endpoint: `http://127.0.0.1:${(collector.address() as { port: number }).port}/`, serviceName: 's', sampler: 'parentbased_always_on', samplerRatio: 1, onExportError: (error) => errors.push(error.message) })
  const span = () => tracing.served(new Request('http://localhost/x'), performance.now(), performance.now(), '/x', 200, null)
  await tracing.flush()
  t.same(seen, [], 'nothing waited, nothing was sent')
  span()
  await tracing.flush()
  t.same(seen.map((request) => request.status), [503, 200], 'the 503 was retried and the batch delivered')
  t.equal(seen[0]!.bytes, seen[1]!.bytes, 'the same batch both times')
  span()
  await tracing.flush()
  t.same(seen.map((request) => request.status), [503, 200, 400], 'a 400 is not retried')
  t.same(errors, ['the collector answered 400'], 'and the dropped batch is reported')
  await tracing.close()
})

t.test('a full batch (2048 spans) leaves at once; beyond 8192 waiting, spans are dropped and said so', async (t) => {
  const bodies: Buffer[] = []
  const held: (() => void)[] = []
  // Answers nothing until told: the first batch stays in flight and the next ones wait.
  const collector = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      bodies.push(Buffer.concat(chunks))
      held.push(() => response.writeHead(200).end())
    })
  })
  await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => collector.close(() => resolve())).then(() => collector.closeAllConnections()))
  const errors: string[] = []
  const tracing = await loadTracing({ endpoint: `http://127.0.0.1:${(collector.address() as { port: number }).port}`, serviceName: 's', sampler: 'parentbased_always_on', samplerRatio: 1, onExportError: (error) => errors.push(error.message) })
  const spans = (count: number) => {
    for (let i = 0; i < count; i++) tracing.served(new Request('http://localhost/x'), performance.now(), performance.now(), '/x', 200, null)
  }
  spans(2048)
  for (let waited = 0; bodies.length === 0 && waited < 5000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(bodies.length, 1, 'sent without a flush or the timer')
  t.equal(decodeRequest(bodies[0]!).resourceSpans[0]!.scopeSpans[0]!.spans.length, 2048)
  spans(5 * 2048)
  t.same(errors, ['2048 spans dropped: the collector is not keeping up'], 'four batches wait; the fifth is dropped')
  // Answered, the four waiting batches follow one at a time.
  for (let answered = 0; answered < 5; answered++) {
    for (let waited = 0; held.length === 0 && waited < 5000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
    held.shift()?.()
  }
  await tracing.close()
  t.equal(bodies.length, 5)
})

t.test('without OTEL_EXPORTER_OTLP_ENDPOINT nothing traces and nothing is sent', async (t) => {
  const config = testConfig({})
  t.equal(config.otelEndpoint, null)
  t.equal(createTelemetry(config, { db: null as never, clock: Date.now, logger: memoryLogger() }), null, 'no telemetry at all by default')
  const upstream = tracedFetch(globalThis.fetch, undefined, 'mcp.upstream')
  t.equal(upstream, globalThis.fetch, 'the upstream fetch is the plain one')
})
