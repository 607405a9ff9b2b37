// Metrics and tracing, measured (docs/observability.md): POST /decisions through an in-process
// handler with METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set (a span per request, exported to
// a local OTLP/HTTP receiver in a process of its own; /metrics scraped every 15 s), against
// a handler with both off. Each side is a process of its own, bundled as the server is
// (bench/observability-side.ts), on a database of its own.
//
// How it stays fair on a small shared machine: both sides run at the same time on the same core
// (with their PostgreSQL backends), so whatever slows that core slows both alike; the receiver and
// this process keep to the other core. The rounds are spread over pairs of fresh processes.
// Reported: CPU per request of each side (its process and its PostgreSQL backends), and requests
// served. Goal: the sides' CPU per request, off ÷ on, ≥ 0.95 (a cost of at most 5 %).
// DATABASE_URL: memory:// (the default) or a PostgreSQL database to create the sides' databases
// from; PARTS=metrics or PARTS=tracing turns on that part alone, PARTS=none neither (an A/A run);
// SIDE_NODE_FLAGS adds node flags to the sides (a CPU profile of each: --cpu-prof).
//   node --import tsx bench/observability.ts [--seconds 1] [--rounds 120] [--pairs 8]
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import { canPin, pinTo } from './cpu.ts'
import { createScratchDatabase, ROOT, startReceiver } from './lib.ts'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '1' }, rounds: { type: 'string', default: '120' }, pairs: { type: 'string', default: '8' } } })
const SECONDS = Number(values.seconds)
const ROUNDS = Number(values.rounds)
const PAIRS = Number(values.pairs)
const TOKEN = 'bench-metrics-token-0123456789abcdef'
// SIDE_NODE_FLAGS: node flags for the sides only, such as `--cpu-prof --cpu-prof-dir=/tmp/prof`.
const SIDE_FLAGS = (process.env.SIDE_NODE_FLAGS ?? '').split(' ').filter(Boolean)
const url = process.env.DATABASE_URL && process.env.DATABASE_URL !== 'memory://' ? process.env.DATABASE_URL : null

// The side, bundled as cli/launch.mjs bundles the server (no per-function names, unlike tsx).
const esbuild = await import('esbuild')
const bundle = join(ROOT, '.build', 'observability-side.mjs')
await esbuild.build({
  entryPoints: [join(ROOT, 'bench', 'observability-side.ts')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: `node${process.versions.node.split('.')[0]}`,
  packages: 'external',
  banner: { js: "import { createRequire as __benchRequire } from 'node:module'; const require = __benchRequire(import.meta.url);" },
  logLevel: 'warning',
})

const receiver = await startReceiver()

type Side = 'on' | 'off'
interface Running {
  readonly child: ChildProcess
  readonly next: () => Promise<string>
  backends: number[]
}
const cleanups: (() => Promise<unknown> | unknown)[] = [() => receiver.stop()]
async function start(side: Side): Promise<Running> {
  let databaseUrl = 'memory://'
  if (url) {
    const scratch = await createScratchDatabase(url, `steward_obs_${side}`)
    cleanups.push(() => scratch.drop())
    databaseUrl = scratch.url
  }
  // Imported from -e, not run as the script: the bundle holds server.ts, which would take itself for the CLI.
  const child = spawn(process.execPath, [...SIDE_FLAGS, '--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(bundle).href)})`], {
    env: { ...process.env, SIDE: side, DATABASE_URL: databaseUrl, COLLECTOR: receiver.endpoint, METRICS_TOKEN_FOR_BENCH: TOKEN },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  cleanups.push(() => child.kill())
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const next = async () => {
    const { value, done } = await lines.next()
    if (done) throw new Error(`the ${side} side stopped`)
    return value as string
  }
  const ready = await next()
  return { child, next, backends: ready.split(' ')[1]?.split(',').filter(Boolean).map(Number) ?? [] }
}

interface Counted {
  done: number
  node: number
  postgres: number
}
/** What each pair's sides counted; the totals and each pair's ratio are read from them. */
const pairs: Record<Side, Counted>[] = []

/**
 * One pair of fresh side processes, `rounds` rounds. Two processes of the same code differ by a
 * percent or two in CPU per request (A/A), so the rounds are spread over several pairs and that
 * difference averages out. The two start at the same time: started one after the other, the
 * first read several percent dearer than the second, whichever side it was.
 */
async function pair(rounds: number): Promise<void> {
  const sides = {} as Record<Side, Running>
  const counted: Record<Side, Counted> = { on: { done: 0, node: 0, postgres: 0 }, off: { done: 0, node: 0, postgres: 0 } }
  pairs.push(counted)
  await Promise.all((['on', 'off'] as const).map(async (side) => (sides[side] = await start(side))))
  // Round -1 (3 s) warms both sides up and is not counted: the optimizing compiler is still busy.
  for (let round = -1; round < rounds; round++) {
    // Backends the pool opened since the last round go to the core too.
    if (canPin) for (const side of Object.values(sides)) pinTo([side.child.pid!, ...side.backends], 1)
    // Each side is told first every other round: the first to start has the core to itself for a moment.
    for (const side of round % 2 !== 0 ? [sides.on, sides.off] : [sides.off, sides.on]) side.child.stdin!.write(`round ${round < 0 ? 3 : SECONDS}\n`)
    const [on, off] = await Promise.all([sides.on.next(), sides.off.next()])
    for (const [name, line] of [['on', on], ['off', off]] as const) {
      const result = JSON.parse(line!) as { done: number; node: number; postgres: number; pids: number[] }
      sides[name].backends = result.pids
      if (round < 0) continue
      counted[name].done += result.done
      counted[name].node += result.node
      counted[name].postgres += result.postgres
    }
  }
  for (const side of Object.values(sides)) side.child.stdin!.write('quit\n')
  await Promise.all(Object.values(sides).map((side) => new Promise((resolve) => (side.child.exitCode !== null ? resolve(null) : side.child.once('exit', resolve)))))
}

try {
  if (canPin) pinTo([process.pid, receiver.pid], 0)
  for (let index = 0; index < PAIRS; index++) await pair(Math.ceil(ROUNDS / PAIRS))
  const sum = (side: Side, of: readonly Record<Side, Counted>[]): Counted => ({
    done: of.reduce((total, counted) => total + counted[side].done, 0),
    node: of.reduce((total, counted) => total + counted[side].node, 0),
    postgres: of.reduce((total, counted) => total + counted[side].postgres, 0),
  })
  const totals = { on: sum('on', pairs), off: sum('off', pairs) }
  /** CPU per request, off ÷ on, over `of`. */
  const offOverOn = (of: readonly Record<Side, Counted>[]) => {
    const [on, off] = [sum('on', of), sum('off', of)]
    return (off.node + off.postgres) / off.done / ((on.node + on.postgres) / on.done)
  }
  const cpuRatio = offOverOn(pairs)
  // Each pair's own ratio: their spread shows the noise.
  const pairRatios = pairs.map((counted) => offOverOn([counted]))
  const ratio = totals.on.done / totals.off.done
  const µs = (side: Side) => `${(totals[side].node / totals[side].done).toFixed(0)}${url ? ` + ${(totals[side].postgres / totals[side].done).toFixed(0)}` : ''} µs`
  const kind = url ? 'PostgreSQL' : 'PGlite (in memory)'
  console.log(
    `32 concurrent requests per side through the in-process handler, ${SECONDS} s rounds, ${ROUNDS} rounds over ${PAIRS} pairs of fresh processes, both sides at once on one core${canPin ? '' : ' (taskset missing: not pinned)'}. Every request continues a sampled trace; ${(receiver.exported() / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`,
  )
  console.log('| goal | target | reached |\n|---|---|---|')
  console.log(`| POST /decisions with metrics and tracing on, ${kind}: CPU per request, off ÷ on${url ? ' (node + its PostgreSQL backends)' : ''} | ≥ 0.95 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.95 ? '✓' : '✗'}** (on ${µs('on')}, off ${µs('off')}) |`)
  const mean = pairRatios.reduce((total, r) => total + r, 0) / pairRatios.length
  const spread = Math.sqrt(pairRatios.reduce((total, r) => total + (r - mean) ** 2, 0) / Math.max(1, pairRatios.length - 1) / pairRatios.length)
  console.log(`| the same, pair by pair (mean ± its standard error) | | ${pairRatios.map((r) => r.toFixed(3)).join(' ')} (${mean.toFixed(3)} ± ${spread.toFixed(3)}) |`)
  console.log(`| the same, requests served on ÷ off (sharing the core) | ≥ 0.95 | ${ratio.toFixed(2)} (${(totals.on.done / (Math.ceil(ROUNDS / PAIRS) * PAIRS) / SECONDS).toFixed(0)} / ${(totals.off.done / (Math.ceil(ROUNDS / PAIRS) * PAIRS) / SECONDS).toFixed(0)} req/s) |`)
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup()
}
