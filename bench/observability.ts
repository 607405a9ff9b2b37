// Metrics and tracing, measured (docs/observability.md): POST /decisions through an in-process
// handler with METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set (spans exported to a local
// OTLP/HTTP receiver in a process of its own, as a collector is; /metrics scraped once a round),
// against a handler with both off, on the same database, in many short alternating rounds: the
// database's own pauses (checkpoints, the log's growth) then fall on both sides alike. Reported:
// the ratio of the sums of requests, and the CPU per request of each side (this process and the
// PostgreSQL processes). Goal: ≥ 0.95 (a cost of at most 5 %).
// DATABASE_URL (memory:// or a scratch PostgreSQL database; run.ts passes it), else TEST_DATABASE_URL, else PGlite.
//   node --import tsx bench/observability.ts [--seconds 0.5] [--rounds 30]
import { spawn } from 'node:child_process'
import { parseArgs } from 'node:util'
import type { Test } from 'tap'
import { createHandler } from '../server.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { createApiKey } from '../storage/keys.ts'
import { createOrganization } from '../storage/organizations.ts'
import { createPolicy } from '../storage/policies.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { DATABASE_KIND, openTestDatabase, testConfig } from '../tests/support/helpers.ts'
import { silentLogger } from '../log.ts'
import { cpuNow } from './cpu.ts'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '0.5' }, rounds: { type: 'string', default: '30' }, concurrency: { type: 'string', default: '32' } } })
const SECONDS = Number(values.seconds)
const ROUNDS = Number(values.rounds)
const CONCURRENCY = Number(values.concurrency)
const AGENTS = 200
const TOKEN = 'bench-metrics-token-0123456789abcdef'

const url = process.env.DATABASE_URL
const cleanups: (() => unknown)[] = []
const database =
  url && url !== 'memory://'
    ? await openDatabase({ databaseUrl: url, dataDir: '', logger: silentLogger })
    : await openTestDatabase({ teardown: (fn: () => unknown) => cleanups.push(fn) } as unknown as Test)
if (url && url !== 'memory://') await migrateToLatest(database.db)
const kind = url && url !== 'memory://' ? 'PostgreSQL' : url === 'memory://' ? 'PGlite (in memory)' : DATABASE_KIND
const db = database.db
const now = new Date()
const org = await createOrganization(db, 'Observability bench', now)
await db.updateTable('organizations').set({ unknown_agents: 'evaluate' }).where('id', '=', org.id).execute()
await createPolicy(
  db,
  org.id,
  { name: 'refunds', description: '', effect: 'allow', agents: ['*'], actions: ['refund.*'], resources: ['*'], condition: null, approval: null, mode: 'enforce', enabled: true },
  'operator',
  now,
  BY_OPERATOR,
)

// The collector: a process that takes each export and counts its bytes, as a local agent would.
const RECEIVER = `let n = 0
const server = require('node:http').createServer((request, response) => {
  request.on('data', (chunk) => (n += chunk.length))
  request.on('end', () => { process.stdout.write(n + '\\n'); response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end() })
})
server.listen(0, '127.0.0.1', () => console.log(server.address().port))`
const receiver = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] })
let exported = 0
const port = await new Promise<string>((resolve) => receiver.stdout!.once('data', (data: Buffer) => resolve(data.toString().trim())))
receiver.stdout!.on('data', (data: Buffer) => (exported = Number(data.toString().trim().split('\n').pop())))
const endpoint = `http://127.0.0.1:${port}`

const limits = { LEAD_RATE_LIMIT: '100000000/60', API_RATE_LIMIT: '100000000/60', API_ORG_RATE_LIMIT: '100000000/60', LOG_LEVEL: 'silent' }
const deps = { db, clock: Date.now, logger: silentLogger, listenUrl: null, ...(database.pool ? { pool: database.pool } : {}) }
const plain = createHandler(testConfig(limits), deps)
const observed = createHandler(testConfig({ ...limits, METRICS_TOKEN: TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint }), deps)
const { secret } = await createApiKey(db, { organizationId: org.id, name: 'bench', role: 'member', createdByUserId: null, createdByKeyId: null, expiresAt: null }, now, BY_OPERATOR)
const conn = { remoteAddress: '127.0.0.1' }
let n = 0
const ask = (app: typeof plain) => async () => {
  const agent = `agent-${n++ % AGENTS}`
  const res = await app.fetch(
    new Request('http://localhost/decisions', {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', traceparent: `00-${crypto.randomUUID().replaceAll('-', '')}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ agent, action: 'refund.order', resource: 'order/1', args: { amount: 1 + (n % 500) } }),
    }),
    conn,
  )
  const body = (await res.json()) as { decision?: string }
  if (res.status !== 200 || body.decision !== 'allow') throw new Error(`${res.status} ${JSON.stringify(body)}`)
}
const scrape = async () => {
  const res = await observed.fetch(new Request('http://localhost/metrics', { headers: { authorization: `Bearer ${TOKEN}` } }), conn)
  const text = await res.text()
  if (res.status !== 200 || !text.includes('steward_decisions_total')) throw new Error(`/metrics: ${res.status}`)
}
// Every agent discovered, and both handlers warm (the optional packages loaded), before measuring.
for (const app of [plain, observed]) for (let i = 0; i < AGENTS; i++) await ask(app)()
await scrape()

const cpu = { on: { node: 0, postgres: 0, n: 0 }, off: { node: 0, postgres: 0, n: 0 } }
async function load(work: () => Promise<void>, side: 'on' | 'off'): Promise<number> {
  let done = 0
  const before = cpuNow()
  const until = Date.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        await work()
        done++
      }
    }),
  )
  const after = cpuNow()
  cpu[side].node += after.node - before.node
  cpu[side].postgres += after.postgres - before.postgres
  cpu[side].n += done
  return done / SECONDS
}

let [onSum, offSum] = [0, 0]
for (let round = 0; round < ROUNDS; round++) {
  if (round % 2 === 0) {
    onSum += await load(ask(observed), 'on')
    offSum += await load(ask(plain), 'off')
  } else {
    offSum += await load(ask(plain), 'off')
    onSum += await load(ask(observed), 'on')
  }
  await scrape()
}
const ratio = onSum / offSum
const perRequest = (side: 'on' | 'off') => (cpu[side].node + cpu[side].postgres) / cpu[side].n
const cpuRatio = perRequest('off') / perRequest('on')
const µs = (side: 'on' | 'off') => `${(cpu[side].node / cpu[side].n).toFixed(0)} + ${(cpu[side].postgres / cpu[side].n).toFixed(0)} µs`
console.log(`${CONCURRENCY} concurrent requests through the in-process handler, ${SECONDS} s windows, ${ROUNDS} alternating rounds. Every request carries a sampled traceparent; ${(exported / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`)
console.log('| goal | target | reached |\n|---|---|---|')
console.log(`| POST /decisions with metrics and tracing on ÷ both off, ${kind}: requests served, on ÷ off | ≥ 0.95 | **${ratio.toFixed(2)} ${ratio >= 0.95 ? '✓' : '✗'}** (${(onSum / ROUNDS).toFixed(0)} / ${(offSum / ROUNDS).toFixed(0)} req/s on average) |`)
console.log(`| the same: CPU per request, off ÷ on (node + PostgreSQL) | ≥ 0.95 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.95 ? '✓' : '✗'}** (on ${µs('on')}, off ${µs('off')}) |`)
await observed.close()
await plain.close()
receiver.kill()
await database.close()
for (const cleanup of cleanups) await cleanup()
