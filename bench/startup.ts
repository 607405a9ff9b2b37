// Start-up cost: time from spawning the server to its first `GET /health` 200, and the resident
// memory of the whole process tree (the process and all its descendants, summed from /proc) once
// it has been idle for a few seconds. First start (empty data directory or database) and restart
// (the same one again), on embedded PGlite and on PostgreSQL, for Node, Bun and Deno, plus
// `npm start` (npm's own process in front of Node) and, on PGlite, the very first start after an
// install (no initdb template cached yet).
//
//   node --import tsx bench/startup.ts [--runtimes node,bun,deno] [--databases pglite,postgres]
//
// PostgreSQL: TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test (a scratch
// database per run, dropped afterwards). Also run by `npm run bench` (section "Start-up").
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isEntryPoint } from '../cli/command.ts'
import { buildMigratedTemplate } from '../database/build-template.ts'
import { createScratchDatabase, freePort, processTree, reachable, ROOT, RUNTIMES, runtimeCommand, type Runtime } from './lib.ts'

/**
 * `./steward start` is the README's command: `node cli/launch.mjs start` (the bundled server) from a
 * shell script; `npm start` runs the same with npm's own process in front.
 */
export type Launcher = Runtime | './steward start' | 'npm start'
export type Phase = 'first start, no template' | 'first start' | 'restart'

export interface StartupRow {
  readonly launcher: Launcher
  readonly database: 'pglite' | 'postgres'
  readonly phase: Phase
  /** Spawn to first /health 200. */
  readonly ms: number
  /** Resident memory of the process tree after IDLE_MS of idling, in MiB. */
  readonly rssMiB: number
  /** The same just after the first 200. */
  readonly rssAtReadyMiB: number
}

const IDLE_MS = 3000
/**
 * Pause after a server has exited, before the next start: the goals are for an idle machine, and the
 * kernel is still tearing down the last process (freeing its memory, writing back its files).
 */
const SETTLE_MS = 1000
const READY_TIMEOUT_MS = 90_000
export const GOALS = { pgliteFirstMs: 2000, pgliteRestartMs: 1000, rssMiB: 300 }
const TEMPLATE_CACHE = join(ROOT, 'node_modules', '.cache', 'steward')

/** Sum of VmRSS over `root` and every descendant (Linux /proc); 0 where /proc is missing. */
export function treeRssMiB(root: number): number {
  let kb = 0
  for (const pid of processTree(root)) {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
      if (match) kb += Number(match[1])
    } catch {}
  }
  return Math.round(kb / 1024)
}

function command(launcher: Launcher): [string, string[]] {
  if (launcher === 'npm start') return [process.platform === 'win32' ? 'npm.cmd' : 'npm', ['start', '--silent']]
  if (launcher === './steward start') return ['./steward', ['start']]
  return runtimeCommand(launcher, 'server.ts', ['start'])
}

/** Starts the server once, waits for /health 200, idles, measures, stops it with SIGTERM. */
async function measureOnce(launcher: Launcher, env: Record<string, string>): Promise<{ ms: number; rssMiB: number; rssAtReadyMiB: number }> {
  const port = await freePort()
  const [cmd, args] = command(launcher)
  const started = performance.now()
  const child = spawn(cmd, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', NO_COLOR: '1' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr = (stderr + chunk).slice(-2000)))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  try {
    let ms = -1
    while (performance.now() - started < READY_TIMEOUT_MS) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${launcher} exited before answering\n${stderr}`)
      try {
        const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) })
        await response.arrayBuffer()
        if (response.status === 200) {
          ms = performance.now() - started
          break
        }
      } catch {
        // Not listening yet.
      }
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    if (ms < 0) throw new Error(`${launcher}: no /health 200 within ${READY_TIMEOUT_MS} ms\n${stderr}`)
    const rssAtReadyMiB = treeRssMiB(child.pid!)
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS))
    return { ms: Math.round(ms), rssMiB: treeRssMiB(child.pid!), rssAtReadyMiB }
  } finally {
    child.kill('SIGTERM')
    const force = setTimeout(() => child.kill('SIGKILL'), 15_000)
    await exited
    clearTimeout(force)
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS))
  }
}

export interface StartupOptions {
  readonly runtimes?: readonly Runtime[]
  readonly databases?: ReadonlyArray<'pglite' | 'postgres'>
  /** PostgreSQL server to create scratch databases on; null skips PostgreSQL. */
  readonly adminUrl?: string | null
  /** Also measure the first start with no cached template (deletes the template cache). */
  readonly coldTemplate?: boolean
  readonly log?: (line: string) => void
  /** Starts per row; each row reports the median (default 3). */
  readonly repeat?: number
}

type Measured = { ms: number; rssMiB: number; rssAtReadyMiB: number }

/** The run with the median time (its memory figures with it). */
function median(runs: readonly Measured[]): Measured {
  return [...runs].sort((a, b) => a.ms - b.ms)[Math.floor(runs.length / 2)]!
}

/** Empties a scratch database again (a new first start on PostgreSQL). */
async function resetScratch(url: string): Promise<void> {
  const pg = (await import('pg')).default
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query('drop schema public cascade; create schema public')
  } finally {
    await client.end()
  }
}

export async function measureStartup(options: StartupOptions = {}): Promise<StartupRow[]> {
  const runtimes = options.runtimes ?? RUNTIMES
  const databases = options.databases ?? ['pglite', 'postgres']
  const log = options.log ?? (() => {})
  const repeat = options.repeat ?? 3
  const rows: StartupRow[] = []
  const launchers: Launcher[] = [...runtimes, ...(runtimes.includes('node') ? (['./steward start', 'npm start'] as const) : [])]
  const record = (row: StartupRow) => {
    rows.push(row)
    log(`${row.launcher} + ${row.database}, ${row.phase}: ${row.ms} ms to first /health 200; tree RSS ${row.rssAtReadyMiB} MiB at ready, ${row.rssMiB} MiB idle`)
  }
  for (const database of databases) {
    if (database === 'postgres' && !options.adminUrl) {
      log('# PostgreSQL skipped: not reachable')
      continue
    }
    for (const launcher of launchers) {
      const work = mkdtempSync(join(tmpdir(), 'steward-startup-'))
      const scratch = database === 'postgres' ? await createScratchDatabase(options.adminUrl!, 'steward_startup') : null
      const env = scratch ? { DATABASE_URL: scratch.url, DATA_DIR: join(work, 'data') } : { DATABASE_URL: '', DATA_DIR: join(work, 'data') }
      try {
        if (database === 'pglite' && launcher === 'node' && options.coldTemplate !== false) {
          rmSync(TEMPLATE_CACHE, { recursive: true, force: true })
          try {
            record({ launcher, database, phase: 'first start, no template', ...(await measureOnce(launcher, env)) })
          } catch (error) {
            log(`not ok - ${launcher} + ${database}, first start, no template: ${(error as Error).message.slice(0, 600)}`)
          }
          rmSync(env.DATA_DIR, { recursive: true, force: true })
          // What `npm install` leaves: the migrated template, for the other launchers' first start.
          await buildMigratedTemplate()
        }
        const first = [await measureOnce(launcher, env)]
        const restart = [await measureOnce(launcher, env)]
        // Medians of REPEAT runs: one start on this machine varies by ±0.3 s.
        for (let run = 1; run < repeat; run++) {
          rmSync(env.DATA_DIR, { recursive: true, force: true })
          if (scratch) await resetScratch(scratch.url)
          first.push(await measureOnce(launcher, env))
          restart.push(await measureOnce(launcher, env))
        }
        record({ launcher, database, phase: 'first start', ...median(first) })
        record({ launcher, database, phase: 'restart', ...median(restart) })
      } catch (error) {
        log(`not ok - ${launcher} + ${database}: ${(error as Error).message.slice(0, 600)}`)
      } finally {
        await scratch?.drop().catch(() => {})
        rmSync(work, { recursive: true, force: true })
      }
    }
  }
  return rows
}

/** The "Start-up" section of bench/RESULTS.md. */
export function startupMarkdown(rows: readonly StartupRow[], repeat = 3): string[] {
  const each = repeat === 1 ? 'one start' : repeat === 2 ? 'the slower of two starts' : `the median of ${repeat} starts`
  const lines = ['## Start-up: time to first /health 200 and memory of the process tree', '']
  lines.push(
    `Spawn to the first \`GET /health\` 200 (which queries the database), then the resident memory (RSS) of the process and all its ` +
      `descendants, summed from /proc, just after that answer and after ${IDLE_MS / 1000} s idle; each row is ${each} (one fresh data directory or database each, then a restart of it), each start ${SETTLE_MS / 1000} s after the previous process exited. "first start" is an empty data directory ` +
      '(PGlite) or an empty database (PostgreSQL); "no template" is the first PGlite start after an install, which runs initdb once ' +
      `and caches its output under node_modules/.cache/steward. Goals on PGlite: first start ≤ ${GOALS.pgliteFirstMs / 1000} s, restart ≤ ` +
      `${GOALS.pgliteRestartMs / 1000} s, idle tree ≤ ${GOALS.rssMiB} MiB. \`node --import tsx bench/startup.ts\` runs this section alone.`,
    '',
  )
  lines.push('| launcher | database | phase | ms to first 200 | RSS at ready (MiB) | RSS idle (MiB) |', '|---|---|---|---:|---:|---:|')
  for (const row of rows) {
    const timeGoal = row.database !== 'pglite' || row.phase === 'first start, no template' ? null : row.phase === 'restart' ? GOALS.pgliteRestartMs : GOALS.pgliteFirstMs
    const ms = timeGoal === null ? `${row.ms}` : `${row.ms} ${row.ms <= timeGoal ? '✓' : '✗'}`
    const rss = row.database === 'pglite' ? `${row.rssMiB} ${row.rssMiB <= GOALS.rssMiB ? '✓' : '✗'}` : `${row.rssMiB}`
    const launcher = row.launcher === 'node' ? 'node --import tsx server.ts (sources)' : row.launcher
    lines.push(`| ${launcher} | ${row.database} | ${row.phase} | ${ms} | ${row.rssAtReadyMiB} | ${rss} |`)
  }
  lines.push('')
  return lines
}

async function main(): Promise<void> {
  const flag = (name: string) => {
    const i = process.argv.indexOf(`--${name}`)
    return i > 0 ? process.argv[i + 1] : undefined
  }
  const runtimes = (flag('runtimes')?.split(',') ?? RUNTIMES) as Runtime[]
  const databases = (flag('databases')?.split(',') ?? ['pglite', 'postgres']) as Array<'pglite' | 'postgres'>
  const candidate = process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test'
  const adminUrl = databases.includes('postgres') && (await reachable(candidate)) ? candidate : null
  const rows = await measureStartup({ runtimes, databases, adminUrl, log: (line) => console.log(line) })
  console.log('')
  console.log(startupMarkdown(rows).join('\n'))
  if (!existsSync('/proc')) console.log('# /proc is missing: memory figures are 0')
}

if (isEntryPoint(import.meta)) await main()
