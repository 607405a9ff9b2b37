// Budgets, measured (docs/budgets.md): POST /decisions through the in-process handler with one
// count and one spend limit applying, against the same decisions under the same policy without
// limits, in many short alternating rounds (the database's own pauses then fall on both sides
// alike). Contended: every decision takes from the same two counters (organization scope);
// spread: each of 200 agents has its own (agent scope). Reported: the ratio of the sums of
// requests served, and of the CPU per request (this process and PostgreSQL's). Goal: ≥ 0.8.
// DATABASE_URL (memory:// or a scratch PostgreSQL database; run.ts passes it), else TEST_DATABASE_URL, else PGlite.
//   node --import tsx bench/budgets.ts [--seconds 0.5] [--rounds 20]
import { parseArgs } from 'node:util'
import type { Test } from 'tap'
import { createHandler } from '../server.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { createApiKey } from '../storage/keys.ts'
import { createOrganization } from '../storage/organizations.ts'
import { createPolicy } from '../storage/policies.ts'
import { roomStats } from '../storage/budget-batch.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { DATABASE_KIND, openTestDatabase, testConfig } from '../tests/support/helpers.ts'
import { silentLogger } from '../log.ts'
import { cpuNow } from './cpu.ts'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '0.5' }, rounds: { type: 'string', default: '20' }, concurrency: { type: 'string', default: '32' } } })
const SECONDS = Number(values.seconds)
const ROUNDS = Number(values.rounds)
const CONCURRENCY = Number(values.concurrency)
const AGENTS = 200

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
const org = await createOrganization(db, 'Budget bench', now)
await db.updateTable('organizations').set({ unknown_agents: 'evaluate' }).where('id', '=', org.id).execute()
const policy = (name: string, action: string, scope: 'agent' | 'organization' | null) =>
  createPolicy(
    db,
    org.id,
    {
      name,
      description: '',
      effect: 'allow',
      agents: ['*'],
      actions: [action],
      resources: ['*'],
      condition: null,
      approval: null,
      mode: 'enforce',
      enabled: true,
      limits:
        scope === null
          ? []
          : [
              { name: 'count', kind: 'count', max: 1_000_000_000, scope, window: { type: 'day', tz: 'Europe/Paris' }, mode: 'enforce' },
              { name: 'spend', kind: 'spend', max: 1_000_000_000_000, amount: 'int(args.amount)', currency: 'EUR', scope, window: { type: 'month' }, mode: 'enforce' },
            ],
    },
    'operator',
    now,
    BY_OPERATOR,
  )
await policy('plain', 'refund.plain', null)
await policy('contended', 'refund.contended', 'organization')
await policy('spread', 'refund.spread', 'agent')

const app = createHandler(testConfig({ LEAD_RATE_LIMIT: '100000000/60', API_RATE_LIMIT: '100000000/60', API_ORG_RATE_LIMIT: '100000000/60', LOG_LEVEL: 'silent' }), { db, clock: Date.now, logger: silentLogger, listenUrl: null })
const { secret } = await createApiKey(db, { organizationId: org.id, name: 'bench', role: 'member', createdByUserId: null, createdByKeyId: null, expiresAt: null }, now, BY_OPERATOR)
const conn = { remoteAddress: '127.0.0.1' }
let n = 0
const ask = (action: string) => async () => {
  const agent = `agent-${n++ % AGENTS}`
  const res = await app.fetch(
    new Request('http://localhost/decisions', { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: JSON.stringify({ agent, action, resource: 'order/1', args: { amount: 1 + (n % 500) } }) }),
    conn,
  )
  const body = (await res.json()) as { decision?: string }
  if (res.status !== 200 || body.decision !== 'allow') throw new Error(`${action}: ${res.status} ${JSON.stringify(body)}`)
}
// Every agent discovered (and each counter created) before measuring.
for (const action of ['refund.plain', 'refund.contended', 'refund.spread']) for (let i = 0; i < AGENTS; i++) await ask(action)()
roomStats.written = 0
roomStats.declined = 0

const cpu = new Map<string, { node: number; postgres: number; n: number }>()
async function load(work: () => Promise<void>, label = ''): Promise<number> {
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
  const c = cpu.get(label) ?? { node: 0, postgres: 0, n: 0 }
  cpu.set(label, { node: c.node + after.node - before.node, postgres: c.postgres + after.postgres - before.postgres, n: c.n + done })
  return done / SECONDS
}

const rows: string[] = []
const notes: string[] = []
const perRequest = (label: string) => {
  const c = cpu.get(label)!
  return { total: (c.node + c.postgres) / c.n, text: `${(c.node / c.n).toFixed(0)} + ${(c.postgres / c.n).toFixed(0)} µs` }
}
for (const [label, action] of [
  ['contended (one count and one spend counter for every decision)', 'refund.contended'],
  ['spread (200 agents, a counter pair each)', 'refund.spread'],
] as const) {
  let [limited, plain] = [0, 0]
  for (let round = 0; round < ROUNDS; round++) {
    if (round % 2 === 0) {
      limited += await load(ask(action), action)
      plain += await load(ask('refund.plain'), `plain, beside ${action}`)
    } else {
      plain += await load(ask('refund.plain'), `plain, beside ${action}`)
      limited += await load(ask(action), action)
    }
  }
  const ratio = limited / plain
  const [on, off] = [perRequest(action), perRequest(`plain, beside ${action}`)]
  const cpuRatio = off.total / on.total
  notes.push(`${label}: ${roomStats.written} batches written in one statement, ${roomStats.declined} through the general path.`)
  roomStats.written = 0
  roomStats.declined = 0
  rows.push(`| POST /decisions with a count and a spend limit ÷ without, ${kind}, ${label}: requests served | ≥ 0.8 | **${ratio.toFixed(2)} ${ratio >= 0.8 ? '✓' : '✗'}** (${(limited / ROUNDS).toFixed(0)} / ${(plain / ROUNDS).toFixed(0)} req/s on average) |`)
  rows.push(`| the same: CPU per request, without ÷ with (node + PostgreSQL) | ≥ 0.8 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.8 ? '✓' : '✗'}** (with ${on.text}, without ${off.text}) |`)
}
console.log(`${CONCURRENCY} concurrent requests through the in-process handler, ${SECONDS} s windows, ${ROUNDS} alternating rounds per case.\n`)
console.log('| goal | target | reached |\n|---|---|---|')
for (const row of rows) console.log(row)
console.log('')
for (const note of notes) console.log(`- ${note}`)
await app.close()
await database.close()
for (const cleanup of cleanups) await cleanup()
