// The HTTP pipeline: what Steward costs on requests it answers without database work (a path no
// route has, a lead post missing its fields, a key not of the key format) and on GET /health
// (one shared database check), against the Fastify reference (fastify-reference.ts: Fastify 5 +
// pg, the same checks and headers) and a bare fetch function on Steward's own adapter
// (targets/bare-fetch.ts: no router, no middleware, the same answers). Goals: 404, 400 and 401
// at ≥ 1.0 × Fastify's throughput; the 404 at ≥ 0.8 × the bare function's; /health at ≥ 0.9 ×
// the bare function's. Beside them, each server's CPU time per request, which the load generator
// sharing the two cores cannot cap, and the median latency at a modest fixed rate.
//
//   node --import tsx bench/pipeline.ts [--seconds 2] [--rounds 3] [--connections 10] [--rate 1000]
//
// Fastify needs PostgreSQL (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/test; a scratch database, dropped at the end); without it
// Steward runs on PGlite and only the bare function is compared. Prints a Markdown section.
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import os from 'node:os'
import { parseScriptArgs } from '../cli/command.ts'
import { createScratchDatabase, findPostgres, NO_RATE_LIMITS, runtimeCommand, startProcess, startServer, type ServerProcess } from './lib.ts'
import { fixedRateLatency, maxThroughput, PIPELINE_REFUSALS, type Latency, type RequestSpec, type Throughput } from './load.ts'
import { alternatingRounds, fmt, medianCpu, medianLatency, medianRps, ratio, statusesOf, verdict } from './report.ts'

const options = parseScriptArgs({ seconds: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' }, rate: { type: 'string' } })
const count = (name: keyof typeof options, fallback: number): number => {
  const value = Number(options[name] ?? fallback)
  if (!(value > 0)) {
    process.stderr.write(`usage error: --${name} must be a positive number\n`)
    process.exit(2)
  }
  return value
}
const SECONDS = count('seconds', 2)
const ROUNDS = Math.round(count('rounds', 3))
const CONNECTIONS = Math.round(count('connections', 10))
/** The modest fixed rate of the latency probes, far below every server's maximum. */
const RATE = count('rate', 1000)
const WARMUP_SECONDS = Math.min(1, SECONDS)
const PROBE_SECONDS = Math.min(1, SECONDS)

type Target = 'steward' | 'steward-info' | 'fastify' | 'bare-fetch'
type Route = 'health' | keyof typeof PIPELINE_REFUSALS
const ROUTES: Record<Route, { name: string; spec: RequestSpec; status: number }> = {
  health: { name: 'GET /health (database check)', spec: { method: 'GET', path: '/health' }, status: 200 },
  'notfound-404': { name: 'GET unknown path → 404', spec: PIPELINE_REFUSALS['notfound-404'], status: 404 },
  'bad-body-400': { name: 'POST /demo-request, invalid body → 400', spec: PIPELINE_REFUSALS['bad-body-400'], status: 400 },
  'bad-key-401': { name: 'GET /policies, malformed key → 401', spec: PIPELINE_REFUSALS['bad-key-401'], status: 401 },
}

const adminUrl = await findPostgres()
const scratch = adminUrl ? await createScratchDatabase(adminUrl, 'steward_pipeline') : null
const dataDir = join(os.tmpdir(), `steward-bench-pipeline-${process.pid}`)
const servers = new Map<Target, ServerProcess>()
const lines: string[] = []
let bad = false
try {
  const env = { DATABASE_URL: scratch?.url ?? '', DATA_DIR: scratch ? '' : dataDir, ...NO_RATE_LIMITS }
  servers.set('steward', await startServer('node', { ...env, LOG_LEVEL: 'warn' }))
  // LOG_LEVEL=info is the default: one access-log line per request, here to a file as a collector would take it.
  if (scratch) servers.set('steward-info', await startServer('node', { ...env, LOG_LEVEL: 'info' }, 60_000, join(os.tmpdir(), `steward-bench-access-${process.pid}.log`)))
  if (scratch) {
    const [cmd, args] = runtimeCommand('node', 'bench/fastify-reference.ts')
    servers.set('fastify', await startProcess('node', cmd, args, { DATABASE_URL: scratch.url }))
  }
  // The same shared /health check as Steward's, on the same database (in-memory PGlite without PostgreSQL).
  const [cmd, args] = runtimeCommand('node', 'bench/targets/bare-fetch.ts')
  servers.set('bare-fetch', await startProcess('node', cmd, args, { DATABASE_URL: scratch?.url ?? 'memory://' }))

  const scenarios = Object.keys(ROUTES).flatMap((route) => [...servers.keys()].map((target) => `${route}|${target}`))
  const samples = await alternatingRounds(scenarios, ROUNDS, (scenario, warmUp) => {
    const [route, target] = scenario.split('|') as [Route, Target]
    const server = servers.get(target)!
    return maxThroughput(server.url, ROUTES[route].spec, warmUp ? WARMUP_SECONDS : SECONDS, CONNECTIONS, server.child.pid)
  })
  const of = (route: Route, target: Target): Throughput[] | undefined => samples.get(`${route}|${target}`)
  const rps = (route: Route, target: Target) => medianRps(of(route, target))
  const cpu = (route: Route, target: Target) => medianCpu(of(route, target))
  for (const [scenario, list] of samples) {
    const expected = String(ROUTES[scenario.split('|')[0] as Route].status)
    if (list.some((t) => t.errors > 0 || Object.keys(t.statuses).some((status) => status !== expected))) bad = true
  }

  // Median latency at a modest rate: Steward, Fastify and the bare function in turn, forwards then backwards, twice.
  const probed: Target[] = (['steward', 'fastify', 'bare-fetch'] as const).filter((t) => servers.has(t))
  const latency = new Map<string, ReturnType<typeof medianLatency>>()
  for (const route of Object.keys(ROUTES) as Route[]) {
    const probes = new Map<Target, Latency[]>(probed.map((t) => [t, []]))
    for (const order of [probed, [...probed].reverse(), probed, [...probed].reverse()]) {
      for (const target of order) probes.get(target)!.push(await fixedRateLatency(servers.get(target)!.url, ROUTES[route].spec, RATE, PROBE_SECONDS, CONNECTIONS))
    }
    for (const [target, list] of probes) latency.set(`${route}|${target}`, medianLatency(list))
  }
  const p50 = (route: Route, target: Target) => latency.get(`${route}|${target}`)?.p50 ?? null

  lines.push('## HTTP pipeline: Steward vs the Fastify reference and a bare fetch function (bench/pipeline.ts)', '')
  lines.push(
    `Each server in its own process, the load generator (autocannon, ${CONNECTIONS} keep-alive connections, no pipelining) in another; ` +
      `${ROUNDS} rounds of ${SECONDS} s per route and server in alternating order after a warm-up, medians. Steward at LOG_LEVEL=warn, on ${scratch ? 'PostgreSQL' : 'PGlite'}, from its bundle as \`./steward start\` runs it; ` +
      '"LOG_LEVEL=info" is the default level (one access-log line per request). CPU per request: the server process, user + system, all threads, from /proc. ' +
      `Median latency: each server at ${fmt(RATE)} req/s, open loop, evenly paced, four ${PROBE_SECONDS} s probes each, the median of their medians.`,
    '',
  )
  // Each goal read by throughput, then by CPU per request (the other's ÷ Steward's): the load
  // generator shares the two cores and can cap a throughput; it cannot change what a request cost.
  const goal = (name: string, route: Route, other: Target, target: number) =>
    `| ${name} | ≥ ${target.toFixed(2)} | ${verdict(ratio(rps(route, 'steward'), rps(route, other)), target)}; by CPU per request ${ratio(cpu(route, other), cpu(route, 'steward'))?.toFixed(2) ?? '—'} |`
  lines.push('| goal | target | reached |', '|---|---|---|')
  for (const route of ['notfound-404', 'bad-body-400', 'bad-key-401'] as const) lines.push(goal(`${ROUTES[route].name} vs Fastify reference`, route, 'fastify', 1))
  lines.push(goal('GET unknown path → 404 vs bare fetch function (same adapter)', 'notfound-404', 'bare-fetch', 0.8))
  lines.push(goal('GET /health vs bare fetch function (same shared check)', 'health', 'bare-fetch', 0.9))
  lines.push('', '| route | Steward req/s | Fastify req/s | bare fetch req/s | LOG_LEVEL=info req/s | CPU µs per request: Steward / Fastify / bare / info | median ms at ' + fmt(RATE) + ' req/s: Steward / Fastify / bare |', '|---|---:|---:|---:|---:|---:|---:|')
  for (const route of Object.keys(ROUTES) as Route[]) {
    const cpus = (['steward', 'fastify', 'bare-fetch', 'steward-info'] as const).map((t) => (cpu(route, t) === null ? '—' : cpu(route, t)!.toFixed(1))).join(' / ')
    const medians = probed.map((t) => p50(route, t)?.toFixed(3) ?? '—').join(' / ')
    lines.push(`| ${ROUTES[route].name} | ${fmt(rps(route, 'steward'))} | ${fmt(rps(route, 'fastify'))} | ${fmt(rps(route, 'bare-fetch'))} | ${fmt(rps(route, 'steward-info'))} | ${cpus} | ${medians} |`)
  }
  lines.push('', `Statuses: ${[...samples.keys()].map((s) => `${s.replace('|', ' on ')} ${statusesOf(samples.get(s))}`).join('; ')}.`)
  if (!scratch) lines.push('', 'No PostgreSQL answered: the Fastify reference and LOG_LEVEL=info were not measured.')
} finally {
  for (const server of servers.values()) await server.stop(5000).catch(() => {})
  await scratch?.drop().catch(() => {})
  rmSync(dataDir, { recursive: true, force: true })
  rmSync(join(os.tmpdir(), `steward-bench-access-${process.pid}.log`), { force: true })
}
console.log(lines.join('\n'))
if (bad) process.exitCode = 1
