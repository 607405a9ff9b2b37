// One side of bench/observability.ts: an in-process handler, with metrics and tracing on or both
// off (SIDE=on|off; PARTS=metrics or tracing: that part alone, none: off, for an A/A run), on a
// database of its own (DATABASE_URL: memory:// or a scratch PostgreSQL database), serving
// POST /decisions from 32 concurrent callers when told to. It runs bundled, as the server runs,
// and answers on stdout: `ready <backend pids>`, then one JSON line per round.
// Protocol on stdin: `round <seconds>`, `quit`.
import { createInterface } from 'node:readline'
import { sql } from 'kysely'
import { createHandler } from '../server.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { createApiKey } from '../storage/keys.ts'
import { createOrganization } from '../storage/organizations.ts'
import { createPolicy } from '../storage/policies.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { loadConfig } from '../config.ts'
import { silentLogger } from '../log.ts'
import { pidsCpu } from './cpu.ts'

const CONCURRENCY = 32
const AGENTS = 200
const SCRAPE_EVERY_S = 15
const on = process.env.SIDE === 'on' && process.env.PARTS !== 'none'
const token = process.env.METRICS_TOKEN_FOR_BENCH ?? ''

const database = await openDatabase({ databaseUrl: process.env.DATABASE_URL ?? 'memory://', dataDir: '', logger: silentLogger })
await migrateToLatest(database.db)
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
const config = loadConfig({
  DATABASE_URL: process.env.DATABASE_URL ?? 'memory://',
  LOG_LEVEL: 'silent',
  LEAD_RATE_LIMIT: '100000000/60',
  API_RATE_LIMIT: '100000000/60',
  API_ORG_RATE_LIMIT: '100000000/60',
  ...(on && process.env.PARTS !== 'tracing' ? { METRICS_TOKEN: token } : {}),
  ...(on && process.env.PARTS !== 'metrics' ? { OTEL_EXPORTER_OTLP_ENDPOINT: process.env.COLLECTOR! } : {}),
})
const app = createHandler(config, { db, clock: Date.now, logger: silentLogger, listenUrl: null, ...(database.pool ? { pool: database.pool } : {}) })
const { secret } = await createApiKey(db, { organizationId: org.id, name: 'bench', role: 'member', createdByUserId: null, createdByKeyId: null, expiresAt: null }, now, BY_OPERATOR)
const conn = { remoteAddress: '127.0.0.1' }

let n = 0
async function ask(): Promise<void> {
  const agent = `agent-${n++ % AGENTS}`
  const res = await app.fetch(
    new Request('http://localhost/decisions', {
      method: 'POST',
      // Every request continues a caller's sampled trace, so every request exports a span.
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', traceparent: `00-${crypto.randomUUID().replaceAll('-', '')}-00f067aa0ba902b7-01` },
      body: JSON.stringify({ agent, action: 'refund.order', resource: 'order/1', args: { amount: 1 + (n % 500) } }),
    }),
    conn,
  )
  const body = (await res.json()) as { decision?: string }
  if (res.status !== 200 || body.decision !== 'allow') throw new Error(`${res.status} ${JSON.stringify(body)}`)
}
async function scrape(): Promise<void> {
  if (!on || process.env.PARTS === 'tracing') return
  const res = await app.fetch(new Request('http://localhost/metrics', { headers: { authorization: `Bearer ${token}` } }), conn)
  if (res.status !== 200 || !(await res.text()).includes('steward_decisions_total')) throw new Error(`/metrics answered ${res.status}`)
}

/** PostgreSQL's processes serving this side (its own database), to pin and to count their CPU. */
async function backends(): Promise<number[]> {
  if (database.kind !== 'postgres') return []
  const { rows } = await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`.execute(db)
  return rows.map((row) => row.pid)
}
// Every agent discovered, the pool's connections opened and the code warm before any round.
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  for (let i = 0; i < (AGENTS * 2) / CONCURRENCY; i++) await ask()
}))
await scrape()
let pids = await backends()
let sinceScrape = 0
process.stdout.write(`ready ${pids.join(',')}\n`)

for await (const line of createInterface({ input: process.stdin })) {
  const [command, argument] = line.split(' ')
  if (command !== 'round') break
  const until = Date.now() + Number(argument) * 1000
  let done = 0
  const [cpu, pg] = [process.cpuUsage(), pidsCpu(pids)]
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < until) {
        await ask()
        done++
      }
    }),
  )
  // Scraped as Prometheus would, every 15 s of load, and counted with the requests.
  sinceScrape += Number(argument)
  if (sinceScrape >= SCRAPE_EVERY_S) {
    sinceScrape = 0
    await scrape()
  }
  const own = process.cpuUsage(cpu)
  const postgres = pidsCpu(pids) - pg
  pids = await backends()
  process.stdout.write(`${JSON.stringify({ done, node: own.user + own.system, postgres, pids })}\n`)
}
await app.close()
await database.close()
process.exit(0)
