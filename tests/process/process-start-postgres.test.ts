// Start-up on PostgreSQL: a busy port ends the process with a message naming the port. The
// embedded-database cases are in process-start.test.ts.
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createScratchDatabase } from '../../bench/lib.ts'
import { childEnv, runServerTs } from '../support/process-support.ts'

t.setTimeout(600_000)
const root = mkdtempSync(join(tmpdir(), 'steward-start-pg-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

const postgresUrl = process.env.TEST_DATABASE_URL
t.test('a busy port on PostgreSQL: start exits 1 naming the port', { skip: postgresUrl ? false : 'needs PostgreSQL: set TEST_DATABASE_URL' }, async (t) => {
  const scratch = await createScratchDatabase(postgresUrl!, 'steward_start')
  t.teardown(() => scratch.drop())
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()))
  t.teardown(() => taken.close())
  const port = (taken.address() as { port: number }).port
  const result = await runServerTs(t, ['start'], childEnv(join(root, 'unused'), { PORT: String(port), DATABASE_URL: scratch.url }))
  t.comment(`exited after ${result.ms} ms`)
  t.same({ code: result.code, signal: result.signal }, { code: 1, signal: null }, 'the process ends by itself with 1')
  t.equal(result.stderr, `start failed: port ${port} on 127.0.0.1 is already in use (set PORT to a free port, or stop what listens there)\n`)
})

