// Seals over the audit log and the decisions (storage/audit-seal.ts), their verification, GET
// /audit/verify and `steward audit verify`. Tampering is done by hand-written SQL inside a
// transaction that is rolled back afterwards, so each kind is checked against the same chain.
import { createHash } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Kysely, PostgresDialect, sql } from 'kysely'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { SYSTEM, type AuditEventType } from '../../domain/audit.ts'
import { createJsonLogger, silentLogger } from '../../log.ts'
import { recordEvent, recordEvents } from '../../storage/audit.ts'
import { canonicalRow, decisionSealJson, eventSealJson, ZERO_SHA256, type Seal } from '../../engine/seal.ts'
import { digestRange, sealAll, sealOrganization } from '../../storage/audit-seal.ts'
import { verifyChain, type VerifyResult } from '../../services/audit-verify.ts'
import { createPostgresPool, openDatabase } from '../../database/connect.ts'
import type { Database } from '../../database/schema.ts'
import { seedWorld } from '../../fixtures/seed.ts'
import { canonicalJson } from '../../engine/canonical.ts'
import { captured, DATABASE_KIND, openTestDatabase } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

type Db = Kysely<Database>
const NOW = new Date('2026-11-23T12:00:00.000Z')

async function event(db: Db, org: string, type: AuditEventType = 'policy.created', data: Record<string, unknown> = {}): Promise<void> {
  await recordEvent(db, { organizationId: org, actor: SYSTEM, type, target: { type: 'policy', id: null }, data, occurredAt: new Date() })
}

async function decision(db: Db, org: string, action = 'tickets.read', at = new Date()): Promise<string> {
  const id = crypto.randomUUID()
  await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256, decision,
      policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
    values (${id}, ${org}, ${crypto.randomUUID()}, 'bot', ${action}, '*', '{"n":1}'::jsonb, '{}'::jsonb, ${'a'.repeat(64)}, 'allow', 'allow',
      '[]'::jsonb, '[]'::jsonb, '[]'::jsonb, null, 1, 'operator', ${at})`.execute(db)
  return id
}

/** The largest xid among the organization's rows. */
async function maxXid(db: Db, org: string): Promise<number> {
  const { rows } = await sql<{ xid: string | null }>`select greatest((select max(xid) from audit_events where organization_id = ${org}),
      (select max(xid) from decisions where organization_id = ${org}))::text as xid`.execute(db)
  return Number(rows[0]!.xid ?? 0)
}

/** Waits until every transaction up to `xid` has ended (other test files share the server). */
async function settled(db: Db, xid: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await sql<{ xmin: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as xmin`.execute(db)
    if (Number(rows[0]!.xmin) > xid) return
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  throw new Error(`transactions below ${xid} did not end`)
}

/** One seal over everything the organization has written so far. */
async function sealNow(db: Db, org: string, options: { maxRows?: number } = {}): Promise<Seal> {
  await settled(db, await maxXid(db, org))
  const outcome = await sealOrganization(db, org, NOW, options)
  if (!('sealed' in outcome)) throw new Error(`nothing sealed: ${outcome.skipped}`)
  return outcome.sealed
}

/** `n` events written by one transaction (one xid). */
async function eventsInOneTransaction(db: Db, org: string, n: number): Promise<void> {
  await recordEvents(db, Array.from({ length: n }, (_, i) => ({ organizationId: org, actor: SYSTEM, type: 'policy.updated' as const, target: { type: 'policy', id: null }, data: { i }, occurredAt: new Date() })))
}

/** Seals until nothing is left, `maxRows` at most per seal: the rows in each seal, in order. */
async function sealSizes(db: Db, org: string, maxRows: number): Promise<number[]> {
  const sizes: number[] = []
  for (;;) {
    const outcome = await sealOrganization(db, org, NOW, { maxRows })
    if (!('sealed' in outcome)) return sizes
    sizes.push(outcome.sealed.events + outcome.sealed.decisions)
  }
}

class Rollback extends Error {}

/** Verifies inside a transaction that `tamper` ran in, then rolls the tampering back. */
async function verifyTampered(db: Db, org: string, tamper: (trx: Db) => Promise<unknown>, now = NOW): Promise<VerifyResult> {
  let result: VerifyResult | null = null
  await db
    .transaction()
    .execute(async (trx) => {
      await tamper(trx)
      result = await verifyChain(trx, org, now)
      throw new Rollback()
    })
    .catch((error) => {
      if (!(error instanceof Rollback)) throw error
    })
  return result!
}

async function eventIds(db: Db, org: string, seal: Seal): Promise<number[]> {
  const rows = await db.selectFrom('audit_events').select('event_id').where('organization_id', '=', org).where('xid', '>=', seal.xid_from).where('xid', '<', seal.xid_to).orderBy('event_id').execute()
  return rows.map((row) => Number(row.event_id))
}

t.test('a row is hashed as its RFC 8785 canonical JSON', async (t) => {
  const data = { z: [3, 1.5e-7, { b: null, a: 'é\u2028"' }], a: { y: true, x: 1e21 }, '\u00e9': -0, 'e\u0301': 'x', '': [] }
  const event = eventSealJson({ event_id: '7', organization_id: 'o', occurred_at: '2026-01-01T00:00:00.000001Z', actor_type: 'system', actor_id: null, type: 'policy.created', target_type: 'policy', target_id: 'p', data, request_id: 'r', xid: '12' })
  t.equal(canonicalRow(event), canonicalJson(event))
  t.match(canonicalRow(event), /^\{"actor_id":null,"actor_type":"system","data":\{"":\[\],"a":\{"x":1e\+21,"y":true\}/)
  const row = { decision_id: 'd', organization_id: 'o', agent_id: 'a', agent_handle: 'bot', action: 'x.y', resource: '*', args: { n: [1, 2] }, context: {}, args_sha256: 'f', decision: 'allow', policy_decision: 'deny', reasons: [{ rule: 'r', policy_id: 'p' }], monitor: [], errors: [], approval_id: null, ruleset_revision: 3, requested_by: 'operator', evaluated_at: 'now', xid: 5 }
  const decision = decisionSealJson({ ...row, via: null })
  t.equal(canonicalRow(decision), canonicalJson(decision))
  t.notOk('via' in decision, 'a decision asked through POST /decisions (via null) hashes as before the column existed')
  const gateway = decisionSealJson({ ...row, via: 'mcp' })
  t.equal(gateway.via, 'mcp', 'the door a decision came through is sealed when set')
  t.not(canonicalRow(gateway), canonicalRow(decision))
})


t.test('the sealer reads a page as one JSON text and hashes exactly what the columns hold', async (t) => {
  // Each page is read as json_agg of one array per row: every value must come out as the driver
  // gives the column read alone, or seals made before and after would disagree. Odd values on
  // purpose: escapes, control and non-BMP characters, numbers jsonb keeps as written, nulls.
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  const odd = 'q"b\\n\nt\tc\u0001 é 😀 \u2028 <>&\''
  const data = { s: odd, n: 1.5, tiny: 1.5e-7, e: 1e21, one: 1.0, neg: -0, nested: { b: 1, a: [true, null, { z: odd }] }, '': 'empty key' }
  await recordEvent(db, { organizationId: A, actor: { type: 'user', id: odd }, type: 'policy.created', target: { type: 'policy', id: null }, data, requestId: odd, occurredAt: new Date('2026-11-23T12:00:00.123456Z') })
  await recordEvent(db, { organizationId: A, actor: SYSTEM, type: 'policy.updated', target: { type: odd, id: odd }, data: {}, occurredAt: new Date() })
  for (const approval of [null, crypto.randomUUID()]) {
    await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256, decision,
        policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
      values (${crypto.randomUUID()}, ${A}, ${crypto.randomUUID()}, ${odd}, 'payments.refund', ${odd}, ${JSON.stringify(data)}::jsonb, '{"ip":"10.0.0.1","n":[1.0,2.50],"big":12345678901234567890}'::jsonb,
        ${'a'.repeat(64)}, 'require_approval', 'require_approval', ${JSON.stringify([{ policy_id: odd, version: 2 }])}::jsonb, '{}'::jsonb, '[{"message":"x"}]'::jsonb,
        ${approval}, 2147483647, ${odd}, ${'2026-11-23T12:00:00.000001Z'}::timestamptz)`.execute(db)
  }
  await settled(db, await maxXid(db, A))
  const to = (await maxXid(db, A)) + 1
  // The reference: every column selected on its own, as the driver parses it.
  const ISO = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'
  const { rows: eventRows } = await sql<Parameters<typeof eventSealJson>[0]>`select event_id, organization_id::text as organization_id,
      to_char(occurred_at at time zone 'UTC', ${ISO}) as occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id, xid
    from audit_events where organization_id = ${A} and xid < ${to} order by event_id`.execute(db)
  const { rows: decisionRows } = await sql<Parameters<typeof decisionSealJson>[0]>`select decision_id::text as decision_id, organization_id::text as organization_id,
      agent_id::text as agent_id, agent_handle, action, resource, args, context, args_sha256, decision, policy_decision, reasons, monitor, errors,
      approval_id::text as approval_id, ruleset_revision, requested_by, to_char(evaluated_at at time zone 'UTC', ${ISO}) as evaluated_at, xid
    from decisions where organization_id = ${A} and xid < ${to} order by xid, decision_id`.execute(db)
  t.ok(eventRows.length >= 2 && decisionRows.length === 2)
  const sha = (rows: Record<string, unknown>[]) => createHash('sha256').update(canonicalJson(rows)).digest('hex')
  const digest = await digestRange(db, A, 0, to)
  t.equal(digest.events.count, eventRows.length)
  t.equal(digest.events.sha256, sha(eventRows.map(eventSealJson)), 'events hash the same as read column by column')
  t.equal(digest.decisions.count, 2)
  t.equal(digest.decisions.sha256, sha(decisionRows.map(decisionSealJson)), 'decisions hash the same as read column by column')
})
t.test('seals chain events and decisions by transaction id; verify recomputes them', async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  const B = vars.ORG_B!
  const before = await verifyChain(db, A, NOW)
  t.match(before, { ok: true, seals: 0, events: 0, decisions: 0, through_seal_id: null, latest_seal: null }, 'no seal yet: nothing to disagree with')

  await event(db, A)
  await event(db, A, 'agent.created', { handle: 'bot' })
  await decision(db, A)
  await event(db, B)
  const first = await sealNow(db, A)
  t.match(first, { seal_id: 1, xid_from: 0, prev_sha256: ZERO_SHA256, sealed_at: NOW })
  t.ok(first.events >= 2 && first.decisions === 1, 'the events and the decision')
  t.match(first.sha256, /^[0-9a-f]{64}$/)
  t.same(await sealOrganization(db, A, NOW), { skipped: 'nothing_new' }, 'nothing new: no seal')

  await event(db, A, 'policy.updated')
  const second = await sealNow(db, A)
  t.match(second, { seal_id: 2, xid_from: first.xid_to, prev_sha256: first.sha256, events: 1, decisions: 0 })
  const stored = await db.selectFrom('audit_seals').selectAll().where('organization_id', '=', A).orderBy('seal_id').execute()
  t.same(stored.map((s) => [Number(s.seal_id), s.sha256]), [[1, first.sha256], [2, second.sha256]], 'stored as made')
  const verified = await verifyChain(db, A, NOW)
  t.match(verified, { ok: true, seals: 2, events: first.events + 1, decisions: 1, through_seal_id: 2, latest_seal: { seal_id: 2, sha256: second.sha256 } })
  const b = await sealNow(db, B)
  t.equal(b.seal_id, 1, "each organization has its own chain")
  t.match(await verifyChain(db, B, NOW), { ok: true, seals: 1 })
})

t.test('a seal holds at most maxRows rows, cut at a lower xid; one transaction is never split', async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  const seeded = (await sealAll(db, NOW)).reduce((sum, seal) => sum + (seal.organization_id === A ? seal.events : 0), 0) // whatever seeding wrote
  for (let i = 0; i < 25; i++) await event(db, A, 'policy.updated', { i })
  await settled(db, await maxXid(db, A))
  t.same(await sealSizes(db, A, 10), [10, 10, 5], 'three seals of at most 10 rows')
  await eventsInOneTransaction(db, A, 15)
  const whole = await sealNow(db, A, { maxRows: 10 })
  t.equal(whole.events, 15, 'a 15-row transaction goes into one seal')
  t.match(await verifyChain(db, A, NOW), { ok: true, events: seeded + 40 })
})

t.test('the range is counted a page at a time: cuts across pages, and a transaction larger than a page counted whole', async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  await sealAll(db, NOW) // whatever seeding wrote
  // 450 transactions of one event each: counted in pages of 200 rows, cut after 300.
  for (let i = 0; i < 450; i++) await event(db, A, 'policy.updated', { i })
  await settled(db, await maxXid(db, A))
  t.same(await sealSizes(db, A, 300), [300, 150], 'cut after 300 rows, across page boundaries')
  // 50 single-event transactions, one of 230 events (a page holds 200 rows), then 3 more. With
  // maxRows 260 the cut falls at the 230-row transaction only if all 230 of its rows are counted.
  for (let i = 0; i < 50; i++) await event(db, A, 'policy.updated', { before: i })
  await eventsInOneTransaction(db, A, 230)
  for (let i = 0; i < 3; i++) await event(db, A, 'policy.updated', { after: i })
  await settled(db, await maxXid(db, A))
  t.same(await sealSizes(db, A, 260), [50, 233], 'the 230-row transaction counted whole: 50 + 230 passes 260')
  t.same(await sealOrganization(db, A, NOW, { maxRows: 260 }), { skipped: 'nothing_new' }, 'nothing left to seal')
  // A transaction larger than both a page and maxRows goes into one seal, never split.
  await eventsInOneTransaction(db, A, 230)
  await settled(db, await maxXid(db, A))
  t.same(await sealSizes(db, A, 100), [230], 'the 230-row transaction in one seal, over maxRows')
  t.match(await verifyChain(db, A, NOW), { ok: true })
})

t.test('verify names each kind of tampering, and the first one', async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  await sealAll(db, NOW) // whatever seeding wrote is seal 1
  await settled(db, await maxXid(db, A))
  const base = (await db.selectFrom('audit_seals').select(db.fn.max('seal_id').as('n')).where('organization_id', '=', A).executeTakeFirst())?.n
  const offset = Number(base ?? 0)

  await event(db, A, 'policy.created', { name: 'one' })
  await event(db, A, 'agent.created', { handle: 'two' })
  const d1 = await decision(db, A, 'email.send')
  const s1 = await sealNow(db, A)
  await event(db, A, 'key.created', { name: 'three' })
  await event(db, A, 'member.added', { email: 'four@example.com' })
  const d2 = await decision(db, A, 'payments.refund')
  const s2 = await sealNow(db, A)
  await event(db, A, 'policy.archived', { name: 'five' })
  const s3 = await sealNow(db, A)
  t.same([s1.seal_id, s2.seal_id, s3.seal_id], [offset + 1, offset + 2, offset + 3])
  const [e3, e4] = await eventIds(db, A, s2)
  const [e1] = await eventIds(db, A, s1)
  const [e5] = await eventIds(db, A, s3)
  t.match(await verifyChain(db, A, NOW), { ok: true, seals: offset + 3 }, 'untouched: ok')

  const edited = await verifyTampered(db, A, (trx) => sql`update audit_events set data = '{"name":"THREE"}'::jsonb where event_id = ${e3}`.execute(trx))
  t.match(edited, { ok: false, problem: { kind: 'edited', seal_id: s2.seal_id, rows: 'events' } }, 'an edited event')
  t.match((edited as { problem: { message: string } }).problem.message, `seal ${s2.seal_id}`)

  const shifted = await verifyTampered(db, A, (trx) => sql`update audit_events set occurred_at = occurred_at + interval '1 microsecond' where event_id = ${e4}`.execute(trx))
  t.match(shifted, { ok: false, problem: { kind: 'edited', seal_id: s2.seal_id } }, 'a microsecond is an edit too')

  t.match(await verifyTampered(db, A, (trx) => sql`delete from audit_events where event_id = ${e4}`.execute(trx)), { ok: false, problem: { kind: 'deleted', seal_id: s2.seal_id, rows: 'events' } }, 'a deleted event')

  t.match(
    await verifyTampered(db, A, (trx) => sql`insert into audit_events (organization_id, occurred_at, actor_type, type, target_type, xid) values (${A}, now(), 'system', 'policy.created', 'policy', ${s1.xid_from + 1})`.execute(trx)),
    { ok: false, problem: { kind: 'inserted', seal_id: s1.seal_id, rows: 'events' } },
    'an event slipped into a sealed range',
  )

  const swap = (trx: Db) => sql`update audit_events a set (occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id, xid) =
      (select occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id, xid from audit_events b
        where b.event_id = case when a.event_id = ${e3}::bigint then ${e4}::bigint else ${e3}::bigint end)
    where a.event_id in (${e3}::bigint, ${e4}::bigint)`.execute(trx)
  t.match(await verifyTampered(db, A, swap), { ok: false, problem: { kind: 'reordered', seal_id: s2.seal_id, rows: 'events' } }, 'two events swapped: reordered')

  t.match(
    await verifyTampered(db, A, (trx) => sql`update decisions set decision = 'deny' where decision_id = ${d2}`.execute(trx)),
    { ok: false, problem: { kind: 'edited', seal_id: s2.seal_id, rows: 'decisions' } },
    'an edited decision',
  )
  t.match(
    await verifyTampered(db, A, (trx) => sql`delete from decisions where decision_id = ${d1}`.execute(trx)),
    { ok: false, problem: { kind: 'deleted', seal_id: s1.seal_id, rows: 'decisions' } },
    'a deleted decision (within retention)',
  )

  t.match(
    await verifyTampered(db, A, (trx) => sql`delete from audit_seals where organization_id = ${A} and seal_id = ${s2.seal_id}`.execute(trx)),
    { ok: false, problem: { kind: 'seal_removed', seal_id: s2.seal_id } },
    'a removed seal breaks the chain',
  )
  t.match(
    await verifyTampered(db, A, (trx) => sql`update audit_seals set events = events + 1 where organization_id = ${A} and seal_id = ${s2.seal_id}`.execute(trx)),
    { ok: false, problem: { kind: 'seal_edited', seal_id: s2.seal_id } },
    "an edited seal's count",
  )
  t.match(
    await verifyTampered(db, A, (trx) => sql`update audit_seals set sha256 = ${'f'.repeat(64)} where organization_id = ${A} and seal_id = ${s3.seal_id}`.execute(trx)),
    { ok: false, problem: { kind: 'seal_edited', seal_id: s3.seal_id } },
    "the last seal's own hash",
  )
  // Rows and seal rewritten together: the seal's hash still covers the old rows.
  t.match(
    await verifyTampered(db, A, async (trx) => {
      await sql`update audit_events set data = '{"name":"FIVE"}'::jsonb where event_id = ${e5}`.execute(trx)
      const fake = await sql<{ s: string }>`select encode(sha256('x'::bytea), 'hex') as s`.execute(trx)
      await sql`update audit_seals set events_sha256 = ${fake.rows[0]!.s} where organization_id = ${A} and seal_id = ${s3.seal_id}`.execute(trx)
    }),
    { ok: false, problem: { kind: 'edited', seal_id: s3.seal_id } },
    'rewriting the digest too does not help',
  )

  const both = await verifyTampered(db, A, async (trx) => {
    await sql`update audit_events set type = 'policy.updated' where event_id = ${e5}`.execute(trx)
    await sql`update audit_events set target_id = 'x' where event_id = ${e1}`.execute(trx)
  })
  t.match(both, { ok: false, problem: { kind: 'edited', seal_id: s1.seal_id } }, 'two tamperings: the first seal is named')
  t.match(await verifyChain(db, A, NOW), { ok: true }, 'every tampering was rolled back')
})

t.test('retention: pruned seals are checked by their chain; decisions dropped by retention are not tampering', async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  await sealAll(db, NOW)
  await event(db, A, 'policy.created')
  await decision(db, A, 'email.send', new Date(NOW.getTime() - 86_400_000))
  const old = await sealNow(db, A)
  await event(db, A, 'policy.updated')
  await sealNow(db, A)

  const pruned = await verifyTampered(db, A, async (trx) => {
    await sql`delete from audit_events where organization_id = ${A} and xid < ${old.xid_to}`.execute(trx)
    await recordEvent(trx, { organizationId: A, actor: SYSTEM, type: 'audit.pruned', target: { type: 'audit', id: null }, data: { through_seal_id: old.seal_id }, occurredAt: NOW })
  })
  t.match(pruned, { ok: true, pruned_seals: old.seal_id }, 'events deleted by a prune through that seal: only the chain is checked')
  t.match(
    await verifyTampered(db, A, (trx) => sql`delete from audit_events where organization_id = ${A} and xid < ${old.xid_to}`.execute(trx)),
    { ok: false, problem: { kind: 'deleted' } },
    'the same deletion without an audit.pruned event is tampering',
  )
  const later = new Date(NOW.getTime() + 500 * 86_400_000)
  const gone = (trx: Db) => sql`delete from decisions where organization_id = ${A}`.execute(trx)
  t.match(await verifyTampered(db, A, gone, later), { ok: true, decisions_pruned_seals: 1 }, 'past the decision retention: pruned by retention')
  t.match(await verifyTampered(db, A, gone, NOW), { ok: false, problem: { kind: 'deleted', rows: 'decisions', seal_id: old.seal_id } }, 'within the retention: deleted')
})

t.test('a transaction held open across a seal lands in the next seal, never the first', { skip: DATABASE_KIND === 'pglite' && 'PGlite has one connection: a transaction held open would block the sealer itself, so the interleaving cannot happen there' }, async (t) => {
  const { db } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  await event(db, A, 'policy.created', { before: true })
  const committedXid = await maxXid(db, A)
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  let inserted!: (xid: number) => void
  const insertedXid = new Promise<number>((resolve) => (inserted = resolve))
  const holder = db.transaction().execute(async (trx) => {
    await recordEvent(trx, { organizationId: A, actor: SYSTEM, type: 'policy.updated', target: { type: 'policy', id: null }, data: { held: true }, occurredAt: new Date() })
    const { rows } = await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(trx)
    inserted(Number(rows[0]!.xid))
    await held
  })
  const heldXid = await insertedXid
  t.ok(heldXid > committedXid)
  // Seal while it is open, until the committed event is covered.
  const whileOpen: Seal[] = []
  for (let i = 0; i < 500 && !whileOpen.some((s) => s.xid_to > committedXid); i++) {
    whileOpen.push(...(await sealAll(db, NOW)).filter((s) => s.organization_id === A))
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.ok(whileOpen.some((s) => s.xid_to > committedXid), 'the committed event was sealed')
  for (const seal of whileOpen) t.ok(seal.xid_to <= heldXid, `seal ${seal.seal_id} stops below the open transaction`)
  release()
  await holder
  const after: Seal[] = []
  for (let i = 0; i < 500 && !after.some((s) => s.xid_to > heldXid); i++) {
    after.push(...(await sealAll(db, NOW)).filter((s) => s.organization_id === A))
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const covering = after.find((s) => s.xid_from <= heldXid && heldXid < s.xid_to)
  t.ok(covering, 'a later seal covers the held event')
  t.ok(covering!.seal_id > Math.max(...whileOpen.map((s) => s.seal_id)), 'in a seal after the first')
  t.match(await verifyChain(db, A, NOW), { ok: true })
})

t.test('two sealers racing never seal one range twice', { skip: DATABASE_KIND === 'pglite' && 'PGlite has one connection in one process: there is nothing to race' }, async (t) => {
  const { db, pool } = await openTestDatabase(t)
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  // A second pool on the same schema, as a second process would have.
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db)
  const url = new URL(process.env.TEST_DATABASE_URL!)
  url.searchParams.set('options', `-c search_path=${rows[0]!.schema}`)
  const other = new Kysely<Database>({ dialect: new PostgresDialect({ pool: await createPostgresPool(url.toString(), silentLogger, 4) }) })
  t.teardown(() => other.destroy())
  t.ok(pool)
  let writing = true
  const writer = (async () => {
    let n = 0
    while (writing) {
      await event(db, A, 'policy.updated', { n: n++ })
      if (n % 3 === 0) await decision(db, A)
    }
    return n
  })()
  const sealer = async (on: Db) => {
    let made = 0
    const end = Date.now() + 2000
    while (Date.now() < end) made += (await sealAll(on, new Date(), { maxRows: 50 })).length
    return made
  }
  const [one, two] = await Promise.all([sealer(db), sealer(other)])
  writing = false
  await writer
  t.ok(one + two > 1, `the sealers made seals (${one} and ${two})`)
  await settled(db, await maxXid(db, A))
  while ((await sealAll(db, new Date())).length > 0);
  const seals = await db.selectFrom('audit_seals').selectAll().where('organization_id', '=', A).orderBy('seal_id').execute()
  let to = 0
  let prev = ZERO_SHA256
  seals.forEach((seal, i) => {
    if (Number(seal.seal_id) !== i + 1 || Number(seal.xid_from) !== to || seal.prev_sha256 !== prev) t.fail(`seal ${seal.seal_id} breaks the chain`)
    to = Number(seal.xid_to)
    prev = seal.sha256
  })
  const total = seals.reduce((sum, seal) => sum + Number(seal.events), 0)
  const { rows: counted } = await sql<{ n: number }>`select count(*)::int as n from audit_events where organization_id = ${A}`.execute(db)
  t.equal(total, counted[0]!.n, 'every event is in exactly one seal')
  t.match(await verifyChain(db, A, new Date()), { ok: true, seals: seals.length, events: total })
})

t.test('a seal holds no transaction while it hashes: other queries run between its pages', async (t) => {
  // On PGlite (one connection for the process) a transaction held across the hashing would hold
  // every request with it; there, no probe could finish before the seal did. On PostgreSQL the
  // seal and the probes share a pool of one connection, so the same holds there.
  const handle = await openTestDatabase(t)
  let db = handle.db
  if (handle.kind === 'postgres') {
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db)
    const url = new URL(process.env.TEST_DATABASE_URL!)
    url.searchParams.set('options', `-c search_path=${rows[0]!.schema}`)
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: await createPostgresPool(url.toString(), silentLogger, 1) }) })
    t.teardown(() => db.destroy())
  }
  const vars = await seedWorld(db, NOW.getTime())
  const A = vars.ORG_A!
  await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256, decision,
      policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
    select gen_random_uuid(), ${A}, gen_random_uuid(), 'bot', 'tickets.read', '*', jsonb_build_object('n', i), '{}'::jsonb, ${'a'.repeat(64)}, 'allow', 'allow',
      '[]'::jsonb, '[]'::jsonb, '[]'::jsonb, null, 1, 'operator', ${new Date()}::timestamptz from generate_series(1, 3000) as i`.execute(db)
  await settled(db, await maxXid(db, A))
  let done = false
  const sealing = sealOrganization(db, A, NOW).finally(() => (done = true))
  let probes = 0
  while (!done) {
    // A turn of the event loop between probes, as between requests arriving from sockets.
    await new Promise((resolve) => setImmediate(resolve))
    await sql`select 1`.execute(db)
    if (!done) probes++
  }
  const outcome = await sealing
  t.ok('sealed' in outcome && outcome.sealed.decisions === 3000, 'the seal covers the 3,000 decisions')
  // 3,000 decisions are 30 pages: a probe gets in between pages. Only between its three steps
  // (at most 2) would be a seal that holds a transaction while it hashes.
  t.ok(probes >= 10, `queries ran while the seal was hashing (${probes})`)
  t.match(await verifyChain(db, A, new Date()), { ok: true })
})

t.test('GET /audit/verify: Admins and Owners, one organization, the first mismatch', async (t) => {
  const app = await productApp(t, { env: { AUDIT_SEAL_INTERVAL_MS: '3600000' } })
  const { vars, db } = app
  const A = vars.ORG_A!
  const B = vars.ORG_B!
  const empty = await app.call('GET', '/audit/verify', { token: vars.OWNER_KEY_A })
  t.equal(empty.status, 200)
  t.same(await jsonOf(empty), { ok: true, seals: 0, events: 0, decisions: 0, latest_seal: null })

  await event(db, A)
  await decision(db, A)
  await event(db, B, 'policy.created', { secret_name: 'b' })
  const sealA = await sealNow(db, A)
  const sealB = await sealNow(db, B)
  const okA = await app.call('GET', '/audit/verify', { token: vars.ADMIN_KEY_A })
  t.equal(okA.status, 200)
  t.equal(okA.headers.get('cache-control'), 'no-store')
  t.same(await jsonOf(okA), {
    ok: true,
    seals: 1,
    events: sealA.events,
    decisions: 1,
    latest_seal: { seal_id: 1, sha256: sealA.sha256, sealed_at: NOW.toISOString() },
  })
  for (const role of ['MANAGER', 'MEMBER', 'VIEWER']) {
    const refused = await app.call('GET', '/audit/verify', { token: vars[`${role}_KEY_A`] })
    t.equal(refused.status, 403, `${role.toLowerCase()}: 403`)
    t.same(await jsonOf(refused), { status: 'Forbidden', error: `This credential's role (${role.toLowerCase()}) lacks the members:manage permission` }, 'the scope message')
  }
  const none = await app.call('GET', '/audit/verify')
  t.equal(none.status, 401)
  const agent = await jsonOf(await app.call('POST', '/agents', { token: vars.ADMIN_KEY_A, json: { handle: 'auditor-bot' } }))
  const agentKey = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
  const byAgent = await app.call('GET', '/audit/verify', { token: agentKey.api_key })
  t.equal(byAgent.status, 403, 'agent keys: 403')
  await byAgent.arrayBuffer()

  // Tamper with B: A's answer is unchanged, B's names B's seal and nothing of A.
  await sql`update audit_events set data = '{"x":1}'::jsonb where organization_id = ${B} and xid < ${sealB.xid_to}`.execute(db)
  const stillA = await jsonOf(await app.call('GET', '/audit/verify', { token: vars.OWNER_KEY_A }))
  t.match(stillA, { ok: true, seals: 1 }, "B's tampering does not show in A's answer")
  const badB = await app.call('GET', '/audit/verify', { token: vars.OWNER_KEY_B })
  t.equal(badB.status, 200)
  const text = await badB.text()
  t.same(JSON.parse(text), {
    ok: false,
    problem: { kind: 'edited', seal_id: 1, rows: 'events', message: JSON.parse(text).problem.message },
    latest_seal: { seal_id: 1, sha256: sealB.sha256, sealed_at: NOW.toISOString() },
  })
  t.notMatch(text, A, "A's id never appears in B's answer")
  t.notMatch(text, sealA.sha256, "nor A's seal")

  // The body of a GET is not read; a query is ignored: still the same answer.
  const withQuery = await app.call('GET', '/audit/verify?org=' + A, { token: vars.OWNER_KEY_B })
  t.match(await jsonOf(withQuery), { ok: false, problem: { seal_id: 1 } }, 'the organization is always the credential\'s')
})

t.test('start() seals in the background every AUDIT_SEAL_INTERVAL_MS', async (t) => {
  const app = await productApp(t, { env: { AUDIT_SEAL_INTERVAL_MS: '100' } })
  const A = app.vars.ORG_A!
  await event(app.db, A)
  const xid = await maxXid(app.db, A)
  let latest: number | null = null
  for (let i = 0; i < 100; i++) {
    const seal = await app.db.selectFrom('audit_seals').select(['seal_id', 'xid_to']).where('organization_id', '=', A).orderBy('seal_id', 'desc').limit(1).executeTakeFirst()
    if (seal && Number(seal.xid_to) > xid) {
      latest = Number(seal.seal_id)
      break
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.ok(latest !== null, 'the background sealer covered the event')
  t.match(await jsonOf(await app.call('GET', '/audit/verify', { token: app.vars.OWNER_KEY_A })), { ok: true, latest_seal: { seal_id: latest } })
})

t.test('steward audit verify: exit 0 and ok, exit 1 naming the first mismatch', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'steward-audit-seal-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }
  const run = (argv: string[]) => captured((io) => runCli(argv, { ...env, STEWARD_PASSWORD: 'correct horse battery' }, io))
  const createdA = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'])
  t.equal(createdA.code, 0, createdA.err)
  const createdB = await run(['org', 'create', '--name', 'Beta', '--owner-email', 'ops@beta.example'])
  t.equal(createdB.code, 0, createdB.err)
  const orgA = createdA.out.trim()
  const orgB = createdB.out.trim()
  const open = () => openDatabase({ databaseUrl: null, dataDir: env.DATA_DIR, logger: createJsonLogger('silent') })
  let handle = await open()
  await event(handle.db, orgA)
  await event(handle.db, orgB)
  await handle.close()
  const sealed = await run(['audit', 'seal'])
  t.equal(sealed.code, 0, sealed.err)
  t.match(sealed.out, `sealed ${orgA} seal=1`)

  const ok = await run(['audit', 'verify'])
  t.equal(ok.code, 0, ok.err)
  t.match(ok.out, new RegExp(`^ok ${orgA} seals=1 events=\\d+ decisions=0 latest_seal=1 sha256=[0-9a-f]{64}$`, 'm'))
  t.match(ok.out, new RegExp(`^ok ${orgB} seals=1`, 'm'))
  const one = await run(['audit', 'verify', '--org', orgA])
  t.equal(one.code, 0)
  t.equal(one.out.trim().split('\n').length, 1, 'one organization')

  handle = await open()
  await sql`delete from audit_events where organization_id = ${orgB}`.execute(handle.db)
  await handle.close()
  const bad = await run(['audit', 'verify'])
  t.equal(bad.code, 1, 'a mismatch: exit 1')
  t.match(bad.out, new RegExp(`^FAILED ${orgB} deleted seal=1: `, 'm'))
  t.match(bad.out, new RegExp(`^ok ${orgA} `, 'm'), 'the other organization still verifies')
  t.equal((await run(['audit', 'verify', '--org', orgA])).code, 0, 'A alone: exit 0')
  t.equal((await run(['audit', 'verify', '--org', orgB])).code, 1, 'B alone: exit 1')
  const usage = await run(['audit', 'verify', '--org', 'nope'])
  t.equal(usage.code, 2, 'a malformed id is a usage error')
  t.match(usage.err, '--org must be a UUID')
  t.equal((await run(['audit', 'verify', '--org', crypto.randomUUID()])).code, 2, 'an unknown organization too')
})
