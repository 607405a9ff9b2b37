// POST /decisions (the durable write included) against POST /demo-request with a new lead, on the
// same Steward server, as users send them: every decision about a new order, amount and customer,
// every lead a new email (decision-world.ts), both routes driven with the same number of
// keep-alive connections. Goal: decisions at ≥ 0.85 × the demo requests' throughput.
//
// One server per database, started alone (PGlite in a data directory; PostgreSQL in a scratch
// database, when one answers) and stopped before the next: an idle server beside it would wake
// for its background work in the middle of the other's rounds. Each round measures both routes,
// in alternating order; the ratio is the median of the rounds' neighbour ratios. After every
// window the server is left to finish what the window left it (the audit sealer hashing the
// decisions just logged) before the next begins, and that work is counted in the window's CPU
// per request, where it belongs: the Steward process's, and on PostgreSQL its backends' too.
//
//   node --import tsx bench/decision-pair.ts [--databases pglite,postgres] [--seconds 4]
//     [--rounds 4] [--connections 10] [--few 2] [--rate 300]
//
// PostgreSQL: BENCH_DATABASE_URL, else TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
// Prints a Markdown section; exits 1 when a route answered anything but 200.
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import os from 'node:os'
import pg from 'pg'
import { parseScriptArgs } from '../cli/command.ts'
import { decisionBody, leadBody, seedDecisionWorld } from './decision-world.ts'
import { createScratchDatabase, findPostgres, median, NO_RATE_LIMITS, startServer, type ServerProcess } from './lib.ts'
import { fixedRateLatency, maxThroughput, processCpuMicros, type Latency, type RequestSpec, type Throughput } from './load.ts'
import { alternatingRounds, fmt, medianCpu, medianLatency, medianRps, statusesOf, verdict } from './report.ts'

const options = parseScriptArgs({
  databases: { type: 'string' },
  seconds: { type: 'string' },
  rounds: { type: 'string' },
  connections: { type: 'string' },
  few: { type: 'string' },
  rate: { type: 'string' },
})
const count = (name: keyof typeof options, fallback: number, zero = false): number => {
  const value = Number(options[name] ?? fallback)
  if (!(value > 0 || (zero && value === 0))) {
    process.stderr.write(`usage error: --${name} must be a ${zero ? 'non-negative' : 'positive'} number\n`)
    process.exit(2)
  }
  return value
}
const SECONDS = count('seconds', 4)
const ROUNDS = Math.round(count('rounds', 4))
const CONNECTIONS = Math.round(count('connections', 10))
/**
 * The same comparison with few requests in flight (0: not measured), as a handful of agents send
 * them: group commit then has little to share, and the ratio reads lower (informative).
 */
const FEW = Math.round(count('few', 2, true))
/** The modest fixed rate of the latency probes, far below either route's maximum. */
const RATE = count('rate', 300)
const WARMUP_SECONDS = Math.min(2, SECONDS)
const PROBE_SECONDS = Math.min(2, SECONDS)
const GOAL = 0.85
const DATABASES = (options.databases ?? 'pglite,postgres').split(',')
for (const name of DATABASES) {
  if (name !== 'pglite' && name !== 'postgres') {
    process.stderr.write(`usage error: unknown database '${name}' (pglite, postgres)\n`)
    process.exit(2)
  }
}

type Route = 'demo' | 'decisions'
interface Rounds {
  readonly connections: number
  readonly samples: Map<Route, Throughput[]>
  /** The median of the rounds' decisions ÷ demo ratios. */
  readonly ratio: number | null
}

interface PairResult {
  readonly database: string
  /** At CONNECTIONS (the goal's), then at FEW when measured. */
  readonly rounds: Rounds[]
  readonly latency: Record<Route, ReturnType<typeof medianLatency>>
}

/**
 * CPU time spent so far (µs) by what serves the requests: the Steward process (with PGlite, the
 * database runs inside it) and, on PostgreSQL, the backends connected to its scratch database.
 */
type CpuMeter = () => Promise<number>

function cpuMeter(pid: number, admin: pg.Client | null, databaseName: string | null): CpuMeter {
  return async () => {
    let total = processCpuMicros(pid) ?? 0
    if (admin && databaseName) {
      const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [databaseName])
      for (const row of rows) total += processCpuMicros(row.pid) ?? 0
    }
    return total
  }
}

/**
 * Waits until the server has been nearly idle for a quarter second (at most 10 s): the work a
 * window left behind (the audit sealer hashing the decisions it logged) is done before the next.
 */
async function settle(meter: CpuMeter): Promise<void> {
  let last = await meter()
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    const now = await meter()
    const busy = now - last
    last = now
    // Below a tenth of a core: the timers of an idle server, not work left over.
    if (busy < 25_000) break
  }
}

async function measure(database: 'pglite' | 'postgres', adminUrl: string | null): Promise<PairResult | null> {
  const dataDir = join(os.tmpdir(), `steward-bench-pair-${process.pid}`)
  const scratch = database === 'postgres' && adminUrl ? await createScratchDatabase(adminUrl, 'steward_pair') : null
  if (database === 'postgres' && !scratch) return null
  let server: ServerProcess | null = null
  const admin = scratch && adminUrl ? new pg.Client({ connectionString: adminUrl }) : null
  try {
    await admin?.connect()
    const world = await seedDecisionWorld(scratch ? { databaseUrl: scratch.url } : { dataDir })
    server = await startServer('node', { DATABASE_URL: scratch?.url ?? '', DATA_DIR: scratch ? '' : dataDir, LOG_LEVEL: 'warn', ...NO_RATE_LIMITS })
    const meter = cpuMeter(server.child.pid!, admin, scratch?.name ?? null)
    const run = `${Date.now().toString(36)}${process.pid}`
    let sent = 0
    const specs: Record<Route, RequestSpec> = {
      demo: { method: 'POST', path: '/demo-request', body: () => leadBody(run, sent++) },
      decisions: { method: 'POST', path: '/decisions', headers: { authorization: `Bearer ${world.key}` }, body: () => decisionBody(world.handle, sent++) },
    }
    const url = server.url
    const measureAt = async (connections: number): Promise<Rounds> => {
      const samples = await alternatingRounds<Route>(['demo', 'decisions'], ROUNDS, async (route, warmUp) => {
        const before = await meter()
        const result = await maxThroughput(url, specs[route], warmUp ? WARMUP_SECONDS : SECONDS, connections)
        await settle(meter)
        return { ...result, cpuMicros: result.answered > 0 ? ((await meter()) - before) / result.answered : null }
      })
      const demo = samples.get('demo')!
      const ratios = samples.get('decisions')!.map((d, i) => d.rps / (demo[i]?.rps ?? NaN)).filter(Number.isFinite)
      return { connections, samples, ratio: ratios.length ? median(ratios) : null }
    }
    const rounds = [await measureAt(CONNECTIONS), ...(FEW > 0 ? [await measureAt(FEW)] : [])]
    // The latency probes: both routes at the same modest rate, ABBA twice.
    const probes: Record<Route, Latency[]> = { demo: [], decisions: [] }
    for (let i = 0; i < 2; i++) {
      for (const route of ['demo', 'decisions', 'decisions', 'demo'] as const) {
        probes[route].push(await fixedRateLatency(url, specs[route], RATE, PROBE_SECONDS, CONNECTIONS))
        await settle(meter)
      }
    }
    return { database: scratch ? 'PostgreSQL' : 'PGlite', rounds, latency: { demo: medianLatency(probes.demo), decisions: medianLatency(probes.decisions) } }
  } finally {
    await server?.stop(5000).catch(() => {})
    await admin?.end().catch(() => {})
    await scratch?.drop().catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  }
}

const adminUrl = DATABASES.includes('postgres') ? await findPostgres() : null
const results: PairResult[] = []
for (const database of DATABASES as Array<'pglite' | 'postgres'>) {
  const result = await measure(database, adminUrl)
  if (result) results.push(result)
}

const lines = ['## Decisions over HTTP: POST /decisions vs POST /demo-request with a new lead (bench/decision-pair.ts)', '']
lines.push(
  `One organization with an active agent and 10 policies; each decision is allowed by a policy with a CEL condition and answered once its row is committed (group commit). ` +
    `Each decision asks about a new order, amount and customer; each lead brings a new email. Both routes on one server with nothing else running, driven with the same number of keep-alive connections, ` +
    `${ROUNDS} rounds of ${SECONDS} s per route in alternating order after a warm-up; the ratio is the median of the rounds' neighbour ratios. ` +
    `CPU per request: the Steward process (with PGlite, the database runs in it) and, on PostgreSQL, its database backends, over the window and until they were idle again. ` +
    `Median latency: both routes at ${fmt(RATE)} req/s on ${CONNECTIONS} connections, four ${PROBE_SECONDS} s probes each (ABBA twice).`,
  '',
)
lines.push('| goal | target | reached |', '|---|---|---|')
for (const r of results) {
  const { samples, ratio } = r.rounds[0]!
  const byCpu = (medianCpu(samples.get('demo')) ?? NaN) / (medianCpu(samples.get('decisions')) ?? NaN)
  lines.push(`| POST /decisions vs POST /demo-request (new lead), throughput at ${CONNECTIONS} connections each, ${r.database} | ≥ ${GOAL} | ${verdict(ratio, GOAL)}; by CPU per request ${Number.isFinite(byCpu) ? byCpu.toFixed(2) : '—'} |`)
}
lines.push('', '| database | connections each | POST /decisions req/s | POST /demo-request req/s | decisions ÷ demo | CPU µs per request, decisions / demo |', '|---|---:|---:|---:|---:|---:|')
let bad = false
for (const r of results) {
  for (const { connections, samples, ratio } of r.rounds) {
    const demo = samples.get('demo')
    const decisions = samples.get('decisions')
    lines.push(`| ${r.database} | ${connections} | ${fmt(medianRps(decisions))} | ${fmt(medianRps(demo))} | ${ratio === null ? '—' : ratio.toFixed(2)} | ${fmt(medianCpu(decisions))} / ${fmt(medianCpu(demo))} |`)
    for (const t of [...(demo ?? []), ...(decisions ?? [])]) if (t.errors > 0 || Object.keys(t.statuses).some((status) => status !== '200')) bad = true
  }
}
lines.push('')
for (const r of results) {
  const statuses = r.rounds.map(({ connections, samples }) => `at ${connections}, decisions ${statusesOf(samples.get('decisions'))} and demo ${statusesOf(samples.get('demo'))}`).join('; ')
  lines.push(`- ${r.database}: median latency at ${fmt(RATE)} req/s, decisions ${r.latency.decisions.p50.toFixed(2)} ms, demo ${r.latency.demo.p50.toFixed(2)} ms (probe errors ${r.latency.decisions.errors + r.latency.demo.errors}). Statuses ${statuses}.`)
}
if (DATABASES.includes('postgres') && adminUrl === null) lines.push('- PostgreSQL: not measured (none answered).')
console.log(lines.join('\n'))
if (bad) process.exitCode = 1
