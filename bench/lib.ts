// Shared by the bench scripts: start a real Steward server process on a runtime, wait until it
// listens, stop it with SIGTERM; create and drop a throwaway PostgreSQL database.
import { BY_OPERATOR } from '../storage/audit.ts'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { dirname, join } from 'node:path'
import { createServer } from 'node:net'
import pg from 'pg'

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The fields of /proc/<pid>/stat after "pid (command) " (Linux): the state is [0], the parent pid
 * [1], user and system CPU ticks [11] and [12]. The command name may hold spaces and parentheses,
 * so the fields start after its last ')'. Throws when the process is gone or there is no /proc.
 */
export function statFields(pid: number): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')
}

/** The process and all its descendants, parents first (Linux /proc; the process alone elsewhere). */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>()
  let names: string[]
  try {
    names = readdirSync('/proc')
  } catch {
    return [root]
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue
    try {
      const parent = Number(statFields(Number(name))[1])
      const list = children.get(parent)
      if (list) list.push(Number(name))
      else children.set(parent, [Number(name)])
    } catch {
      // The process ended while the list was read.
    }
  }
  const tree = [root]
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]!) ?? []))
  return tree
}

/**
 * Every rate limit of Steward's set so high that no benchmark request is ever answered 429: the
 * benchmarks measure the work of an answered request, not the limiter's refusal.
 */
export const NO_RATE_LIMITS = {
  LEAD_RATE_LIMIT: '1000000000/60',
  API_RATE_LIMIT: '1000000000/60',
  API_ORG_RATE_LIMIT: '1000000000/60',
  LOGIN_RATE_LIMIT: '1000000000/60',
} as const

/** The median (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export type Runtime = 'node' | 'bun' | 'deno'
export const RUNTIMES: readonly Runtime[] = ['node', 'bun', 'deno']

/**
 * Bun and Deno are not in package.json: their npm packages hold one platform's binary each, and a
 * lock file made on one platform then made `npm ci` fail on another. The benchmarks install them on
 * first use into a prefix of their own (.runtimes/, ignored by git), at these exact versions.
 */
export const RUNTIME_PREFIX = join(ROOT, '.runtimes')
export const RUNTIME_PACKAGES: Readonly<Record<'bun' | 'deno', string>> = { bun: 'bun@1.4.5', deno: 'deno@2.9.6' }
const RUNTIME_BIN = join(RUNTIME_PREFIX, 'node_modules', '.bin')

/** Installs Bun or Deno into .runtimes/ unless already there; throws with npm's output on failure. */
export function ensureRuntime(runtime: Runtime): void {
  if (runtime === 'node' || existsSync(join(RUNTIME_BIN, runtime))) return
  mkdirSync(RUNTIME_PREFIX, { recursive: true })
  // Its own package.json: without one, npm would climb to this project's and install there.
  if (!existsSync(join(RUNTIME_PREFIX, 'package.json'))) writeFileSync(join(RUNTIME_PREFIX, 'package.json'), '{ "private": true }\n')
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const installed = spawnSync(npm, ['install', '--prefix', RUNTIME_PREFIX, '--no-audit', '--no-fund', RUNTIME_PACKAGES[runtime]], {
    cwd: RUNTIME_PREFIX,
    encoding: 'utf8',
  })
  if (installed.status !== 0 || !existsSync(join(RUNTIME_BIN, runtime))) {
    throw new Error(`could not install ${RUNTIME_PACKAGES[runtime]} into .runtimes/: ${(installed.stderr || installed.stdout || String(installed.error)).slice(-800)}`)
  }
}

/** The command line that runs a TypeScript entry file on a runtime (Bun and Deno from .runtimes/). */
export function runtimeCommand(runtime: Runtime, script: string, args: readonly string[] = []): [string, string[]] {
  ensureRuntime(runtime)
  switch (runtime) {
    case 'node':
      return [process.execPath, ['--import', 'tsx', script, ...args]]
    case 'bun':
      return [join(RUNTIME_BIN, 'bun'), [script, ...args]]
    case 'deno':
      return [join(RUNTIME_BIN, 'deno'), ['run', '-A', script, ...args]]
  }
}

export interface ServerProcess {
  readonly runtime: Runtime
  readonly url: string
  readonly port: number
  readonly child: ChildProcess
  /** Everything the process wrote, for diagnosis. */
  output(): string
  /** SIGTERM, then the exit code (null + signal name on a forced kill after `graceMs`). */
  stop(graceMs?: number): Promise<{ code: number | null; signal: string | null; ms: number }>
}

/**
 * The command line that starts Steward on a runtime as its users start it: on Node through the
 * launcher (`./steward start`, `npm start`), which runs the esbuild bundle in .build/; on Bun and
 * Deno from the TypeScript sources, which they run natively. Not through tsx on Node: tsx compiles
 * with esbuild's keepNames, which wraps every function created at run time in a naming call, so
 * Steward through tsx spent 9–12 % more CPU on a refused lead post than the bundle does (A/Bs in both orders).
 */
function stewardCommand(runtime: Runtime): [string, string[]] {
  if (runtime === 'node') return [process.execPath, [join(ROOT, 'cli', 'launch.mjs'), 'start']]
  return runtimeCommand(runtime, 'server.ts', ['start'])
}

/**
 * Starts Steward (`stewardCommand`) on a runtime with PORT=0 and waits for its `listening` log
 * line (LOG_LEVEL is forced to info for that line; pass LOG_LEVEL in env to override after start
 * is detected through a probe instead).
 */
export async function startServer(
  runtime: Runtime,
  env: Record<string, string>,
  timeoutMs = 60_000,
  /** Send stdout (the JSON log) to this file instead of a pipe to us (as a log collector would). */
  logFile?: string,
): Promise<ServerProcess> {
  const [cmd, args] = stewardCommand(runtime)
  const level = env.LOG_LEVEL ?? 'info'
  if (!logFile && (level === 'info' || level === 'debug')) return startProcess(runtime, cmd, args, { ...env, LOG_LEVEL: level }, timeoutMs)
  // Quieter levels print no "listening" line: choose the port here and poll it instead.
  const port = await freePort()
  return startProcess(runtime, cmd, args, { ...env, LOG_LEVEL: level, PORT: String(port) }, timeoutMs, `http://127.0.0.1:${port}`, logFile)
}

/** A port nothing listens on right now (the kernel's pick for port 0). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** Any process that prints a JSON line with "msg":"listening" and "url" once it accepts connections. */
export async function startProcess(
  runtime: Runtime,
  cmd: string,
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
  /** Poll this URL for any HTTP answer instead of waiting for a "listening" line. */
  probe?: string,
  logFile?: string,
): Promise<ServerProcess> {
  const logFd = logFile ? openSync(logFile, 'a') : null
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', ...env, NO_COLOR: '1' },
    stdio: ['ignore', logFd ?? 'pipe', 'pipe'],
  })
  if (logFd !== null) closeSync(logFd)
  let out = ''
  let keep = true
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  )
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${runtime}: no "listening" line within ${timeoutMs} ms\n${out.slice(-2000)}`)), timeoutMs)
    const onData = (chunk: Buffer) => {
      // Keep the start of the output (errors, the listening line), not megabytes of access log.
      if (keep) out += chunk.toString()
      if (out.length > 200_000) keep = false
      const match = /"msg":"listening".*?"url":"(http[^"]+)"/.exec(out)
      if (match) {
        clearTimeout(timer)
        resolve(match[1]!)
      }
    }
    child.stdout?.on('data', onData)
    child.stderr!.on('data', onData)
    if (probe) {
      const poll = async () => {
        for (;;) {
          if (child.exitCode !== null || child.signalCode !== null) return
          try {
            await fetch(`${probe}/`, { signal: AbortSignal.timeout(1000) })
            clearTimeout(timer)
            return resolve(probe)
          } catch {
            await new Promise((r) => setTimeout(r, 100))
          }
        }
      }
      void poll()
    }
    void exited.then(({ code, signal }) => {
      clearTimeout(timer)
      reject(new Error(`${runtime}: exited before listening (code ${code}, signal ${signal})\n${out.slice(-2000)}`))
    })
  })
  return {
    runtime,
    url,
    port: Number(new URL(url).port),
    child,
    output: () => out,
    async stop(graceMs = 15_000) {
      const started = Date.now()
      if (child.exitCode !== null || child.signalCode !== null) {
        return { code: child.exitCode, signal: child.signalCode, ms: 0 }
      }
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      const result = await exited
      clearTimeout(timer)
      return { ...result, ms: Date.now() - started }
    },
  }
}

/** Runs a command to completion; resolves with its exit code and combined output. */
export function run(cmd: string, args: readonly string[], env: Record<string, string> = {}, timeoutMs = 120_000): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, output })
    })
  })
}

export function tsx(script: string, args: readonly string[] = [], env: Record<string, string> = {}, timeoutMs?: number) {
  return run(process.execPath, ['--import', 'tsx', script, ...args], env, timeoutMs)
}

export const hasSeed = (): boolean => existsSync(join(ROOT, 'fixtures', 'seed.ts'))

/** A fresh database on the PostgreSQL server of `adminUrl`; `drop()` removes it (forcing out sessions). */
export async function createScratchDatabase(adminUrl: string, prefix = 'steward_rt'): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    name,
    async drop() {
      const client = new pg.Client({ connectionString: adminUrl })
      await client.connect()
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await client.end()
      }
    },
  }
}

/**
 * The PostgreSQL a benchmark uses: the first of BENCH_DATABASE_URL, TEST_DATABASE_URL and
 * postgres://postgres@127.0.0.1:5432/test that answers, or null when none does.
 */
export async function findPostgres(): Promise<string | null> {
  for (const url of [process.env.BENCH_DATABASE_URL, process.env.TEST_DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/test']) {
    if (url && (await reachable(url))) return url
  }
  return null
}

/** Can we reach this PostgreSQL URL within a second or two? */
export async function reachable(url: string | undefined | null): Promise<boolean> {
  if (!url) return false
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query('select 1')
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => {})
  }
}

export interface BenchWorld {
  readonly organizationId: string
  /** An owner key: reads policies and manages keys. */
  readonly key: string
  readonly keyId: string
}

/**
 * One organization with an owner API key and `policies` policies, written through the product's
 * own storage functions. null when the product storage is not there yet.
 */
export async function seedWorld(databaseUrl: string, policies = 10): Promise<BenchWorld | null> {
  let organizations, keys, policyStore
  try {
    organizations = await import('../storage/organizations.ts')
    keys = await import('../storage/keys.ts')
    policyStore = await import('../storage/policies.ts')
  } catch {
    return null
  }
  const { openDatabase } = await import('../database/connect.ts')
  const { migrateToLatest } = await import('../database/migrate.ts')
  const { silentLogger } = await import('../log.ts')
  const handle = await openDatabase({ databaseUrl, dataDir: '', logger: silentLogger })
  try {
    await migrateToLatest(handle.db)
    const now = new Date()
    const org = await organizations.createOrganization(handle.db, `bench ${randomBytes(3).toString('hex')}`, now)
    const { key, secret } = await keys.createApiKey(
      handle.db,
      { organizationId: org.id, name: 'bench', role: 'owner', createdByUserId: null, createdByKeyId: null, expiresAt: null },
      now,
      BY_OPERATOR,
    )
    const keyId = (key as unknown as { id?: string; key_id?: string }).id ?? (key as unknown as { key_id: string }).key_id
    for (let i = 0; i < policies; i++) {
      await policyStore.createPolicy(
        handle.db,
        org.id,
        {
          name: `policy ${i}`,
          description: 'benchmark policy',
          effect: i % 2 ? 'allow' : 'deny',
          agents: ['agent-a'],
          actions: ['read', 'write'],
          resources: [`doc/${i}`],
          condition: null,
          approval: null,
          mode: 'enforce',
          enabled: true,
        },
        `key:${keyId}`,
        now,
        BY_OPERATOR,
      )
    }
    return { organizationId: org.id, key: secret, keyId }
  } finally {
    await handle.close()
  }
}

/** An OTLP collector stand-in: a process of its own that takes each export and counts its bytes. */
export interface Receiver {
  /** Its base URL, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string
  readonly pid: number
  /** Bytes received so far. */
  exported(): number
  stop(): void
}

const RECEIVER = `let n = 0
const server = require('node:http').createServer((request, response) => {
  request.on('data', (chunk) => (n += chunk.length))
  request.on('end', () => { process.stdout.write(n + '\\n'); response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end() })
})
server.listen(0, '127.0.0.1', () => console.log(server.address().port))`

/** Starts a Receiver: out of the bench's own process, as a local agent would be, so it never waits on the load generator. */
export async function startReceiver(): Promise<Receiver> {
  const child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] })
  let exported = 0
  const port = await new Promise<string>((resolve) => child.stdout!.once('data', (data: Buffer) => resolve(data.toString().trim())))
  child.stdout!.on('data', (data: Buffer) => (exported = Number(data.toString().trim().split('\n').pop())))
  return { endpoint: `http://127.0.0.1:${port}`, pid: child.pid!, exported: () => exported, stop: () => void child.kill() }
}
