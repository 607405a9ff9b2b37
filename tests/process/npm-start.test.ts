// `npm start &` then `kill $!` must stop the server: npm forwards SIGTERM to its child, and the
// script must make that child the server itself (not a shell that dies and leaves it running, as
// when the port stayed taken after npm had exited). The same for `./steward start &`, the README's
// command, where the shell script must become the server (exec). PGlite under a temp DATA_DIR; on
// PostgreSQL too when TEST_DATABASE_URL is set (a scratch database).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import type { Test } from 'tap'
import { createScratchDatabase, freePort } from '../../bench/lib.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
// On a fresh install the first embedded start also makes the initdb template (seconds; more on a
// loaded CI machine): bounded waits, generous on purpose.
t.setTimeout(300_000)

function childrenOf(pid: number): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(name))
    } catch {}
  }
  return out
}

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

async function until<T>(what: string, probe: () => Promise<T | null> | T | null, ms: number): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== null) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

type Exit = { code: number | null; signal: string | null }

/**
 * Spawns `command args` with a free PORT on 127.0.0.1, waits for GET /health 200, and returns the
 * process, its exit, and its child processes as they were then (killed at teardown, so a child
 * left behind by a failing test never outlives it).
 */
async function launch(t: Test, command: string, args: string[], env: Record<string, string>) {
  const port = await freePort()
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }
  delete childEnv.NODE_OPTIONS // tap's loaders are not for the server
  const child = spawn(command, args, { cwd: ROOT, env: childEnv, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  const kids = new Set<number>()
  t.teardown(() => {
    for (const pid of kids) if (alive(pid)) process.kill(pid, 'SIGKILL')
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  await until('GET /health 200', async () => {
    if (child.exitCode !== null) throw new Error(`${command} ${args.join(' ')} exited with ${child.exitCode}: ${stderr}`)
    try {
      const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) })
      await response.arrayBuffer()
      return response.status === 200 ? true : null
    } catch {
      return null
    }
  }, 150_000)
  for (const pid of childrenOf(child.pid!)) kids.add(pid)
  return { child, port, exited, kids: [...kids] }
}

async function stopsOnSigterm(t: Test, env: Record<string, string>): Promise<void> {
  const { child: npm, port, exited, kids } = await launch(t, 'npm', ['start', '--silent'], env)
  t.equal(kids.length, 1, 'npm runs one child')
  const [server] = kids
  t.match(readFileSync(`/proc/${server}/cmdline`, 'utf8').split('\0').slice(0, 5).join(' '), /node cli\/launch\.mjs start/, 'the child is the server, not a shell')

  npm.kill('SIGTERM') // what `kill $!` sends after `npm start &`
  const { code } = await until('npm to exit', () => (npm.exitCode !== null || npm.signalCode !== null ? exited : null), 15_000)
  t.equal(code, 0, 'npm exits 0 after a graceful stop')
  await until('the server process to exit', () => (alive(server!) ? null : true), 15_000)
  t.equal(await portFree(port), true, 'the port is released')
}

t.test('npm start stops on SIGTERM with PGlite', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'steward-npm-start-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  await stopsOnSigterm(t, { DATA_DIR: dataDir, DATABASE_URL: '' })
})

t.test('npm start stops on SIGTERM with PostgreSQL', { skip: process.env.TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
  const scratch = await createScratchDatabase(process.env.TEST_DATABASE_URL!, 'steward_npmstart')
  t.teardown(() => scratch.drop())
  await stopsOnSigterm(t, { DATABASE_URL: scratch.url, DATA_DIR: join(tmpdir(), 'unused') })
})

t.test('./steward start is the server itself: kill $! stops it', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'steward-script-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { child: server, port, exited, kids } = await launch(t, './steward', ['start'], { DATA_DIR: dataDir, DATABASE_URL: '' })
  const cmdline = readFileSync(`/proc/${server.pid}/cmdline`, 'utf8').split('\0').filter(Boolean)
  t.same(cmdline.slice(1), [join(ROOT, 'cli', 'launch.mjs'), 'start'], 'the process started is the server: the shell script exec-ed node')
  t.same(kids, [], 'with no child process')
  server.kill('SIGTERM') // what `kill $!` sends after `./steward start &`
  t.same(await exited, { code: 0, signal: null }, 'a graceful stop, exit 0')
  t.equal(await portFree(port), true, 'the port is released')
})

t.test('./steward works from any directory and through a symlink', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'steward-link-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  symlinkSync(join(ROOT, 'steward'), join(dir, 'steward'))
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env.NODE_OPTIONS
  for (const command of [join(ROOT, 'steward'), join(dir, 'steward')]) {
    const result = spawnSync(command, ['key', '--help'], { cwd: dir, env, encoding: 'utf8' })
    t.equal(result.status, 0, `${command} key --help exits 0`)
    t.match(result.stdout, /^usage: .* key <command>[\s\S]*key create {2}create an API key/, 'and prints the key commands')
  }
})
