// A new embedded data directory is a copy of the template made at install time, with every
// migration applied; a checkout whose migrations differ from the template's falls back to the
// initdb template and migrates as usual.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import t from 'tap'
import { silentLogger } from '../../log.ts'
import { buildMigratedTemplate } from '../../database/build-template.ts'
import { openDatabase, pgliteStartParams } from '../../database/connect.ts'
import { migrateToLatest } from '../../database/migrate.ts'
import { migrations } from '../../database/migrations/index.ts'
import { listDecisionPartitions } from '../../database/partitions.ts'
import { createFromTemplate } from '../../database/pglite-template.ts'

const root = mkdtempSync(join(tmpdir(), 'steward-template-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

t.test('a new data directory opens already migrated from the install-time template', async (t) => {
  const template = await buildMigratedTemplate()
  t.ok(existsSync(join(template, 'PG_VERSION')), 'the template exists')
  const handle = await openDatabase({ databaseUrl: null, dataDir: join(root, 'a'), logger: silentLogger })
  t.teardown(() => handle.close())
  const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(handle.db)
  t.same(rows.map((row) => row.name), Object.keys(migrations).sort())
  t.same(await migrateToLatest(handle.db), [], 'nothing is left to migrate')
  // Made at install time, so that a first start in that month finds them instead of making them.
  const partitions = await listDecisionPartitions(handle.db)
  t.equal(partitions.length, 2, 'the decision log partitions of the install month and the next')
  t.equal(partitions[1]!.start.getTime(), partitions[0]!.end.getTime(), 'consecutive months')
  t.notOk(existsSync(join(root, 'a', '.steward-initializing')), 'the directory is marked finished')
})

t.test('the embedded database keeps its shared memory small (PGlite zeroes all of it on every start)', async (t) => {
  const handle = await openDatabase({ databaseUrl: null, dataDir: join(root, 'memory'), logger: silentLogger })
  t.teardown(() => handle.close())
  const { rows } = await sql<{ buffers: string; shared: string }>`select current_setting('shared_buffers') as buffers, current_setting('shared_memory_size') as shared`.execute(handle.db)
  t.equal(rows[0]!.buffers, '4MB', 'a 4 MB buffer cache')
  // PostgreSQL's default (128 MB) made it 136 MB; 16 MB made it 24 MB.
  t.ok(Number.parseInt(rows[0]!.shared, 10) <= 12, `shared memory ${rows[0]!.shared}, at most 12 MB`)
})

t.test('other migrations than the template was made for: the initdb template, then migrations', async (t) => {
  const { PGlite } = await import('@electric-sql/pglite')
  const startParams = pgliteStartParams(PGlite.defaultStartParams)
  const dataDir = join(root, 'b')
  await createFromTemplate(dataDir, startParams, [...Object.keys(migrations), '9999-12-31T00-not-shipped'])
  const pglite = await PGlite.create({ dataDir, startParams })
  t.teardown(() => pglite.close())
  const { rows } = await pglite.query<{ n: number }>(`select count(*)::int as n from pg_tables where tablename = 'kysely_migration'`)
  t.equal(rows[0]!.n, 0, 'no schema was copied')
})
