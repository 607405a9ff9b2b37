// Metrics and tracing, measured (docs/observability.md): POST /decisions through an in-process
// handler with METRICS_TOKEN and OTEL_EXPORTER_OTLP_ENDPOINT set (a span per request, exported to
// a local OTLP/HTTP receiver in a process of its own; /metrics scraped every 15 s), against
// a handler with both off. Each side is a process of its own, bundled as the server is
// (bench/observability-side.ts), on a database of its own.
//
// How it stays fair on a small shared machine: both sides run at the same time on the same core
// (with their PostgreSQL backends), so whatever slows that core slows both alike; the receiver and
// this process keep to the other core. Reported: CPU per
// request of each side (its process and its PostgreSQL backends), and requests served. Goal: the
// sides' CPU per request, off ÷ on, ≥ 0.95 (a cost of at most 5 %).
// DATABASE_URL: memory:// (the default) or a PostgreSQL database to create the sides' databases from;
// PARTS=metrics or PARTS=tracing turns on that part alone; PARTS=none leaves both sides off (A/A).
//   node --import tsx bench/observability.ts [--seconds 1] [--rounds 40]
import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import { canPin, pinTo } from './cpu.ts'
import { createScratchDatabase, ROOT } from './lib.ts'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '1' }, rounds: { type: 'string', default: '40' } } })
const SECONDS = Number(values.seconds)
const ROUNDS = Number(values.rounds)
const TOKEN = 'bench-metrics-token-0123456789abcdef'
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

// The collector: a process that takes each export and counts its bytes, as a local agent would.
const RECEIVER = `let n = 0
const server = require('node:http').createServer((request, response) => {
  request.on('data', (chunk) => (n += chunk.length))
  request.on('end', () => { process.stdout.write(n + '\\n'); response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end() })
})
server.listen(0, '127.0.0.1', () => console.log(server.address().port))`
const receiver = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] })
let exported = 0
const port = await new Promise<string>((resolve) => receiver.stdout!.once('data', (data: Buffer) => resolve(data.toString().trim())))
receiver.stdout!.on('data', (data: Buffer) => (exported = Number(data.toString().trim().split('\n').pop())))

type Side = 'on' | 'off'
interface Running {
  readonly child: ChildProcess
  readonly next: () => Promise<string>
  backends: number[]
}
const cleanups: (() => Promise<unknown> | unknown)[] = [() => receiver.kill()]
async function start(side: Side): Promise<Running> {
  let databaseUrl = 'memory://'
  if (url) {
    const scratch = await createScratchDatabase(url, `steward_obs_${side}`)
    cleanups.push(() => scratch.drop())
    databaseUrl = scratch.url
  }
  // Imported from -e, not run as the script: the bundle holds server.ts, which would take itself for the CLI.
  const child = spawn(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(pathToFileURL(bundle).href)})`], {
    env: { ...process.env, SIDE: side, DATABASE_URL: databaseUrl, COLLECTOR: `http://127.0.0.1:${port}`, METRICS_TOKEN_FOR_BENCH: TOKEN },
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

try {
  const sides: Record<Side, Running> = { on: await start('on'), off: await start('off') }
  if (canPin) pinTo([process.pid, receiver.pid!], 0)
  const totals = { on: { done: 0, node: 0, postgres: 0 }, off: { done: 0, node: 0, postgres: 0 } }
  for (let round = 0; round < ROUNDS; round++) {
    // Backends the pool opened since the last round go to the core too.
    if (canPin) for (const side of Object.values(sides)) pinTo([side.child.pid!, ...side.backends], 1)
    // Each side is told first every other round: the first to start has the core to itself for a moment.
    for (const side of round % 2 === 0 ? [sides.on, sides.off] : [sides.off, sides.on]) side.child.stdin!.write(`round ${SECONDS}\n`)
    const [on, off] = await Promise.all([sides.on.next(), sides.off.next()])
    for (const [name, line] of [['on', on], ['off', off]] as const) {
      const result = JSON.parse(line!) as { done: number; node: number; postgres: number; pids: number[] }
      totals[name].done += result.done
      totals[name].node += result.node
      totals[name].postgres += result.postgres
      sides[name].backends = result.pids
    }
  }
  for (const side of Object.values(sides)) side.child.stdin!.write('quit\n')
  const perRequest = (side: Side) => (totals[side].node + totals[side].postgres) / totals[side].done
  const cpuRatio = perRequest('off') / perRequest('on')
  const ratio = totals.on.done / totals.off.done
  const µs = (side: Side) => `${(totals[side].node / totals[side].done).toFixed(0)}${url ? ` + ${(totals[side].postgres / totals[side].done).toFixed(0)}` : ''} µs`
  const kind = url ? 'PostgreSQL' : 'PGlite (in memory)'
  console.log(
    `32 concurrent requests per side through the in-process handler, ${SECONDS} s rounds, ${ROUNDS} rounds, both sides at once on one core${canPin ? '' : ' (taskset missing: not pinned)'}. Every request continues a sampled trace; ${(exported / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`,
  )
  console.log('| goal | target | reached |\n|---|---|---|')
  console.log(`| POST /decisions with metrics and tracing on, ${kind}: CPU per request, off ÷ on${url ? ' (node + its PostgreSQL backends)' : ''} | ≥ 0.95 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.95 ? '✓' : '✗'}** (on ${µs('on')}, off ${µs('off')}) |`)
  console.log(`| the same, requests served on ÷ off (sharing the core) | ≥ 0.95 | ${ratio.toFixed(2)} (${(totals.on.done / ROUNDS / SECONDS).toFixed(0)} / ${(totals.off.done / ROUNDS / SECONDS).toFixed(0)} req/s) |`)
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup()
}
