// GET /metrics: absent without METRICS_TOKEN, refused without the token (401) or over plain HTTP
// from afar (403); after known traffic a scrape, parsed by a strict text-format parser
// (tests/support/prom-text.ts), shows exactly the expected increments: requests by route template
// and status, decisions by outcome and rule, an approval's time to its cancellation, rate-limit
// refusals, pending approvals, the pool's gauges on PostgreSQL; and no label holds an id or secret.
import t, { type Test } from 'tap'
import { createHandler } from '../../server.ts'
import { seedWorld } from '../../fixtures/seed.ts'
import { FakeClock, memoryLogger, openTestDatabase, testConfig, TEST_DATABASE_URL } from '../support/helpers.ts'
import { parsePrometheusText, valueOf, type Family } from '../support/prom-text.ts'

const TOKEN = 'metrics-token-0123456789abcdef0123456789'

async function world(t: Test, env: Record<string, string>) {
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  const config = testConfig(env)
  const app = createHandler(config, { db: database.db, clock: clock.read, logger: memoryLogger(), listenUrl: database.kind === 'postgres' ? TEST_DATABASE_URL : null, pool: database.pool })
  app.start()
  t.teardown(() => app.close())
  const vars = await seedWorld(database.db, clock.now)
  const call = async (method: string, path: string, options: { token?: string; json?: unknown; remote?: string } = {}) => {
    const headers = new Headers()
    if (options.token) headers.set('authorization', `Bearer ${options.token}`)
    if (options.json !== undefined) headers.set('content-type', 'application/json')
    return app.fetch(new Request(`http://localhost${path}`, { method, headers, body: options.json === undefined ? null : JSON.stringify(options.json) }), { remoteAddress: options.remote ?? '127.0.0.1' })
  }
  const scrape = async (): Promise<{ text: string; families: Map<string, Family> }> => {
    const res = await call('GET', '/metrics', { token: TOKEN })
    t.equal(res.status, 200, 'the scrape answers 200')
    t.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
    const text = await res.text()
    return { text, families: parsePrometheusText(text) }
  }
  return { app, db: database.db, kind: database.kind, clock, vars, call, scrape }
}

t.test('without METRICS_TOKEN there is no /metrics', async (t) => {
  const { call } = await world(t, {})
  const res = await call('GET', '/metrics', { token: TOKEN })
  t.equal(res.status, 404)
})

t.test('the token is required, compared whole, and plain HTTP from afar is refused', async (t) => {
  const { call } = await world(t, { METRICS_TOKEN: TOKEN })
  for (const [token, label] of [[undefined, 'no token'], [TOKEN.slice(0, -1), 'a prefix'], [`${TOKEN}x`, 'longer'], ['stw_x', 'an API key shape']] as const) {
    const res = await call('GET', '/metrics', token ? { token } : {})
    t.equal(res.status, 401, label)
    t.equal(res.headers.get('www-authenticate'), 'Bearer realm="metrics"', label)
    t.same(await res.json(), { status: 'Unauthorized', error: 'GET /metrics needs the METRICS_TOKEN as a bearer token (Authorization: Bearer …)' }, label)
  }
  const remote = await call('GET', '/metrics', { token: TOKEN, remote: '203.0.113.9' })
  t.equal(remote.status, 403, 'plain HTTP from a non-loopback peer')
  const post = await call('POST', '/metrics', { token: TOKEN })
  t.equal(post.status, 405)
})

t.test('a scrape after known traffic shows exactly its increments', async (t) => {
  const { call, scrape, vars, clock, kind } = await world(t, { METRICS_TOKEN: TOKEN, API_RATE_LIMIT: '6/60' })
  const before = await scrape()
  const count = (families: Map<string, Family>, labels: Record<string, string>) => valueOf(families, 'http_server_request_duration_seconds', 'http_server_request_duration_seconds_count', labels) ?? 0

  for (const token of [vars.MANAGER_KEY_A!, vars.OWNER_KEY_B!]) t.equal((await call('POST', '/agents', { token, json: { handle: 'metrics-bot' } })).status, 201, 'the agent exists')
  // Three decisions the seeded policy sends to approval, two that no policy matches.
  const answers: { decision: string; rule: string }[] = []
  const approvals: string[] = []
  for (const [token, action] of [
    [vars.ADMIN_KEY_A!, 'payments.send'],
    [vars.ADMIN_KEY_A!, 'payments.refund'],
    [vars.OWNER_KEY_A!, 'payments.send'],
    [vars.OWNER_KEY_A!, 'files.read'],
    [vars.OWNER_KEY_B!, 'files.read'],
  ] as const) {
    const res = await call('POST', '/decisions', { token, json: { agent: 'metrics-bot', action, resource: 'r-1' } })
    t.equal(res.status, 200)
    const body = await res.json()
    const reason = body.reasons[0]
    answers.push({ decision: body.decision, rule: typeof reason?.rule === 'string' ? reason.rule : 'policy' })
    if (body.approval) approvals.push(body.approval.approval_id)
  }
  t.same(answers.map((a) => `${a.decision}/${a.rule}`).sort(), ['deny/default_decision', 'deny/default_decision', 'require_approval/policy', 'require_approval/policy', 'require_approval/policy'], 'the traffic is what the test says')
  // Neither a replayed answer (the same idempotency_key again) nor a simulation is a decision made.
  const keyed = { agent: 'metrics-bot', action: 'files.read', resource: 'r-1', idempotency_key: 'metrics-once' }
  const [first, again] = [await call('POST', '/decisions', { token: vars.OWNER_KEY_B!, json: keyed }), await call('POST', '/decisions', { token: vars.OWNER_KEY_B!, json: keyed })]
  t.same([first.status, first.headers.get('idempotent-replayed'), again.status, again.headers.get('idempotent-replayed')], [200, null, 200, 'true'])
  t.equal((await call('POST', '/decisions/simulate', { token: vars.ADMIN_KEY_A!, json: { agent: 'metrics-bot', action: 'files.read' } })).status, 200)
  // One approval cancelled 90 s after it was requested.
  clock.advance(90_000)
  const cancelled = await call('POST', `/approvals/${approvals[0]}/cancel`, { token: vars.ADMIN_KEY_A!, json: {} })
  t.equal(cancelled.status, 200)
  // An unknown path, and a 405 on a known one.
  t.equal((await call('GET', '/no-such-thing/123')).status, 404)
  t.equal((await call('DELETE', '/decisions', { token: vars.ADMIN_KEY_A! })).status, 405)
  // Eight reads with a limit of six per key: two refused.
  const statuses: number[] = []
  for (let i = 0; i < 8; i++) statuses.push((await call('GET', `/approvals/${approvals[1]}`, { token: vars.VIEWER_KEY_A! })).status)
  t.same(statuses, [200, 200, 200, 200, 200, 200, 429, 429])

  const after = await scrape()
  const f = after.families
  const delta = (labels: Record<string, string>) => count(f, labels) - count(before.families, labels)
  t.equal(delta({ http_request_method: 'POST', http_route: '/decisions', http_response_status_code: '200' }), 7, 'seven POST /decisions 200')
  t.equal(delta({ http_request_method: 'POST', http_route: '/approvals/:approval_id/cancel', http_response_status_code: '200' }), 1, 'the cancel, by its route template')
  t.equal(delta({ http_request_method: 'GET', http_route: '/approvals/:approval_id', http_response_status_code: '200' }), 6)
  t.equal(delta({ http_request_method: 'GET', http_route: '/approvals/:approval_id', http_response_status_code: '429' }), 2)
  t.equal(delta({ http_request_method: 'GET', http_route: 'unmatched', http_response_status_code: '404' }), 1, 'an unknown path is "unmatched", never its raw path')
  t.equal(delta({ http_request_method: 'DELETE', http_route: '/decisions', http_response_status_code: '405' }), 1)
  t.equal(delta({ http_request_method: 'GET', http_route: '/metrics', http_response_status_code: '200' }), 1, 'the first scrape, counted')

  t.equal(valueOf(f, 'steward_decisions_total', 'steward_decisions_total', { outcome: 'require_approval', rule: 'policy' }), 3)
  t.equal(valueOf(f, 'steward_decisions_total', 'steward_decisions_total', { outcome: 'deny', rule: 'default_decision' }), 3, 'the keyed decision once')
  t.equal(f.get('steward_decisions_total')!.samples.length, 2, 'no other decision series')
  t.equal(valueOf(f, 'steward_decision_duration_seconds', 'steward_decision_duration_seconds_count', { outcome: 'require_approval' }), 3)
  t.equal(valueOf(f, 'steward_decision_duration_seconds', 'steward_decision_duration_seconds_count', { outcome: 'deny' }), 3)
  t.equal(f.get('steward_decisions_total')!.type, 'counter')
  t.equal(f.get('steward_decision_duration_seconds')!.type, 'histogram')

  t.equal(valueOf(f, 'steward_approval_time_to_decision_seconds', 'steward_approval_time_to_decision_seconds_count', { result: 'cancelled' }), 1)
  t.equal(valueOf(f, 'steward_approval_time_to_decision_seconds', 'steward_approval_time_to_decision_seconds_sum', { result: 'cancelled' }), 90, 'waited 90 s')
  t.equal(valueOf(f, 'steward_approval_time_to_decision_seconds', 'steward_approval_time_to_decision_seconds_bucket', { result: 'cancelled', le: '60' }), 0)
  t.equal(valueOf(f, 'steward_approval_time_to_decision_seconds', 'steward_approval_time_to_decision_seconds_bucket', { result: 'cancelled', le: '300' }), 1)
  t.equal(valueOf(f, 'steward_approvals_pending', 'steward_approvals_pending'), 2, 'two approvals still pending, read from the database')
  t.equal(valueOf(f, 'steward_rate_limit_refusals_total', 'steward_rate_limit_refusals_total', { limiter: 'api' }), 2)
  t.equal(valueOf(f, 'steward_webhook_oldest_undelivered_age_seconds', 'steward_webhook_oldest_undelivered_age_seconds'), 0, 'no webhook waits')
  t.ok((valueOf(f, 'steward_audit_seal_lag_seconds', 'steward_audit_seal_lag_seconds') ?? -1) >= 0, 'the sealer lag is there')
  t.equal(valueOf(f, 'steward_db_client_errors_total', 'steward_db_client_errors_total', { source: 'scrape' }), 0)
  t.ok(f.has('nodejs_eventloop_lag_seconds') && f.has('process_resident_memory_bytes') && f.has('process_start_time_seconds'), 'process metrics')
  const cpu = (name: string) => valueOf(f, name, name) ?? -1
  t.ok(cpu('process_cpu_seconds_total') > 0, 'the CPU spent, counted from the first scrape')
  t.ok(Math.abs(cpu('process_cpu_seconds_total') - cpu('process_cpu_user_seconds_total') - cpu('process_cpu_system_seconds_total')) < 1e-6, 'user + system = total, in the same scrape')
  t.notOk(f.has('nodejs_gc_duration_seconds'), 'no GC histogram: its observer would cost every collection')
  if (kind === 'postgres') {
    t.equal(valueOf(f, 'db_client_connection_max', 'db_client_connection_max'), 10, 'the pool size')
    t.ok(f.has('db_client_connection_count') && f.has('db_client_connection_pending_requests'), 'the pool gauges')
  } else t.notOk(f.has('db_client_connection_count'), 'no pool on PGlite')

  // Nothing a client chose, no id and no secret in any label.
  const secrets = [TOKEN, ...Object.values(vars), ...approvals, 'no-such-thing', 'metrics-bot']
  const labelValues = [...f.values()].flatMap((family) => family.samples.flatMap((sample) => Object.values(sample.labels)))
  t.same(secrets.filter((secret) => labelValues.some((value) => value.includes(secret))), [], 'no id, secret or raw path in a label')
  t.notOk(secrets.some((secret) => after.text.includes(secret)), 'nor anywhere in the text')
})

t.test('two handlers keep their own counts', async (t) => {
  const one = await world(t, { METRICS_TOKEN: TOKEN })
  const two = await world(t, { METRICS_TOKEN: TOKEN })
  await one.call('GET', '/nothing-here')
  const count = (families: Map<string, Family>) => valueOf(families, 'http_server_request_duration_seconds', 'http_server_request_duration_seconds_count', { http_request_method: 'GET', http_route: 'unmatched', http_response_status_code: '404' })
  t.equal(count((await one.scrape()).families), 1)
  t.equal(count((await two.scrape()).families), undefined)
})
