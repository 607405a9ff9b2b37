// One process at a time on an embedded data directory: a second server fails at once naming the
// holder, a crashed holder's lock is recovered, and operator commands on a running server's
// directory are carried out by that server (visible through its HTTP API at once). Real
// processes on a temp DATA_DIR. That PostgreSQL mode keeps opening the database directly is in
// process-lock-postgres.test.ts: this file runs on the PGlite run only.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { PassThrough } from 'node:stream'
import { DataDirHeldError, lockDataDir, SOCKET_NAME } from '../../cli/lock.ts'
import { runCli } from '../../cli/main.ts'
import { captured } from '../support/helpers.ts'
import { childEnv, runServerTs, startServerProcess, type Exit } from '../support/process-support.ts'

// Each first start of the embedded database takes seconds (more on a busy machine).
t.setTimeout(600_000)
const root = mkdtempSync(join(tmpdir(), 'steward-lock-'))
t.teardown(() => rmSync(root, { recursive: true, force: true }))
const dataDir = join(root, 'data')
const env = childEnv(dataDir)
const PASSWORD = 'correct horse battery staple'

t.test('a running server holds the directory; commands are carried out by it', async (t) => {
  const server = await startServerProcess(t, env)
  const socket = join(dataDir, SOCKET_NAME)
  t.equal(statSync(socket).mode & 0o777, 0o600, 'the lock socket is owner-only')
  t.equal(statSync(dataDir).mode & 0o777, 0o700, 'a data directory the server created is owner-only')

  const second = await runServerTs(t, ['start'], { ...env })
  t.comment(`second server exited after ${second.ms} ms`)
  t.equal(second.code, 1, 'a second server on the same directory exits 1')
  t.match(second.stderr, `start failed: DATA_DIR ${dataDir} is in use by a running Steward server (pid ${server.pid}, since `)
  t.match(second.stderr, `stop that server first (kill ${server.pid})`)
  t.notOk(second.stdout.includes('"msg":"listening"'), 'the second server never listened')

  const carried = `carried out by the running server (pid ${server.pid})\n`
  const org = await runServerTs(t, ['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { ...env, STEWARD_PASSWORD: PASSWORD })
  t.equal(org.code, 0, org.stderr)
  t.equal(org.stderr, `${carried}created organization "Acme" with owner ops@acme.example\n`)
  const orgId = org.stdout.trim()
  t.match(orgId, /^[0-9a-f-]{36}$/)

  const key = await runServerTs(t, ['key', 'create', '--org', orgId, '--role', 'admin', '--name', 'ops'], env)
  t.equal(key.code, 0, key.stderr)
  t.match(key.stderr, carried)
  const secret = key.stdout.trim()
  t.match(secret, /^stw_key_[a-z2-7]{39}$/)
  const policies = await fetch(`${server.url}/policies?organization_id=${orgId}`, { headers: { authorization: `Bearer ${secret}` } })
  t.equal(policies.status, 200, 'the key created through the running server works on it at once')
  t.same(await policies.json(), { policies: [], next_cursor: null })

  // A password from standard input travels to the server only when the command asks for it.
  const user = await runServerTs(t, ['user', 'add', '--org', orgId, '--email', 'dev@acme.example', '--role', 'viewer'], env, 'another long password\n')
  t.equal(user.code, 0, user.stderr)
  t.equal(user.stdout, `dev@acme.example is viewer of ${orgId}\n`)
  const login = await fetch(`${server.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dev@acme.example', password: 'another long password' }) })
  t.equal(login.status, 200, 'the user added through the running server logs in')
  await login.body?.cancel()

  const lead = await fetch(`${server.url}/newsletter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'reader@example.com' }) })
  t.equal(lead.status, 200)
  await lead.body?.cancel()
  const exported = await runServerTs(t, ['leads', 'export', '--format', 'ndjson'], env)
  t.equal(exported.code, 0, exported.stderr)
  t.equal(exported.stderr, carried)
  t.same(exported.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { email: string }).email), ['reader@example.com'], 'the export sees the lead the server just stored')

  const output = join(root, 'export.csv')
  const toFile = await runServerTs(t, ['leads', 'export', '--output', output], env)
  t.equal(toFile.code, 0, toFile.stderr)
  t.equal(toFile.stderr, `${carried}wrote 1 leads to ${output}\n`)
  t.ok(existsSync(output))

  const migrate = await runServerTs(t, ['migrate'], env)
  t.equal(migrate.code, 0, migrate.stderr)
  t.equal(migrate.stdout, 'schema is up to date\n', 'the server migrated at start')

  const usage = await runServerTs(t, ['key', 'create', '--org', orgId, '--role', 'root'], env)
  t.equal(usage.code, 2, 'a usage error stops the command before it reaches the server')
  t.equal(usage.stderr.split('\n')[0], 'usage error: --role must be owner, admin, manager, member or viewer')
  t.notMatch(usage.stderr, /carried out/)

  // kill -9: the socket file stays, nobody answers on it; the next server takes the directory.
  server.child.kill('SIGKILL')
  await server.exited
  t.ok(existsSync(socket), 'a crash leaves the socket file behind')
  const next = await startServerProcess(t, env)
  t.not(next.pid, server.pid)
  const again = await fetch(`${next.url}/newsletter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'reader@example.com' }) })
  t.equal(again.status, 409, 'the restarted server has the data of the killed one')
  await again.body?.cancel()
  next.child.kill('SIGTERM')
  t.equal((await next.exited).code, 0)
  t.notOk(existsSync(socket), 'a clean stop removes the socket file')

  const direct = await runServerTs(t, ['key', 'list', '--org', orgId], env)
  t.equal(direct.code, 0, direct.stderr)
  t.notMatch(direct.stderr, /carried out/, 'with no server the command opens the directory itself')
  t.match(direct.stdout, /^key_id +prefix +role +name +creator +expires +last_used +state\n[0-9a-f-]{36} +stw_key_[a-z2-7]{6} +admin +ops +operator +never +/)
})

/** An operator command run in this process (its client side), with its output and exit code. */
async function command(argv: readonly string[], env: NodeJS.ProcessEnv, stdin?: NodeJS.ReadableStream & { isTTY?: boolean }): Promise<{ code: number; stdout: string; stderr: string }> {
  const { code, out, err } = await captured((io) => runCli(argv, env, { ...io, ...(stdin ? { stdin } : {}) }))
  return { code, stdout: out, stderr: err }
}

/** A terminal stand-in: isTTY, and a setRawMode that records its calls (raw mode: nothing echoed). */
function fakeTerminal(): PassThrough & { isTTY: true; setRawMode(mode: boolean): void; rawModes: boolean[] } {
  const rawModes: boolean[] = []
  return Object.assign(new PassThrough(), { isTTY: true as const, rawModes, setRawMode: (mode: boolean) => void rawModes.push(mode) })
}

async function status(url: string, secret: string): Promise<number> {
  const response = await fetch(url, { headers: { authorization: `Bearer ${secret}` } })
  await response.body?.cancel()
  return response.status
}

t.test('credentials changed through the running server hold from its very next request', async (t) => {
  const dir = join(root, 'revoke')
  const env = childEnv(dir)
  const server = await startServerProcess(t, env)
  const carried = `carried out by the running server (pid ${server.pid})\n`
  const org = await command(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { ...env, STEWARD_PASSWORD: PASSWORD })
  t.equal(org.code, 0, org.stderr)
  const orgId = org.stdout.trim()
  const policies = `${server.url}/policies?organization_id=${orgId}`

  const created = async (): Promise<{ id: string; secret: string }> => {
    const key = await command(['key', 'create', '--org', orgId, '--role', 'admin'], env)
    t.equal(key.code, 0, key.stderr)
    return { id: /created key ([0-9a-f-]{36}) /.exec(key.stderr)![1]!, secret: key.stdout.trim() }
  }

  // Used once, the key sits in the server's credential cache; the revoke must reach that cache.
  const revoked = await created()
  t.equal(await status(policies, revoked.secret), 200, 'the new key works (and is now cached)')
  t.equal(await status(policies, revoked.secret), 200)
  const revoke = await command(['key', 'revoke', '--key', revoked.id], env)
  t.equal(revoke.code, 0, revoke.stderr)
  t.equal(revoke.stderr, carried)
  t.equal(revoke.stdout, `revoked ${revoked.id}\n`)
  t.equal(await status(policies, revoked.secret), 401, 'the revoked key fails on the very next request')

  const rotated = await created()
  t.equal(await status(policies, rotated.secret), 200)
  const rotate = await command(['key', 'rotate', '--key', rotated.id], env)
  t.equal(rotate.code, 0, rotate.stderr)
  t.equal(await status(policies, rotated.secret), 401, 'a key rotated without grace fails on the very next request')
  t.equal(await status(policies, rotate.stdout.trim()), 200, 'its replacement works')

  // A demoted member's session loses the old role at once.
  const admin = await command(['user', 'add', '--org', orgId, '--email', 'lead@acme.example', '--role', 'admin'], { ...env, STEWARD_PASSWORD: PASSWORD })
  t.equal(admin.code, 0, admin.stderr)
  const login = await fetch(`${server.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'lead@acme.example', password: PASSWORD }) })
  t.equal(login.status, 200)
  const session = ((await login.json()) as { access_token: string }).access_token
  const members = `${server.url}/members?organization_id=${orgId}`
  t.equal(await status(members, session), 200, 'an admin lists the members (the session is now cached)')
  const demote = await command(['user', 'add', '--org', orgId, '--email', 'lead@acme.example', '--role', 'viewer'], env)
  t.equal(demote.code, 0, demote.stderr)
  t.equal(await status(members, session), 403, 'demoted to viewer, the session is refused on the very next request')

  server.child.kill('SIGTERM')
  t.equal((await server.exited).code, 0)
})

t.test('a password asked for by the running server is read on the operator\'s terminal without echo', async (t) => {
  const dir = join(root, 'prompt')
  const env = childEnv(dir)
  const server = await startServerProcess(t, env)
  const org = await command(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { ...env, STEWARD_PASSWORD: PASSWORD })
  t.equal(org.code, 0, org.stderr)
  const orgId = org.stdout.trim()

  const terminal = fakeTerminal()
  terminal.write('typed secret phrase\rtyped secret phrase\r')
  const added = await command(['user', 'add', '--org', orgId, '--email', 'dev@acme.example', '--role', 'viewer'], env, terminal)
  t.equal(added.code, 0, added.stderr)
  t.equal(added.stderr, `carried out by the running server (pid ${server.pid})\npassword: \npassword again: \n`, 'the prompts, and nothing typed')
  t.same(terminal.rawModes, [true, false, true, false], 'the terminal was in raw mode (no echo) while each password was typed')
  t.equal(added.stdout, `dev@acme.example is viewer of ${orgId}\n`)
  const login = await fetch(`${server.url}/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dev@acme.example', password: 'typed secret phrase' }) })
  t.equal(login.status, 200, 'the password typed at the terminal is the account\'s')
  await login.body?.cancel()

  const cancelled = fakeTerminal()
  cancelled.write('half typ\u0003')
  const stopped = await command(['user', 'add', '--org', orgId, '--email', 'new@acme.example', '--role', 'viewer'], env, cancelled)
  t.equal(stopped.code, 130, 'Ctrl-C at the prompt ends the command with 130, as when run alone')
  t.equal(stopped.stderr, `carried out by the running server (pid ${server.pid})\npassword: \nuser add failed: cancelled\n`)
  t.same(cancelled.rawModes, [true, false], 'the terminal is restored')

  const differ = fakeTerminal()
  differ.write('first phrase here\rsecond phrase here\r')
  const mismatch = await command(['user', 'add', '--org', orgId, '--email', 'new@acme.example', '--role', 'viewer'], env, differ)
  t.equal(mismatch.code, 2)
  t.match(mismatch.stderr, 'user add failed: the two passwords typed differ; nothing was changed\n')

  server.child.kill('SIGTERM')
  t.equal((await server.exited).code, 0)
})

t.test('two processes finding the same stale socket: exactly one takes the directory', async (t) => {
  const dir = join(root, 'stale')
  const { mkdirSync } = await import('node:fs')
  mkdirSync(dir)
  // A process that binds the socket and dies by SIGKILL leaves a stale socket file.
  await new Promise<void>((resolve) => {
    const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(join(dir, SOCKET_NAME))}, () => process.kill(process.pid, 'SIGKILL'))`])
    child.once('exit', () => resolve())
  })
  t.ok(existsSync(join(dir, SOCKET_NAME)))
  const results = await Promise.allSettled([lockDataDir(dir, 'command'), lockDataDir(dir, 'command'), lockDataDir(dir, 'command')])
  const won = results.filter((r) => r.status === 'fulfilled')
  const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
  t.equal(won.length, 1, 'one lock')
  t.equal(lost.length, 2)
  for (const r of lost) {
    t.type(r.reason, DataDirHeldError)
    t.match((r.reason as Error).message, `is in use by a running operator command (pid ${process.pid}`)
  }
  await (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof lockDataDir>>>).value.release()
  const after = await lockDataDir(dir, 'command')
  t.pass('released: the directory can be locked again')
  await after.release()
})

t.test('a lock reports once when its socket file is removed or replaced, and not after release', async (t) => {
  const { mkdirSync, renameSync, unlinkSync } = await import('node:fs')
  const { createServer } = await import('node:net')
  // Waits for a report, at most 10 s: a watch that never reports fails the assertion after it.
  const waitFor = (reasons: string[]) => new Promise<void>((resolve) => {
    const deadline = Date.now() + 10_000
    const poll = setInterval(() => (reasons.length > 0 || Date.now() > deadline) && (clearInterval(poll), resolve()), 5)
  })

  const removedDir = join(root, 'watch-removed')
  mkdirSync(removedDir)
  const removed = await lockDataDir(removedDir, 'command')
  const removedReasons: string[] = []
  removed.watch((reason) => removedReasons.push(reason))
  await new Promise((wake) => setTimeout(wake, 50))
  t.same(removedReasons, [], 'a lock whose socket is its own reports nothing')
  unlinkSync(join(removedDir, SOCKET_NAME))
  await waitFor(removedReasons)
  await new Promise((wake) => setTimeout(wake, 1_200)) // longer than two interval checks
  t.same(removedReasons, [`its lock socket ${join(removedDir, SOCKET_NAME)} was removed (the data directory was deleted or moved)`], 'reported once')
  await removed.release()

  // Another process's socket renamed over the name: the file never goes missing, its inode changes.
  const replacedDir = join(root, 'watch-replaced')
  mkdirSync(replacedDir)
  const replaced = await lockDataDir(replacedDir, 'server')
  const replacedReasons: string[] = []
  replaced.watch((reason) => replacedReasons.push(reason))
  const other = createServer()
  const otherPath = join(replacedDir, 'other.sock')
  await new Promise<void>((resolve) => other.listen(otherPath, resolve))
  t.teardown(() => new Promise<void>((resolve) => other.close(() => resolve())))
  renameSync(otherPath, join(replacedDir, SOCKET_NAME))
  await waitFor(replacedReasons)
  t.same(replacedReasons, [`its lock socket ${join(replacedDir, SOCKET_NAME)} was replaced by another process's`])
  await replaced.release()
  t.ok(existsSync(join(replacedDir, SOCKET_NAME)), 'the release left the other process\'s socket in place')

  const releasedDir = join(root, 'watch-released')
  mkdirSync(releasedDir)
  const released = await lockDataDir(releasedDir, 'command')
  const releasedReasons: string[] = []
  released.watch((reason) => releasedReasons.push(reason))
  await released.release()
  t.notOk(existsSync(join(releasedDir, SOCKET_NAME)), 'the release removed its socket')
  await new Promise((wake) => setTimeout(wake, 1_200))
  t.same(releasedReasons, [], 'a released lock is no longer watched: its own removal is not a loss')
})

// A server's embedded database opens its files by path: after its directory is deleted or moved,
// writes would land in whatever directory takes the name. The server stops at once instead.
const LOST = (dir: string, what: string) => `steward: DATA_DIR ${dir} is no longer this process's: its lock socket ${join(dir, SOCKET_NAME)} was ${what}; stopping at once without another write. Start Steward again on the directory you mean to keep\n`

/** The server's exit, or SIGKILL after `ms` (a server still running then fails the exit code check). */
async function exitWithin(server: { child: { kill(signal: NodeJS.Signals): boolean }; exited: Promise<Exit> }, ms = 30_000): Promise<Exit> {
  const timer = setTimeout(() => server.child.kill('SIGKILL'), ms)
  try {
    return await server.exited
  } finally {
    clearTimeout(timer)
  }
}

async function postLead(url: string, email: string): Promise<number> {
  const response = await fetch(`${url}/newsletter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }) })
  await response.body?.cancel()
  return response.status
}

async function exportedEmails(t: Test, env: NodeJS.ProcessEnv): Promise<string[]> {
  const exported = await runServerTs(t, ['leads', 'export', '--format', 'ndjson'], env)
  t.equal(exported.code, 0, exported.stderr)
  return exported.stdout.trim().split('\n').filter(Boolean).map((line) => (JSON.parse(line) as { email: string }).email).sort()
}

t.test('a server whose data directory is moved away stops at once; the moved directory keeps every lead', async (t) => {
  const { renameSync } = await import('node:fs')
  const dir = join(root, 'moved')
  const server = await startServerProcess(t, childEnv(dir))
  for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) t.equal(await postLead(server.url, email), 200)
  const moved = join(root, 'moved-away')
  renameSync(dir, moved)
  const exit = await exitWithin(server)
  t.equal(exit.code, 1, 'the server exits 1')
  t.equal(exit.stderr.replace(/^npm warn .*\n/gm, ''), LOST(dir, 'removed (the data directory was deleted or moved)'))
  const lines = exit.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
  t.match(lines.at(-1), { level: 'error', msg: 'data directory lost', data_dir: dir, reason: `its lock socket ${join(dir, SOCKET_NAME)} was removed (the data directory was deleted or moved)` })
  t.notOk(lines.some((line) => line.msg === 'shutting down' || line.msg === 'stopped'), 'no graceful stop: closing the database would write')
  t.notOk(existsSync(dir), 'nothing re-created the old path')
  t.same(await exportedEmails(t, childEnv(moved)), ['a@example.com', 'b@example.com', 'c@example.com'], 'the moved directory opens with every acknowledged lead')
})

t.test('a data directory deleted and re-created under a running server: the old server stops, the new one keeps its data', async (t) => {
  const dir = join(root, 'recreated')
  const env = childEnv(dir)
  const old = await startServerProcess(t, env)
  t.equal(await postLead(old.url, 'old@example.com'), 200)
  rmSync(dir, { recursive: true, force: true })
  // Started at once: the new server creates a new database at the same path.
  const next = await startServerProcess(t, env)
  const exit = await exitWithin(old)
  t.equal(exit.code, 1, 'the old server exits 1')
  t.match(exit.stderr, `steward: DATA_DIR ${dir} is no longer this process's: its lock socket ${join(dir, SOCKET_NAME)} was `)
  t.equal(await postLead(next.url, 'new@example.com'), 200)
  next.child.kill('SIGTERM')
  t.equal((await next.exited).code, 0, 'the new server stops cleanly')
  t.same(await exportedEmails(t, env), ['new@example.com'], 'the re-created directory opens, with the new server\'s lead only')
})
