// The governance migration on a database that already holds policies with the free-form
// `conditions` object of the first release: no such policy may let agents do more afterwards.
// An allow policy with conditions gets the condition `false` (it allows nothing until someone
// writes a real condition); deny and require_approval ones apply without a condition (they
// restrict more, never less). Runs on PGlite and, with TEST_DATABASE_URL, on PostgreSQL.
import { type Kysely, sql } from 'kysely'
import t from 'tap'
import { compilePolicySet, decide } from '../../engine/index.ts'
import { findPolicy, findPolicyVersion } from '../../storage/policies.ts'
import type { Database } from '../../database/schema.ts'
import { emptyDatabase } from '../support/helpers.ts'

const BEFORE = '2026-11-23T01-invitations-caps'
const GOVERNANCE = '2026-11-23T02-governance'

const ORG = crypto.randomUUID()
const AT = new Date('2026-11-20T00:00:00Z')
const ids = new Map<string, string>()
const after = new Map<string, NonNullable<Awaited<ReturnType<typeof findPolicy>>>>()
let db: Kysely<any>
let typed: Kysely<Database>

interface Legacy {
  name: string
  effect: 'allow' | 'deny' | 'require_approval'
  conditions: unknown
  version?: number
}

const legacy: Legacy[] = [
  { name: 'allow with conditions', effect: 'allow', conditions: { amount: { lt: 100 } }, version: 3 },
  { name: 'allow without conditions', effect: 'allow', conditions: null },
  { name: 'allow with an empty object', effect: 'allow', conditions: {} },
  { name: 'deny with conditions', effect: 'deny', conditions: { amount: { gt: 1000 } } },
  { name: 'approval with conditions', effect: 'require_approval', conditions: { external: true } },
]

t.before(async () => {
  const opened = await emptyDatabase(t)
  db = opened.db
  typed = db as unknown as Kysely<Database>
  const upTo = await opened.migrator.migrateTo(BEFORE)
  if (upTo.error) throw upTo.error
  t.same(upTo.results?.map((r) => r.migrationName).at(-1), BEFORE, 'migrated up to the migration before governance')
  await db.insertInto('organizations').values({ id: ORG, name: 'Legacy', created_at: AT }).execute()
  for (const [index, policy] of legacy.entries()) {
    const id = crypto.randomUUID()
    ids.set(policy.name, id)
    await db
      .insertInto('policies')
      .values({
        policy_id: id,
        organization_id: ORG,
        name: policy.name,
        description: '',
        effect: policy.effect,
        agents: JSON.stringify(['*']),
        // Each on an action of its own, so each outcome below is that policy's alone.
        actions: JSON.stringify([`action.${index}`]),
        resources: JSON.stringify(['*']),
        conditions: policy.conditions === null ? null : JSON.stringify(policy.conditions),
        mode: 'enforce',
        enabled: true,
        version: policy.version ?? 1,
        created_at: AT,
        updated_at: AT,
        created_by: 'operator',
      })
      .execute()
  }
  const latest = await opened.migrator.migrateToLatest()
  if (latest.error) throw latest.error
  t.ok(latest.results?.some((r) => r.migrationName === GOVERNANCE && r.status === 'Success'), 'the governance migration ran')
  for (const [name, id] of ids) after.set(name, (await findPolicy(typed, ORG, id))!)
})

t.test('the stored conditions become conditions that never widen', async (t) => {
  t.same(
    [...after.values()].map((p) => [p.name, p.effect, p.condition]),
    [
      ['allow with conditions', 'allow', 'false'],
      ['allow without conditions', 'allow', null],
      // An empty object narrowed nothing: the policy allowed everything it matched, and still does.
      ['allow with an empty object', 'allow', null],
      ['deny with conditions', 'deny', null],
      ['approval with conditions', 'require_approval', null],
    ],
  )
  const { rows } = await sql<{ name: string; legacy_conditions: unknown }>`select name, legacy_conditions from policies order by name`.execute(db)
  t.same(rows.find((r) => r.name === 'allow with conditions')?.legacy_conditions, { amount: { lt: 100 } }, 'the old object is kept for reference')
})

t.test('decided by the engine: the allow with conditions allows nothing; deny and approval apply to every request', async (t) => {
  const set = compilePolicySet(
    [...after.values()].map((p) => ({ ...p, archived: p.archived_at !== null })),
    1,
  )
  const settings = { default_decision: 'deny' as const, unknown_agents: 'deny' as const }
  const ask = (index: number, args: Record<string, unknown>) =>
    decide(set, settings, { agent: { id: 'a', handle: 'bot', labels: {}, status: 'active' }, action: `action.${index}`, args, context: {}, now: AT }).decision
  // Even a request the old object described as allowed (amount 5 < 100) is not allowed.
  t.equal(ask(0, { amount: 5 }), 'deny')
  t.equal(ask(1, {}), 'allow')
  t.equal(ask(2, {}), 'allow')
  // A request the old object did not describe (amount 5, not > 1000) is denied all the same.
  t.equal(ask(3, { amount: 5 }), 'deny')
  t.equal(ask(4, { external: false }), 'require_approval')
})

t.test('each policy has its current version recorded, with the translated condition', async (t) => {
  const id = ids.get('allow with conditions')!
  const version = await findPolicyVersion(typed, ORG, id, 3)
  t.same([version?.version, version?.condition, version?.archived, version?.created_by], [3, 'false', false, 'operator'])
  t.equal(await findPolicyVersion(typed, ORG, id, 1), null, 'versions before the migration were never recorded')
})
