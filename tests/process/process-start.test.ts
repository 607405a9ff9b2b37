// Start-up failures end the process with a message that names what to fix (a busy port, an
// unusable DATA_DIR, an unreachable DATABASE_URL with its password masked), and `health --wait`
// lets a script wait for a server started in the background. Real processes. The PostgreSQL
// case is in process-start-postgres.test.ts: this file runs on the PGlite run only.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { childEnv, freePort, runServerTs, spawnServerTs } from '../support/process-support.ts'

// Each first start of the embedded database takes seconds (more on a busy machine).
t.setTimeout(600_000)
const root = mkdtempSync(join(tmpdir(), 'steward-start-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))

t.test('a busy port: start exits 1 naming the port, after closing the database and the lock', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', () => resolve()))
  t.teardown(() => taken.close())
  const port = (taken.address() as { port: number }).port
  const dataDir = join(root, 'busy')
  const result = await runServerTs(t, ['start'], childEnv(dataDir, { PORT: String(port) }))
  t.comment(`exited after ${result.ms} ms`)
  t.same({ code: result.code, signal: result.signal }, { code: 1, signal: null }, 'the process ends by itself with 1')
  t.equal(result.stderr, `start failed: port ${port} on 127.0.0.1 is already in use (set PORT to a free port, or stop what listens there)\n`)
  // The lock was released: a command can open the directory now.
  const migrate = await runServerTs(t, ['migrate'], childEnv(dataDir))
  t.equal(migrate.code, 0, migrate.stderr)
  t.equal(migrate.stdout, 'schema is up to date\n')
})

// On PostgreSQL a failed start also holds a pool, the shared rate-limit store and their timers.
t.test('an unusable DATA_DIR fails start and migrate at once, naming it', async (t) => {
  const file = join(root, 'a-file')
  writeFileSync(file, 'not a directory')
  const cases: Array<[string, string]> = [
    ['/proc/steward-nonexistent', 'cannot create it (ENOENT)'],
    [file, 'it is a file, not a directory'],
    [join(file, 'below'), 'cannot create it (ENOTDIR)'],
  ]
  for (const [dataDir, why] of cases) {
    for (const command of ['start', 'migrate']) {
      const result = await runServerTs(t, [command], childEnv(dataDir))
      t.same({ code: result.code, signal: result.signal }, { code: 1, signal: null }, `${command} on ${dataDir} exits 1 (after ${result.ms} ms)`)
      t.equal(result.stderr, `${command} failed: DATA_DIR ${dataDir} is not usable: ${why}; set DATA_DIR to a directory this user can create and write\n`)
    }
  }
})

t.test('an unreachable DATABASE_URL is named, its password masked', async (t) => {
  const databaseUrl = 'postgres://steward:s3cret-password@127.0.0.1:1/steward'
  for (const command of ['start', 'key list --org 00000000-0000-4000-8000-000000000000']) {
    const result = await runServerTs(t, command.split(' '), childEnv(join(root, 'unused'), { DATABASE_URL: databaseUrl }))
    const name = command.split(' --')[0]
    t.same({ code: result.code, signal: result.signal }, { code: 1, signal: null }, `${name} exits 1 (after ${result.ms} ms)`)
    t.equal(
      result.stderr,
      `${name} failed: cannot use the database at DATABASE_URL=postgres://steward:***@127.0.0.1:1/steward (connect ECONNREFUSED 127.0.0.1:1, ECONNREFUSED): ` +
        'check that PostgreSQL is running and reachable from here, and the host, port, user, password and database name in DATABASE_URL\n',
    )
    t.notOk(result.stderr.includes('s3cret') || result.stdout.includes('s3cret'), 'the password never appears')
  }
})

t.test('health --wait waits for a server started in the background', async (t) => {
  const port = await freePort()
  const env = childEnv(join(root, 'health'), { PORT: String(port), LOG_LEVEL: 'warn' })
  const early = await runServerTs(t, ['health'], env)
  t.equal(early.code, 1, 'without --wait, one check: nothing listens yet')
  t.equal(early.stderr, `not healthy: http://127.0.0.1:${port}/health (ECONNREFUSED)\n`)
  const short = await runServerTs(t, ['health', '--wait', '--timeout', '1'], env)
  t.equal(short.code, 1, '--wait gives up after --timeout')
  t.equal(short.stderr, `not healthy: http://127.0.0.1:${port}/health (ECONNREFUSED) after 1 s\n`)

  // As the quick start does it: the server in the background, then wait, then the first request.
  const waiting = runServerTs(t, ['health', '--wait', '--timeout', '300'], env)
  const server = spawnServerTs(t, ['start'], env)
  const ready = await waiting
  t.equal(ready.code, 0, ready.stderr)
  t.match(ready.stdout, new RegExp(`^healthy: http://127\\.0\\.0\\.1:${port}/health answered 200 after \\d+\\.\\d s\\n$`))
  const response = await fetch(`http://127.0.0.1:${port}/newsletter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'first@example.com' }) })
  t.equal(response.status, 200, 'the first request right after health --wait succeeds')
  t.equal(await response.text(), '{"message":"OK"}')

  const bad = await runServerTs(t, ['health', '--wait', '--timeout', 'soon'], env)
  t.equal(bad.code, 2)
  t.match(bad.stderr, 'usage error: --timeout must be a whole number of seconds from 1 to 3600\n')
  server.child.kill('SIGTERM')
  t.equal((await server.exited).code, 0)
})
