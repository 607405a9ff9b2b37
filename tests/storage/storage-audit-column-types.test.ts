// The audit_events column types (migration 2026-11-24T00): actor_type becomes an enum and type a
// domain, for a cheaper insert, with the same rules, and the primary key (organization_id,
// event_id) replaces the page index. On a database holding events and a seal from
// before: every row reads back the same and the seal still verifies; the same values are refused
// before and after, and after the way back down. Then executeWithEvents, which reuses the change's
// own timestamp parameter for an event at the same instant. PGlite, and PostgreSQL with
// TEST_DATABASE_URL.
import { type Kysely, sql } from 'kysely'
import t from 'tap'
import { ACTOR_TYPES, AUDIT_EVENT_TYPES } from '../../domain/audit.ts'
import { BY_OPERATOR, eventBy, executeWithEvents } from '../../storage/audit.ts'
import { sealOrganization } from '../../storage/audit-seal.ts'
import { verifyChain } from '../../services/audit-verify.ts'
import type { Database } from '../../database/schema.ts'
import { emptyDatabase } from '../support/helpers.ts'

const BEFORE = '2026-11-23T06-seal-index'
const CHANGE = '2026-11-24T00-audit-column-types'

const ORG = crypto.randomUUID()
const AT = new Date('2026-11-20T00:00:00.123Z')
const { db, migrator } = await emptyDatabase(t)
const typed = db as unknown as Kysely<Database>

async function migrateTo(name: string): Promise<void> {
  const result = await migrator.migrateTo(name)
  if (result.error) throw result.error
}

function insertEvent(actorType: string, type: string) {
  return sql`insert into audit_events (organization_id, occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id)
    values (${ORG}, ${AT}, ${actorType}, null, ${type}, 'test', null, '{"n": 1}', null)`.execute(db)
}

/** The SQLSTATE of the insert's error, or 'ok'. */
async function outcome(actorType: string, type: string): Promise<string> {
  try {
    await db.transaction().execute(async (trx) => {
      await sql`insert into audit_events (organization_id, occurred_at, actor_type, actor_id, type, target_type, target_id, data, request_id)
        values (${ORG}, ${AT}, ${actorType}, null, ${type}, 'test', null, '{}', null)`.execute(trx)
      throw new Error('rollback')
    })
    return 'unreachable'
  } catch (error) {
    return (error as { code?: string }).code ?? 'ok'
  }
}

const REFUSED: readonly [string, string, string][] = [
  ['robot', 'key.created', 'unknown actor type'],
  ['KEY', 'key.created', 'actor type in capitals'],
  ['', 'key.created', 'empty actor type'],
  ['key', 'Key.Created', 'type in capitals'],
  ['key', 'key', 'type without a dot'],
  ['key', 'key.created.twice', 'two dots'],
  ['key', 'key.created\n', 'a trailing newline'],
  ['key', '', 'empty type'],
]

async function indexes(): Promise<string[]> {
  const found = await sql<{ indexname: string; indexdef: string }>`select indexname, indexdef from pg_indexes where tablename = 'audit_events' and schemaname = current_schema() order by indexname`.execute(db)
  return found.rows.map((row) => `${row.indexname}: ${row.indexdef.replace(/^.* USING btree /, '')}`)
}

/** The plan of GET /audit's first page (sequential scans off: the table is tiny). */
async function pagePlan(): Promise<string> {
  return db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx)
    const plan = await sql<Record<string, string>>`explain select event_id from audit_events where organization_id = ${ORG} and event_id < ${1000} order by event_id desc limit 51`.execute(trx)
    return plan.rows.map((row) => Object.values(row)[0]).join('\n')
  })
}

async function rows(): Promise<unknown[]> {
  return (await sql`select event_id, actor_type::text as actor_type, type::text as type, pg_typeof(actor_type)::text as actor_sql_type, row(actor_type, type)::text as as_text from audit_events order by event_id`.execute(db)).rows.map((row: any) => ({ ...row, event_id: Number(row.event_id) }))
}

t.test('before: the table checks', async (t) => {
  await migrateTo(BEFORE)
  await db.insertInto('organizations').values({ id: ORG, name: 'Evidence', created_at: AT }).execute()
  for (const actor of ACTOR_TYPES) await insertEvent(actor, 'key.created')
  for (const type of AUDIT_EVENT_TYPES) await insertEvent('system', type)
  for (const [actor, type, why] of REFUSED) t.equal(await outcome(actor, type), '23514', `refused: ${why}`)
  t.equal(await outcome('agent', 'decision.denied'), 'ok', 'a well-formed type not in the list is accepted (as before)')
  t.same(await indexes(), [
    'audit_events_page: (organization_id, event_id DESC)',
    'audit_events_pkey: (event_id)',
    'audit_events_type: (organization_id, type, event_id DESC)',
    'audit_events_xid: (organization_id, xid)',
  ])
})

let before: unknown[] = []
t.test('the migration keeps every row, and the seal made before it verifies after it', async (t) => {
  before = await rows()
  t.equal(before.length, ACTOR_TYPES.length + AUDIT_EVENT_TYPES.length)
  // The sealer reads today's decision columns; this database stands at an older migration, so the
  // one column added since (decisions.via, migration 2026-11-28T00) is added as that migration does.
  await sql`alter table decisions add column via text`.execute(db)
  const sealed = await sealOrganization(typed, ORG, new Date())
  t.ok('sealed' in sealed, 'sealed before the migration')
  await migrateTo(CHANGE)
  const after = (await rows()) as { actor_sql_type: string }[]
  t.same(after.map((row) => ({ ...row, actor_sql_type: 'text' })), before.map((row) => ({ ...(row as object), actor_sql_type: 'text' })), 'the same values, the same text')
  t.same([...new Set(after.map((row) => row.actor_sql_type))], ['audit_actor_type'], 'actor_type is the enum now')
  const verified = await verifyChain(typed, ORG)
  t.match(verified, { ok: true, seals: 1, events: before.length })
  // Read back through the driver, both are plain strings.
  const read = await typed.selectFrom('audit_events').select(['actor_type', 'type']).orderBy('event_id').limit(1).executeTakeFirstOrThrow()
  t.same(read, { actor_type: 'user', type: 'key.created' })
})

t.test('after: one index fewer, and the newest-first page reads the primary key backwards', async (t) => {
  t.same(await indexes(), [
    'audit_events_pkey: (organization_id, event_id)',
    'audit_events_type: (organization_id, type, event_id DESC)',
    'audit_events_xid: (organization_id, xid)',
  ])
  const plan = await pagePlan()
  t.match(plan, /Index (Only )?Scan Backward using audit_events_pkey/, plan)
  t.notMatch(plan, /Sort/, 'no sort')
  // event_id is still refused when given by hand (identity, generated always).
  const given = await sql`insert into audit_events (event_id, organization_id, occurred_at, actor_type, type, target_type) values (1, ${ORG}, ${AT}, 'system', 'key.created', 'test')`.execute(db).then(() => 'ok', (error: { code?: string }) => error.code)
  t.equal(given, '428C9')
})

t.test('after: the same values refused, the same accepted', async (t) => {
  const expected: Record<string, string> = { 'unknown actor type': '22P02', 'actor type in capitals': '22P02', 'empty actor type': '22P02' }
  for (const [actor, type, why] of REFUSED) t.equal(await outcome(actor, type), expected[why] ?? '23514', `refused: ${why}`)
  for (const actor of ACTOR_TYPES) t.equal(await outcome(actor, 'key.created'), 'ok', `accepted: ${actor}`)
  for (const type of AUDIT_EVENT_TYPES) t.equal(await outcome('system', type), 'ok', `accepted: ${type}`)
  t.equal(await outcome('agent', 'decision.denied'), 'ok')
  // The filters the read API and the webhook outbox use still compare with text values.
  const filtered = await typed.selectFrom('audit_events').select('type').where('type', 'in', ['policy.created', 'lead.created']).orderBy('event_id').execute()
  t.same(filtered.map((row) => row.type), ['policy.created', 'lead.created'])
})

t.test('executeWithEvents: an event at the change time reuses its parameter, any other time has its own', async (t) => {
  const first = new Date('2026-11-21T10:00:00.001Z')
  const second = new Date('2026-11-21T10:00:00.002Z')
  const event = (at: Date) => eventBy(BY_OPERATOR, ORG, 'audit.exported', { type: 'audit', id: null }, {}, at)
  // The change selects its two timestamps: each event must land at its own instant.
  const change = () => sql<{ a: Date; b: Date }>`select ${first}::timestamptz as a, ${second}::timestamptz as b`.compile(typed)
  const cases: [string, Date[]][] = [
    ['the first of the change\'s dates (another object, the same instant)', [new Date(first.getTime())]],
    ['the second', [new Date(second.getTime())]],
    ['neither', [new Date('2026-11-21T10:00:00.003Z')]],
    ['several events, mixed', [new Date(second.getTime()), new Date('2026-11-21T10:00:00.004Z'), first]],
  ]
  for (const [name, times] of cases) {
    const start = Number((await typed.selectFrom('audit_events').select((eb) => eb.fn.max('event_id').as('n')).executeTakeFirstOrThrow()).n)
    const result = await executeWithEvents(typed, change(), times.map(event))
    t.same(result.map((row) => [new Date(row.a).toISOString(), new Date(row.b).toISOString()]), [[first.toISOString(), second.toISOString()]], `${name}: the change's rows`)
    const written = await typed.selectFrom('audit_events').select(['occurred_at', 'actor_type', 'type', 'organization_id']).where('event_id', '>', start).orderBy('event_id').execute()
    t.same(written.map((row) => new Date(row.occurred_at).toISOString()), times.map((time) => time.toISOString()), `${name}: each event at its own time`)
    t.same(written.map((row) => [row.actor_type, row.type, row.organization_id]), times.map(() => ['operator', 'audit.exported', ORG]), `${name}: the other columns`)
  }
})

t.test('down: back to text with the table checks, the same rows', async (t) => {
  await migrateTo(BEFORE)
  const after = (await rows()).slice(0, before.length)
  t.same(after, before, 'the rows written before read the same')
  for (const [actor, type, why] of REFUSED) t.equal(await outcome(actor, type), '23514', `refused: ${why}`)
  t.match(await verifyChain(typed, ORG), { ok: true, seals: 1 })
  t.same(await indexes(), [
    'audit_events_page: (organization_id, event_id DESC)',
    'audit_events_pkey: (event_id)',
    'audit_events_type: (organization_id, type, event_id DESC)',
    'audit_events_xid: (organization_id, xid)',
  ])
  await migrateTo(CHANGE)
})
