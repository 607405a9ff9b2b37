// Metrics and tracing, measured (docs/observability.md): POST /decisions through an in-process
// handler with METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set (spans exported to a local
// OTLP/HTTP receiver in this process, /metrics scraped once a round), against a handler with
// both off, on the same database, in alternating rounds. Goal: ≥ 0.95 (a cost of at most 5 %).
// DATABASE_URL (memory:// or a scratch PostgreSQL database; run.ts passes it), else TEST_DATABASE_URL, else PGlite.
//   node --import tsx bench/observability.ts [--seconds 3] [--rounds 3]
import { createServer } from 'node:http'
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

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '3' }, rounds: { type: 'string', default: '3' }, concurrency: { type: 'string', default: '32' } } })
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

// The collector: takes each export and counts its bytes, as a local agent would accept them.
let exported = 0
const receiver = createServer((request, response) => {
  request.on('data', (chunk: Buffer) => (exported += chunk.length))
  request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const endpoint = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`

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

async function load(work: () => Promise<void>): Promise<number> {
  let done = 0
  const until = Date.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        await work()
        done++
      }
    }),
  )
  return done / SECONDS
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const ratios: number[] = []
const seen: string[] = []
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [ask(observed), ask(plain)] : [ask(plain), ask(observed)]
  const first = await load(order[0]!)
  const second = await load(order[1]!)
  await scrape()
  const [on, off] = round % 2 === 0 ? [first, second] : [second, first]
  ratios.push(on / off)
  seen.push(`${on.toFixed(0)}/${off.toFixed(0)}`)
}
const ratio = median(ratios)
console.log(`${CONCURRENCY} concurrent requests through the in-process handler, ${SECONDS} s windows, ${ROUNDS} alternating rounds; the ratio is the median of the per-round ratios. Every request carries a traceparent; ${(exported / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`)
console.log('| goal | target | reached |\n|---|---|---|')
console.log(`| POST /decisions with metrics and tracing on ÷ both off, ${kind} | ≥ 0.95 | **${ratio.toFixed(2)} ${ratio >= 0.95 ? '✓' : '✗'}** (req/s on/off per round: ${seen.join(', ')}) |`)
await observed.close()
await plain.close()
await new Promise<void>((resolve) => receiver.close(() => resolve()))
receiver.closeAllConnections()
await database.close()
for (const cleanup of cleanups) await cleanup()
