// The decision log's monthly partitions (made ahead, idempotent, safe in parallel, strays moved
// out of the default partition) and retention (whole partitions dropped, shorter settings per
// organization applied row by row).
import { sql } from 'kysely'
import t from 'tap'
import { applyDecisionRetention, ensureDecisionPartitions, listDecisionPartitions } from '../../database/partitions.ts'
import { startDecisionMaintenance } from '../../jobs/decision-maintenance.ts'
import { openTestDatabase } from '../support/helpers.ts'
import { createOrganization } from '../../storage/organizations.ts'

const { db } = await openTestDatabase(t)
const org = await createOrganization(db, 'Retention A', new Date('2025-01-01T00:00:00Z'))
const shortOrg = await createOrganization(db, 'Retention B', new Date('2025-01-01T00:00:00Z'))

async function logDecision(organizationId: string, at: string): Promise<void> {
  await db
    .insertInto('decisions')
    .values({
      decision_id: crypto.randomUUID(),
      organization_id: organizationId,
      agent_id: crypto.randomUUID(),
      agent_handle: 'bot',
      action: 'x',
      resource: '',
      args: '{}',
      context: '{}',
      args_sha256: '0'.repeat(64),
      decision: 'deny',
      policy_decision: 'deny',
      reasons: '[]',
      monitor: '{}',
      errors: '[]',
      approval_id: null,
      ruleset_revision: 0,
      requested_by: 'key:x',
      evaluated_at: new Date(at),
    })
    .execute()
}

async function partitionOf(at: string): Promise<string[]> {
  const { rows } = await sql<{ p: string }>`select tableoid::regclass::text as p from decisions where evaluated_at = ${new Date(at)}`.execute(db)
  return rows.map((row) => row.p.replace(/^.*\./, ''))
}

t.test('this month and the next are made, once, even in parallel', async (t) => {
  const now = new Date('2026-12-15T10:00:00Z')
  const made = await Promise.all([ensureDecisionPartitions(db, now), ensureDecisionPartitions(db, now), ensureDecisionPartitions(db, now)])
  t.same(made.flat().sort(), ['decisions_y2026m12', 'decisions_y2027m01'])
  t.same(await ensureDecisionPartitions(db, now), [], 'a second run makes nothing')
  const parts = await listDecisionPartitions(db)
  t.same(parts.map((p) => [p.name, p.start.toISOString(), p.end.toISOString()]), [
    ['decisions_y2026m12', '2026-12-01T00:00:00.000Z', '2027-01-01T00:00:00.000Z'],
    ['decisions_y2027m01', '2027-01-01T00:00:00.000Z', '2027-02-01T00:00:00.000Z'],
  ])
  await logDecision(org.id, '2026-12-31T23:59:59.999Z')
  await logDecision(org.id, '2027-01-01T00:00:00.000Z')
  t.same(await partitionOf('2026-12-31T23:59:59.999Z'), ['decisions_y2026m12'])
  t.same(await partitionOf('2027-01-01T00:00:00.000Z'), ['decisions_y2027m01'])
})

t.test('rows already in the default partition move into a new partition of their month', async (t) => {
  await logDecision(org.id, '2025-03-10T00:00:00Z')
  t.same(await partitionOf('2025-03-10T00:00:00Z'), ['decisions_default'])
  t.same(await ensureDecisionPartitions(db, new Date('2025-03-20T00:00:00Z'), 0), ['decisions_y2025m03'])
  t.same(await partitionOf('2025-03-10T00:00:00Z'), ['decisions_y2025m03'])
})

t.test('retention drops whole old partitions and applies shorter settings per organization', async (t) => {
  await db.updateTable('organizations').set({ decision_retention_days: 30 }).where('id', '=', shortOrg.id).execute()
  await db.updateTable('organizations').set({ decision_retention_days: 400 }).where('id', '=', org.id).execute()
  await logDecision(shortOrg.id, '2026-12-02T00:00:00Z')
  await logDecision(shortOrg.id, '2027-01-20T00:00:00Z')
  await logDecision(org.id, '2026-12-02T00:00:00Z')
  const now = new Date('2027-02-10T00:00:00Z')
  const result = await applyDecisionRetention(db, now)
  // 400 days before 2027-02-10 is 2026-01-06: March 2025 ended before it; December 2026 did not.
  t.same(result.droppedPartitions, ['decisions_y2025m03'])
  t.equal(result.deletedRows, 1, "the 30-day organization's December row")
  const left = await db.selectFrom('decisions').select(['organization_id', 'evaluated_at']).orderBy('evaluated_at').execute()
  t.same(
    left.map((row) => [row.organization_id === org.id ? 'A' : 'B', new Date(row.evaluated_at).toISOString()]),
    [
      ['A', '2026-12-02T00:00:00.000Z'],
      ['A', '2026-12-31T23:59:59.999Z'],
      ['A', '2027-01-01T00:00:00.000Z'],
      ['B', '2027-01-20T00:00:00.000Z'],
    ],
  )
  t.same((await listDecisionPartitions(db)).map((p) => p.name), ['decisions_y2026m12', 'decisions_y2027m01'])
})

t.test('maintenance makes the partitions at once and applies retention only after its delay', async (t) => {
  t.same(await ensureDecisionPartitions(db, new Date('2025-05-10T00:00:00Z'), 0), ['decisions_y2025m05'])
  const errors: unknown[] = []
  // Stopped before its retention: as of 2040 that retention would drop every partition above.
  const stoppedEarly = startDecisionMaintenance(db, () => Date.parse('2040-01-15T00:00:00Z'), (error) => errors.push(error), 100)
  stoppedEarly.stop()
  const maintenance = startDecisionMaintenance(db, () => Date.parse('2027-03-15T00:00:00Z'), (error) => errors.push(error), 200)
  t.teardown(() => maintenance.stop())
  await Promise.all([stoppedEarly.done, maintenance.done])
  const names = async () => (await listDecisionPartitions(db)).map((p) => p.name)
  const made = ['decisions_y2027m03', 'decisions_y2027m04', 'decisions_y2040m01', 'decisions_y2040m02']
  t.same(await names(), ['decisions_y2025m05', 'decisions_y2026m12', 'decisions_y2027m01', ...made], "this month's and the next made at once; nothing dropped yet")
  await new Promise((resolve) => setTimeout(resolve, 400))
  await Promise.all([stoppedEarly.done, maintenance.done])
  t.same(await names(), ['decisions_y2026m12', 'decisions_y2027m01', ...made], 'then retention dropped May 2025; the stopped one never applied its own')
  t.same(errors, [])
})
