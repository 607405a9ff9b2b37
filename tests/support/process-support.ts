// Real `server.ts` processes for the lock and start-up tests: spawn with a temp DATA_DIR on
// 127.0.0.1, wait for the `listening` line, run operator commands, kill everything in teardown.
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { Test } from 'tap'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** Upper bound for one operator command or failing start in these tests: alive after it, it has hung. */
export const PROCESS_LIMIT_MS = 90_000

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** Wall time from spawn to exit, for the test's comments (never asserted). */
  readonly ms: number
}

export interface Spawned {
  readonly child: ChildProcess
  readonly exited: Promise<Exit>
  output(): { stdout: string; stderr: string }
}

/** Env for a child: a temp DATA_DIR, loopback, no DATABASE_URL unless `extra` gives one. */
export function childEnv(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', PASSWORD_HASH_COST: '10', LEAD_RATE_LIMIT: '1000/60' }
  delete env.DATABASE_URL
  delete env.NODE_OPTIONS
  delete env.STEWARD_PASSWORD
  return { ...env, ...extra }
}

/** `limitMs`: a process still alive then has hung; it is killed so the test fails instead of stalling. */
export function spawnServerTs(t: Test, args: readonly string[], env: NodeJS.ProcessEnv, stdin?: string, limitMs: number | null = null): Spawned {
  const started = Date.now()
  const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts', ...args], { cwd: ROOT, env, stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  if (stdin !== undefined) child.stdin!.end(stdin)
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk) => (stdout += chunk))
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise<Exit>((resolve) => {
    const limit = limitMs === null ? undefined : setTimeout(() => child.kill('SIGKILL'), limitMs)
    child.once('exit', (code, signal) => {
      clearTimeout(limit)
      // Let the pipes drain before reporting.
      setImmediate(() => resolve({ code, signal, stdout, stderr, ms: Date.now() - started }))
    })
  })
  return { child, exited, output: () => ({ stdout, stderr }) }
}

/** Runs an operator command to completion. */
export function runServerTs(t: Test, args: readonly string[], env: NodeJS.ProcessEnv, stdin?: string): Promise<Exit> {
  return spawnServerTs(t, args, env, stdin, PROCESS_LIMIT_MS).exited
}

export interface RunningServer extends Spawned {
  readonly url: string
  readonly pid: number
}

/** Spawns `server.ts start` and resolves once it logs `listening`. */
export async function startServerProcess(t: Test, env: NodeJS.ProcessEnv): Promise<RunningServer> {
  const spawned = spawnServerTs(t, ['start'], env)
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = ''
    spawned.child.stdout!.on('data', (chunk) => {
      buffer += chunk
      for (let newline = buffer.indexOf('\n'); newline >= 0; newline = buffer.indexOf('\n')) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>
          if (parsed.msg === 'listening') resolve(String(parsed.url))
        } catch {
          // Not a log line.
        }
      }
    })
    void spawned.exited.then((exit) => reject(new Error(`server exited with ${exit.code} before listening: ${exit.stderr}`)))
  })
  return { ...spawned, url, pid: spawned.child.pid! }
}

/** A port nothing listens on right now: the benchmarks' helper. */
export { freePort } from '../../bench/lib.ts'
