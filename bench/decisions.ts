// Group commit of the decision log, measured: the same decisions written one transaction each,
// then through the writer (concurrent callers share a transaction), then POST /decisions against
// POST /demo-request (new email) through the in-process handler. Uses TEST_DATABASE_URL (a fresh
// schema, dropped afterwards) or in-memory PGlite.
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/decisions.ts
// ONLY_HTTP=1 skips the writer comparison; ROUNDS (3) alternating rounds of the handler comparison.
import { BY_OPERATOR } from '../storage/audit.ts'
import type { Test } from 'tap'
import { createHandler } from '../server.ts'
import { createDecisionWriter } from '../services/decision-writer.ts'
import { writeDecisions, type PendingDecision } from '../storage/decisions.ts'
import { createApiKey } from '../storage/keys.ts'
import { createOrganization } from '../storage/organizations.ts'
import { DATABASE_KIND, openTestDatabase, testConfig } from '../tests/support/helpers.ts'
import { silentLogger } from '../log.ts'

const CONCURRENCY = Number(process.env.CONCURRENCY ?? 64)
const SECONDS = Number(process.env.SECONDS ?? 3)
const ONLY_HTTP = process.env.ONLY_HTTP === '1'
const cleanups: (() => unknown)[] = []
const database = await openTestDatabase({ teardown: (fn: () => unknown) => cleanups.push(fn) } as unknown as Test)
const db = database.db
const org = await createOrganization(db, 'Bench', new Date())

function pending(): PendingDecision {
  const now = new Date()
  return {
    record: {
      decision_id: crypto.randomUUID(), organization_id: org.id, agent_id: crypto.randomUUID(), agent_handle: 'bench', action: 'x', resource: '',
      args: { n: 1 }, context: {}, args_sha256: '0'.repeat(64), decision: 'allow', policy_decision: 'allow', reasons: [], monitor: {}, errors: [],
      approval_id: null, ruleset_revision: 0, requested_by: 'key:bench', evaluated_at: now,
    },
    idempotency: null,
  }
}

async function load(work: () => unknown): Promise<number> {
  let done = 0
  const until = Date.now() + SECONDS * 1000
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (Date.now() < until) {
      await work()
      done++
    }
  }))
  return done / SECONDS
}

console.log(`${DATABASE_KIND}, ${CONCURRENCY} concurrent writers, ${SECONDS} s each`)
if (!ONLY_HTTP) {
  const single = await load(() => writeDecisions(db, [pending()], new Date()))
  const writer = createDecisionWriter(db, Date.now)
  const grouped = await load(() => writer.write(pending()))
  console.log(`one transaction per decision: ${single.toFixed(0)} decisions/s`)
  console.log(`group commit:                 ${grouped.toFixed(0)} decisions/s (${writer.stats.rows} rows in ${writer.stats.batches} transactions, ${(writer.stats.rows / writer.stats.batches).toFixed(1)} per transaction)`)
}

const app = createHandler(testConfig({ LEAD_RATE_LIMIT: '100000000/60', API_RATE_LIMIT: '100000000/60', API_ORG_RATE_LIMIT: '100000000/60', LOG_LEVEL: 'silent' }), { db, clock: Date.now, logger: silentLogger, listenUrl: null })
const { secret } = await createApiKey(db, { organizationId: org.id, name: 'bench', role: 'member', createdByUserId: null, createdByKeyId: null, expiresAt: null }, new Date(), BY_OPERATOR)
await db.updateTable('organizations').set({ default_decision: 'allow' }).where('id', '=', org.id).execute()
const conn = { remoteAddress: '127.0.0.1' }
const ask = () => app.fetch(new Request('http://localhost/decisions', { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: '{"agent":"bench","action":"payments.refund","args":{"amount":1}}' }), conn)
await ask()
let n = 0
const lead = () => app.fetch(new Request('http://localhost/demo-request', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ first_name: 'A', last_name: 'B', email: `b${n++}-${Math.random()}@example.com`, company: 'C', linkedin: 'https://www.linkedin.com/in/x' }) }), conn)
// Alternating rounds (decisions, leads, leads, decisions, …): the machine is shared, so only
// figures measured side by side compare; the ratio is the median of the per-pair ratios.
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const ratios: number[] = []
const seen: string[] = []
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [ask, lead] : [lead, ask]
  const [first, second] = [await load(order[0]!), await load(order[1]!)]
  const [decisions, leads] = round % 2 === 0 ? [first, second] : [second, first]
  ratios.push(decisions / leads)
  seen.push(`${decisions.toFixed(0)}/${leads.toFixed(0)}`)
}
ratios.sort((a, b) => a - b)
console.log(`in-process handler: POST /decisions / POST /demo-request (new), req/s per round ${seen.join(', ')}; median ratio ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)}`)
await app.close()
for (const fn of cleanups.reverse()) await fn()
