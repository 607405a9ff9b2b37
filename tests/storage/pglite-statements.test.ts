// The embedded database's prepared statements (database/pglite-statements.ts): results and
// parameters convert exactly as through PGlite's own `query`, the cache stays bounded and closes
// what it drops, a schema change does not break a prepared statement, and an error leaves neither
// the cache nor the connection in a bad state.
import * as pgliteModule from '@electric-sql/pglite'
import { sql } from 'kysely'
import t from 'tap'
import { fromPglite } from '../../database/connect.ts'
import { openPglite } from '../../database/pglite-array-types.ts'
import { MAX_PREPARED_PARAMETERS, PreparedStatements, STATEMENT_CACHE_SIZE } from '../../database/pglite-statements.ts'
import { preparedText } from '../../database/prepared.ts'

const pglite = await openPglite(pgliteModule, {})
const statements = new PreparedStatements(pglite)
t.teardown(() => pglite.close())

/** Statements PostgreSQL holds that the extended protocol prepared (ours, by name). */
async function preparedInPostgres(): Promise<string[]> {
  const { rows } = await pglite.query<{ name: string }>(`select name from pg_prepared_statements where not from_sql and name like 'steward\\_%' order by name`)
  return rows.map((row) => row.name)
}

t.test('results and parameters convert as through PGlite’s own query', async (t) => {
  const query = `select $1::uuid as id, $2::timestamptz as at, $3::jsonb as data, $4::int8 as big, $5::text[] as texts,
    $6::bool as yes, $7::text as nothing, $8::int as n, 'x'::text as constant, null::timestamptz as never`
  const params = ['6f1c1e0e-6b8b-4c8e-9a59-0f5f6f0b7a11', new Date('2026-11-24T10:00:00.123Z'), { a: [1, 'two'], b: null }, 2n ** 40n, ['a,b', 'c"d', ''], true, null, -7]
  const expected = await pglite.query(query, params)
  for (let i = 0; i < 3; i++) {
    const got = await statements.query(query, params)
    t.same(got.rows, expected.rows, `call ${i + 1}`)
    t.same(got.fields, expected.fields)
  }
  t.equal(statements.size, 1, 'one statement for one text, however often it runs')
  const row = (await statements.query<{ at: Date; data: unknown }>(query, params)).rows[0]!
  t.ok(row.at instanceof Date)
  t.equal(row.at.toISOString(), '2026-11-24T10:00:00.123Z')
  t.same(row.data, { a: [1, 'two'], b: null })
})

t.test('affected rows and command tags, as Kysely reads them', async (t) => {
  await pglite.exec(`create table counted (id int primary key, note text)`)
  const db = fromPglite(pglite).db
  const inserted = await db.insertInto('counted' as never).values([{ id: 1, note: 'a' }, { id: 2, note: 'b' }] as never).executeTakeFirst()
  t.equal((inserted as { numInsertedOrUpdatedRows?: bigint }).numInsertedOrUpdatedRows, 2n)
  const updated = await db.updateTable('counted' as never).set({ note: 'c' } as never).executeTakeFirst()
  t.equal((updated as { numUpdatedRows: bigint }).numUpdatedRows, 2n)
  const deleted = await db.deleteFrom('counted' as never).where('id' as never, '=', 1 as never).executeTakeFirst()
  t.equal((deleted as { numDeletedRows: bigint }).numDeletedRows, 1n)
  const none = await statements.query(`select id from counted where id = $1`, [99])
  t.same(none.rows, [])
  t.same(none.fields, [{ name: 'id', dataTypeID: 23 }], 'a prepared statement keeps its columns when it returns no rows')
})

t.test('the cache is bounded and closes in PostgreSQL what it drops', async (t) => {
  const before = statements.size
  // Statements of the other caches on this PGlite (the dialects of the tests above).
  const others = (await preparedInPostgres()).length - before
  for (let i = 0; i < STATEMENT_CACHE_SIZE + 20; i++) {
    const { rows } = await statements.query(`select $1::int + ${i} as n`, [1])
    t.equal((rows[0] as { n: number }).n, 1 + i)
  }
  t.equal(statements.size, STATEMENT_CACHE_SIZE)
  t.ok(before < STATEMENT_CACHE_SIZE)
  // Dropped statements are closed with the next call: PostgreSQL then holds what the cache holds.
  await statements.query(`select $1::int + ${STATEMENT_CACHE_SIZE + 19} as n`, [1])
  t.equal((await preparedInPostgres()).length, STATEMENT_CACHE_SIZE + others)
  // The least recently used went first: the earliest of the loop runs again, prepared anew.
  const { rows } = await statements.query(`select $1::int + 0 as n`, [5])
  t.same(rows, [{ n: 5 }])
})

t.test('a batch with more than MAX_PREPARED_PARAMETERS parameters runs unnamed and is not kept', async (t) => {
  const own = new PreparedStatements(pglite)
  const batch = async (count: number) => {
    const text = `select cardinality(array[${Array.from({ length: count }, (_, i) => `$${i + 1}::int`).join(', ')}]) as total`
    const { rows } = await own.query<{ total: number }>(text, Array.from({ length: count }, () => 1))
    t.same(rows, [{ total: count }])
  }
  await batch(MAX_PREPARED_PARAMETERS + 1)
  t.equal(own.size, 0, 'not kept')
  await batch(MAX_PREPARED_PARAMETERS)
  t.equal(own.size, 1, 'kept at the limit')
})

t.test('what is kept: queries, a marked text (a leading comment) too; never begin, commit or DDL', async (t) => {
  const own = new PreparedStatements(pglite)
  await own.query(preparedText(`select $1::int as n`), [1])
  t.equal(own.size, 1, 'a text marked for PostgreSQL is prepared here too')
  await own.query(`begin`, [])
  await own.query(`create temporary table scratch (id int)`, [])
  await own.query(`commit`, [])
  t.equal(own.size, 0, 'not kept; and the DDL emptied the cache')
})

t.test('a schema change does not break a prepared statement', async (t) => {
  await statements.query(`create table shape (id int)`, [])
  await statements.query(`insert into shape (id) values ($1)`, [1])
  t.same((await statements.query(`select * from shape where id = $1`, [1])).rows, [{ id: 1 }])
  await statements.query(`alter table shape add column label text default 'new'`, [])
  t.same((await statements.query(`select * from shape where id = $1`, [1])).rows, [{ id: 1, label: 'new' }], 'the new column, not an error')
  // A change made past the cache (another connection, here PGlite directly) is answered once with
  // PostgreSQL's error; the statement is dropped and the next call prepares it anew.
  await pglite.exec(`alter table shape add column size int default 3`)
  const error = await statements.query(`select * from shape where id = $1`, [1]).catch((e: unknown) => e)
  t.equal((error as { code?: string }).code, '0A000')
  t.same((await statements.query(`select * from shape where id = $1`, [1])).rows, [{ id: 1, label: 'new', size: 3 }])
})

t.test('errors leave the cache and the connection usable', async (t) => {
  await pglite.exec(`create table once (id int primary key)`)
  const insert = `insert into once (id) values ($1)`
  await statements.query(insert, [1])
  const duplicate = await statements.query(insert, [1]).catch((e: unknown) => e)
  t.equal((duplicate as { code?: string }).code, '23505')
  await statements.query(insert, [2])
  t.same((await pglite.query(`select id from once order by id`)).rows, [{ id: 1 }, { id: 2 }])

  // A statement that does not parse is never kept, and fails the same way every time.
  const broken = `select $1::int frm nowhere`
  for (let i = 0; i < 2; i++) {
    const error = await statements.query(broken, [1]).catch((e: unknown) => e)
    t.equal((error as { code?: string }).code, '42601', `attempt ${i + 1}: the syntax error, not a missing statement`)
  }

  // Inside a transaction that an error aborted, neither a new nor a kept statement runs; after
  // the rollback both do, and the rolled-back insert is gone.
  const fresh = `select $1::int * 2 as n`
  await pglite.exec('begin')
  await statements.query(insert, [3])
  t.equal(((await statements.query(insert, [1]).catch((e: unknown) => e)) as { code?: string }).code, '23505')
  t.equal(((await statements.query(fresh, [2]).catch((e: unknown) => e)) as { code?: string }).code, '25P02')
  t.equal(((await statements.query(insert, [4]).catch((e: unknown) => e)) as { code?: string }).code, '25P02')
  await pglite.exec('rollback')
  t.same((await statements.query(fresh, [2])).rows, [{ n: 4 }])
  await statements.query(insert, [4])
  t.same((await pglite.query(`select id from once order by id`)).rows, [{ id: 1 }, { id: 2 }, { id: 4 }])
})

t.test('concurrent callers through the dialect each get their own answer', async (t) => {
  const db = fromPglite(pglite).db
  const answers = await Promise.all(
    Array.from({ length: 100 }, (_, i) => sql<{ n: number; s: string }>`select ${i}::int as n, ${`v${i}`}::text as s`.execute(db)),
  )
  answers.forEach((answer, i) => t.same(answer.rows, [{ n: i, s: `v${i}` }]))
  // PGlite's own queries and ours share its query lock: interleaved, none corrupts another.
  const mixed = await Promise.all(
    Array.from({ length: 40 }, (_, i) => (i % 2 ? pglite.query<{ n: number }>(`select $1::int as n`, [i]) : statements.query<{ n: number }>(`select $1::int as n`, [i]))),
  )
  mixed.forEach((answer, i) => t.same(answer.rows, [{ n: i }]))
})
