// The embedded database opens without PGlite's array-type query (database/pglite-array-types.ts):
// the list it registers instead must equal what that query finds for the built-in types, and
// arrays must convert both ways exactly as with PGlite's own opening.
import { PGlite, types } from '@electric-sql/pglite'
import * as pgliteModule from '@electric-sql/pglite'
import t from 'tap'
import { BUILTIN_ARRAY_TYPES, openPglite } from '../../database/pglite-array-types.ts'

const ARRAY_TYPES_QUERY = `
  SELECT b.oid, b.typarray FROM pg_catalog.pg_type a LEFT JOIN pg_catalog.pg_type b ON b.oid = a.typelem
  WHERE a.typcategory = 'A' GROUP BY b.oid, b.typarray ORDER BY b.oid`

const reference = await PGlite.create()
const ours = await openPglite(pgliteModule, {})
t.teardown(async () => {
  await reference.close()
  await ours.close()
})

t.test('the registered list is exactly the catalog’s built-in array types', async (t) => {
  const { rows } = await reference.query<{ oid: number; typarray: number }>(ARRAY_TYPES_QUERY)
  const builtin = rows.filter((row) => row.oid < 16384).flatMap((row) => [row.oid, row.typarray])
  t.same(BUILTIN_ARRAY_TYPES, builtin)
  t.equal(BUILTIN_ARRAY_TYPES.length % 2, 0)
  t.ok(BUILTIN_ARRAY_TYPES.length > 200, 'the whole list, not a sample')
})

t.test('array parameters and results convert as with PGlite’s own opening', async (t) => {
  const query = `select $1::text[] as texts, $2::uuid[] as uuids, $3::int[] as ints, $4::bigint[] as bigints,
    $5::timestamptz[] as times, $6::bool[] as bools, array['a,b', 'c"d', null]::text[] as odd, '{{1,2},{3,4}}'::int[] as nested`
  const params = [
    ['x', 'y z', ''],
    ['6f1c1e0e-6b8b-4c8e-9a59-0f5f6f0b7a11'],
    [1, -2, 3],
    [1, 2 ** 40],
    [new Date('2026-11-23T10:00:00.123Z')],
    [true, false],
  ]
  const expected = (await reference.query(query, params)).rows[0]
  const got = (await ours.query(query, params)).rows[0]
  t.same(got, expected)
  t.same((got as { texts: unknown }).texts, ['x', 'y z', ''], 'an array, not PostgreSQL text')
  t.same((got as { odd: unknown }).odd, ['a,b', 'c"d', null])
  t.same((got as { nested: unknown }).nested, [[1, 2], [3, 4]])
  const unnested = await ours.query<{ x: string }>(`select x from unnest($1::text[]) as x`, [['a', 'b']])
  t.same(unnested.rows, [{ x: 'a' }, { x: 'b' }])
  t.equal(typeof types.arraySerializer, 'function')
})

t.test('refreshArrayTypes still asks the catalog (types created later)', async (t) => {
  await ours.exec(`create type mood as enum ('ok', 'sad')`)
  await ours.refreshArrayTypes()
  const { rows } = await ours.query<{ m: string[] }>(`select $1::mood[] as m`, [['ok', 'sad']])
  t.same(rows[0]!.m, ['ok', 'sad'])
})
