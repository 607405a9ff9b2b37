// What preparing every query costs or saves on embedded PGlite (database/pglite-statements.ts):
// the storage functions the routes call, on two in-memory PGlite databases opened alike, one
// through the dialect as it runs (prepared statements) and one with `prepare: false` (each query
// through PGlite's own `query`, as before). Operations interleaved one at a time (A B, then B A),
// medians per round, ratio = median over rounds of (query ÷ prepared).
//
//   node --import tsx bench/pglite-statements.ts [--ops 400] [--rounds 4]
import { Kysely, sql } from 'kysely'
import { parseScriptArgs } from '../cli/command.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { openEmbeddedPglite } from '../database/connect.ts'
import { databaseAnswers } from '../storage/health.ts'
import { createApiKey, findActiveKeyByHash } from '../storage/keys.ts'
import { insertDemoRequestUnlessRegistered } from '../storage/leads.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { createOrganization } from '../storage/organizations.ts'
import { PgliteDialect } from '../database/pglite-dialect.ts'
import { createPolicy } from '../storage/policies.ts'
import type { Database } from '../database/schema.ts'
import { hashSecret } from '../auth/secrets.ts'
import { median } from './lib.ts'

const args = parseScriptArgs({ ops: { type: 'string' }, rounds: { type: 'string' } })
const OPS = Number(args.ops ?? 400)
const ROUNDS = Math.max(2, Number(args.rounds ?? 4))

type Variant = 'query' | 'prepared'
const VARIANTS: Variant[] = ['query', 'prepared']
const pglites = { query: await openEmbeddedPglite(), prepared: await openEmbeddedPglite() }
const dbs: Record<Variant, Kysely<Database>> = {
  query: new Kysely<Database>({ dialect: new PgliteDialect(pglites.query, { prepare: false }) }),
  prepared: new Kysely<Database>({ dialect: new PgliteDialect(pglites.prepared) }),
}
const CAP = { limit: 1_000_000, what: 'bench', setting: 'BENCH' }
const keyInput = (org: string, i: number) => ({ organizationId: org, name: `key ${i}`, role: 'member' as const, createdByUserId: null, createdByKeyId: null, expiresAt: null })

interface World {
  readonly org: string
  readonly secretHash: string
}
const OPERATIONS: Record<string, (db: Kysely<Database>, world: World, i: number) => Promise<unknown>> = {
  'health check (select 1)': (db) => databaseAnswers(db, 1000),
  'key lookup by hash': (db, world) => findActiveKeyByHash(db, world.secretHash, new Date()),
  'lead insert (demo request)': (db, _world, i) =>
    insertDemoRequestUnlessRegistered(db, { email: `lead${i}-${crypto.randomUUID().slice(0, 8)}@example.com`, first_name: 'A', last_name: 'B', company: 'C', linkedin: 'https://www.linkedin.com/in/bench', phone: null, source: 'bench', analytics_distinct_id: null }, new Date()),
  'key create (with its event)': (db, world, i) => createApiKey(db, keyInput(world.org, i), new Date(), BY_OPERATOR, CAP),
  'policy create (with its event)': (db, world, i) =>
    createPolicy(db, world.org, { name: `policy ${i}`, description: '', effect: 'deny', agents: ['*'], actions: [`svc${i + 100}.*`], resources: ['*'], condition: null, approval: null, mode: 'enforce', enabled: true }, 'operator', new Date(), BY_OPERATOR, CAP),
}

async function freshWorld(db: Kysely<Database>): Promise<World> {
  const org = (await createOrganization(db, `bench ${crypto.randomUUID().slice(0, 8)}`, new Date())).id
  const { secret } = await createApiKey(db, { ...keyInput(org, -1), role: 'admin' }, new Date(), BY_OPERATOR, CAP)
  return { org, secretHash: hashSecret(secret) }
}

try {
  for (const db of Object.values(dbs)) await migrateToLatest(db)
  const lines = [
    `Two in-memory PGlite databases opened alike; "query" runs each statement through PGlite's own \`query\` (as before), "prepared" through the dialect's prepared statements. ${OPS} operations of each variant per round, interleaved one at a time, each round on a fresh organization; ${ROUNDS} rounds; per round the median time of one operation; ratio = median over rounds of (query ÷ prepared).`,
    '',
    '| operation | query (median µs) | prepared (median µs) | query ÷ prepared |',
    '|---|---:|---:|---:|',
  ]
  for (const [name, operation] of Object.entries(OPERATIONS)) {
    const medians: Record<Variant, number[]> = { query: [], prepared: [] }
    const ratios: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const worlds = { query: await freshWorld(dbs.query), prepared: await freshWorld(dbs.prepared) }
      const times: Record<Variant, number[]> = { query: [], prepared: [] }
      for (let i = -20; i < OPS; i++) {
        for (const variant of i % 2 ? VARIANTS : [...VARIANTS].reverse()) {
          const started = performance.now()
          await operation(dbs[variant], worlds[variant], i + round * (OPS + 20))
          if (i >= 0) times[variant].push(performance.now() - started) // the first 20: warm-up
        }
      }
      for (const variant of VARIANTS) medians[variant].push(median(times[variant]))
      ratios.push(median(times.query) / median(times.prepared))
    }
    lines.push(`| ${name} | ${(median(medians.query) * 1000).toFixed(0)} | ${(median(medians.prepared) * 1000).toFixed(0)} | ${median(ratios).toFixed(2)} |`)
  }
  // Both databases hold the same rows: the variants did the same work.
  for (const table of ['api_keys', 'policies', 'demo_requests', 'audit_events'] as const) {
    const counts = await Promise.all(VARIANTS.map(async (variant) => (await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)}`.execute(dbs[variant])).rows[0]!.n))
    if (counts[0] !== counts[1]) throw new Error(`${table}: ${counts[0]} rows through query, ${counts[1]} prepared`)
  }
  console.log(lines.join('\n'))
} finally {
  for (const db of Object.values(dbs)) await db.destroy()
}
