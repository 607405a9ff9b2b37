// Timestamps and int8 as the repositories read them (database/type-parsers.ts), set on the pg pool
// and the PGlite instance Steward opens: a timestamptz is a Date, from the query builder and from
// raw SQL alike, an int8 (count(*) included) a number; another pg user's global type parsers do
// not reach Steward's pool. PGlite, and PostgreSQL with TEST_DATABASE_URL.
import { sql } from 'kysely'
import t from 'tap'
import { parseTimestamp } from '../../database/type-parsers.ts'
import { DATABASE_KIND, openTestDatabase } from '../support/helpers.ts'

const ORG = crypto.randomUUID()
const AT = new Date('2026-11-20T10:11:12.345Z')

const iso = (value: unknown) => (value instanceof Date ? (Number.isNaN(value.getTime()) ? 'Invalid Date' : value.toISOString()) : `not a Date: ${String(value)}`)

t.test('PostgreSQL text to a Date, to the millisecond', async (t) => {
  const cases: [string, string][] = [
    ['2026-11-20 10:11:12.345678+00', '2026-11-20T10:11:12.345Z'],
    ['2026-11-20 10:11:12+00', '2026-11-20T10:11:12.000Z'],
    ['2026-11-20 11:11:12.5+01', '2026-11-20T10:11:12.500Z'],
    ['2026-11-20 15:41:12.345+05:30', '2026-11-20T10:11:12.345Z'],
    ['2026-11-20 07:11:12.345-03', '2026-11-20T10:11:12.345Z'],
    // Local mean time: PostgreSQL writes the offset to the second, which Date's parser refuses.
    ['1911-03-10 23:50:39+00:09:21', '1911-03-10T23:41:18.000Z'],
    // Years below 1000: Date's parser reads 0001 as 2001.
    ['0001-01-01 00:00:00+00', '0001-01-01T00:00:00.000Z'],
    ['0099-06-01 12:00:00.5-01:30', '0099-06-01T13:30:00.500Z'],
    ['0044-03-15 00:00:00+00 BC', '-000043-03-15T00:00:00.000Z'],
    ['10000-01-01 00:00:00+00', '+010000-01-01T00:00:00.000Z'],
  ]
  for (const [text, expected] of cases) t.equal(iso(parseTimestamp(text)), expected, text)
  // A timestamp without time zone is local time, as pg and PGlite read it.
  t.equal(parseTimestamp('2026-11-20 10:11:12.345').getTime(), new Date(2026, 10, 20, 10, 11, 12, 345).getTime())
  const ancient = parseTimestamp('0005-02-03 04:05:06')
  t.same([ancient.getFullYear(), ancient.getMonth(), ancient.getDate(), ancient.getHours()], [5, 1, 3, 4])
  t.ok(Number.isNaN(parseTimestamp('infinity').getTime()), 'no timestamp: an invalid Date')
})

t.test(`${DATABASE_KIND}: timestamps are Dates and int8 numbers, builder and raw SQL alike`, async (t) => {
  const { db } = await openTestDatabase(t)
  await db.insertInto('organizations').values({ id: ORG, name: 'Types', created_at: AT }).execute()
  const built = await db.selectFrom('organizations').select(['created_at', 'updated_at']).where('id', '=', ORG).executeTakeFirstOrThrow()
  t.equal(iso(built.created_at), AT.toISOString())
  t.equal(built.updated_at, null)
  const raw = await sql<Record<string, unknown>>`select created_at, created_at::timestamp as plain, max(created_at) over () as latest,
      array[created_at] as list, count(*) over () as n, 9007199254740991::int8 as big, to_json(created_at) as json
    from organizations where id = ${ORG}`.execute(db)
  const row = raw.rows[0]!
  t.equal(iso(row.created_at), AT.toISOString())
  t.ok(row.plain instanceof Date, 'timestamp without time zone')
  t.equal(iso(row.latest), AT.toISOString())
  t.same((row.list as unknown[]).map(iso), [AT.toISOString()], 'timestamptz[]')
  t.equal(row.n, 1)
  t.equal(row.big, 2 ** 53 - 1)
  // JSON carries text: the parsers do not reach inside it.
  t.equal(typeof row.json, 'string')
  const returned = await db.updateTable('organizations').set({ updated_at: AT }).where('id', '=', ORG).returning('updated_at').executeTakeFirstOrThrow()
  t.equal(iso(returned.updated_at), AT.toISOString())
})

t.test(`${DATABASE_KIND}: an offset to the second (a local mean time zone) still reads`, async (t) => {
  const { db } = await openTestDatabase(t)
  const row = await db.transaction().execute(async (trx) => {
    await sql`set local time zone 'Europe/Paris'`.execute(trx)
    return (await sql<{ at: Date; text: string }>`select '1900-01-01 00:00:00+00'::timestamptz as at, '1900-01-01 00:00:00+00'::timestamptz::text as text`.execute(trx)).rows[0]!
  })
  t.match(row.text, /[+-]\d\d:\d\d:\d\d$/, 'PostgreSQL writes the offset to the second')
  t.equal(iso(row.at), '1900-01-01T00:00:00.000Z')
})

t.test('a global pg type parser does not reach Steward’s pool', { skip: DATABASE_KIND === 'postgres' ? false : 'PostgreSQL only' }, async (t) => {
  const { default: pg } = await import('pg')
  const { db } = await openTestDatabase(t)
  const before = pg.types.getTypeParser(1184, 'text')
  pg.types.setTypeParser(1184, (text: string) => `global:${text}`)
  t.teardown(() => pg.types.setTypeParser(1184, before))
  const row = (await sql<{ at: unknown }>`select ${AT}::timestamptz as at`.execute(db)).rows[0]!
  t.equal(iso(row.at), AT.toISOString())
})
