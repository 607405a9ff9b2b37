// With PostgreSQL configured, operator commands open the database directly, even while an
// embedded-database server holds DATA_DIR. The embedded-database lock itself is in process-lock.test.ts.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createScratchDatabase } from '../../bench/lib.ts'
import { childEnv, runServerTs, startServerProcess } from '../support/process-support.ts'

t.setTimeout(600_000)
const root = mkdtempSync(join(tmpdir(), 'steward-lock-pg-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))
const env = childEnv(join(root, 'data'))

const postgresUrl = process.env.TEST_DATABASE_URL
t.test('with PostgreSQL, commands open the database directly', { skip: postgresUrl ? false : 'needs PostgreSQL: set TEST_DATABASE_URL' }, async (t) => {
  const url = postgresUrl!
  const scratch = await createScratchDatabase(url, 'steward_lock')
  t.teardown(() => scratch.drop())
  // A PGlite server holds DATA_DIR; a command configured for PostgreSQL never goes to it.
  const server = await startServerProcess(t, env)
  const migrate = await runServerTs(t, ['migrate'], { ...env, DATABASE_URL: scratch.url })
  t.equal(migrate.code, 0, migrate.stderr)
  t.notMatch(migrate.stderr, /carried out/)
  t.match(migrate.stdout, /^applied: /, 'the PostgreSQL database was migrated by the command itself')
  server.child.kill('SIGTERM')
  t.equal((await server.exited).code, 0)
})
