// Metrics and tracing as a client sees them (docs/observability.md): POST /decisions over HTTP to
// two Steward servers started as users start them (./steward start), one with METRICS_TOKEN and
// OTEL_EXPORTER_OTLP_ENDPOINT set (spans exported to a receiver process of its own, /metrics scraped
// every 15 s), one with neither, each on its own database (PGlite data directory, or a scratch
// PostgreSQL database) seeded alike. Every request carries a sampled traceparent (one caller's
// trace per server). Both servers are loaded at the same time and share one core (with their
// PostgreSQL backends), so whatever slows that core slows both; the load generator and the
// receiver keep to the other core. Goal: CPU per request, off ÷ on, ≥ 0.95.
//   node --import tsx bench/observability-http.ts [--databases pglite,postgres] [--seconds 3] [--rounds 8] [--connections 10]
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import os from 'node:os'
import pg from 'pg'
import { parseScriptArgs } from '../cli/command.ts'
import { decisionBody, seedDecisionWorld } from './decision-world.ts'
import { createScratchDatabase, findPostgres, NO_RATE_LIMITS, processTree, startReceiver, startServer, type ServerProcess } from './lib.ts'
import { maxThroughput, type RequestSpec } from './load.ts'
import { canPin, pidsCpu, pinTo, treeCpu } from './cpu.ts'

const options = parseScriptArgs({ databases: { type: 'string' }, seconds: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' } })
const SECONDS = Number(options.seconds ?? 3)
const ROUNDS = Math.round(Number(options.rounds ?? 8))
const CONNECTIONS = Math.round(Number(options.connections ?? 10))
const DATABASES = (options.databases ?? 'pglite,postgres').split(',')
/** PARTS=metrics or PARTS=tracing: that part alone on the 'on' server; none: both off (A/A). */
const PARTS = process.env.PARTS ?? 'both'
const TOKEN = 'bench-metrics-token-0123456789abcdef'

const receiver = await startReceiver()
const endpoint = receiver.endpoint
const adminUrl = DATABASES.includes('postgres') ? await findPostgres() : null

type Side = 'off' | 'on'
const rows: string[] = []
for (const database of DATABASES) {
  const cleanups: (() => Promise<unknown> | unknown)[] = []
  const servers: Partial<Record<Side, ServerProcess>> = {}
  try {
    if (database === 'postgres' && !adminUrl) {
      rows.push(`| POST /decisions over HTTP with metrics and tracing on ÷ both off, PostgreSQL | ≥ 0.95 | no PostgreSQL answered: not measured |`)
      continue
    }
    const specs = {} as Record<Side, RequestSpec>
    const databases: Partial<Record<Side, string>> = {}
    for (const side of ['off', 'on'] as const) {
      let target: { databaseUrl: string } | { dataDir: string }
      if (database === 'postgres') {
        const scratch = await createScratchDatabase(adminUrl!, `steward_obs_${side}`)
        cleanups.push(() => scratch.drop())
        databases[side] = scratch.name
        target = { databaseUrl: scratch.url }
      } else {
        const dataDir = join(os.tmpdir(), `steward-bench-obs-${side}-${process.pid}`)
        cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
        target = { dataDir }
      }
      const world = await seedDecisionWorld(target)
      const env = { DATABASE_URL: 'databaseUrl' in target ? target.databaseUrl : '', DATA_DIR: 'dataDir' in target ? target.dataDir : '', LOG_LEVEL: 'warn', ...NO_RATE_LIMITS }
      const parts = PARTS === 'none' ? {} : { ...(PARTS !== 'tracing' ? { METRICS_TOKEN: TOKEN } : {}), ...(PARTS !== 'metrics' ? { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } : {}) }
      const server = await startServer('node', side === 'on' ? { ...env, ...parts } : env)
      servers[side] = server
      let sent = 0
      specs[side] = {
        method: 'POST',
        path: '/decisions',
        // autocannon sends fixed headers: one caller's trace, each request a new span in it.
        headers: { authorization: `Bearer ${world.key}`, traceparent: `00-${crypto.randomUUID().replaceAll('-', '')}-00f067aa0ba902b7-01` },
        body: () => decisionBody(world.handle, sent++),
      }
    }
    const scrape = async () => {
      const res = await fetch(`${servers.on!.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
      if (res.status !== 200 || !(await res.text()).includes('steward_decisions_total')) throw new Error(`/metrics answered ${res.status}`)
    }
    // PostgreSQL's processes serving each server's database, pinned and counted with it.
    const backends = async (side: Side): Promise<number[]> => {
      if (!databases[side]) return []
      const admin = new pg.Client({ connectionString: adminUrl! })
      await admin.connect()
      try {
        const { rows } = await admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [databases[side]])
        return rows.map((row) => row.pid)
      } finally {
        await admin.end()
      }
    }
    if (canPin) pinTo([process.pid, receiver.pid], 0)
    const cpu = { off: { server: 0, postgres: 0, n: 0 }, on: { server: 0, postgres: 0, n: 0 } }
    let sinceScrape = 0
    for (let round = -1; round < ROUNDS; round++) {
      // Round -1 warms both up; backends opened since the last round are pinned before the next.
      const pids = { off: await backends('off'), on: await backends('on') }
      if (canPin) for (const side of ['off', 'on'] as const) pinTo([...processTree(servers[side]!.child.pid!), ...pids[side]], 1)
      const before = { off: [treeCpu(servers.off!.child.pid!), pidsCpu(pids.off)], on: [treeCpu(servers.on!.child.pid!), pidsCpu(pids.on)] }
      const results = await Promise.all((['off', 'on'] as const).map((side) => maxThroughput(servers[side]!.url, specs[side], round < 0 ? 2 : SECONDS, CONNECTIONS)))
      sinceScrape += SECONDS
      if (sinceScrape >= 15 && PARTS !== 'tracing' && PARTS !== 'none') {
        sinceScrape = 0
        await scrape()
      }
      for (const [i, side] of (['off', 'on'] as const).entries()) {
        const result = results[i]!
        if ((result.statuses['200'] ?? 0) !== result.answered) throw new Error(`${side}: ${JSON.stringify(result.statuses)}`)
        if (round < 0) continue
        cpu[side].server += treeCpu(servers[side]!.child.pid!) - before[side][0]!
        cpu[side].postgres += pidsCpu(pids[side]) - before[side][1]!
        cpu[side].n += result.answered
      }
    }
    if (PARTS !== 'tracing' && PARTS !== 'none') await scrape()
    const name = database === 'postgres' ? 'PostgreSQL' : 'PGlite (data directory)'
    const perRequest = (side: Side) => (cpu[side].server + cpu[side].postgres) / cpu[side].n
    const cpuRatio = perRequest('off') / perRequest('on')
    const ratio = cpu.on.n / cpu.off.n
    const µs = (side: Side) => `${(cpu[side].server / cpu[side].n).toFixed(0)}${database === 'postgres' ? ` + ${(cpu[side].postgres / cpu[side].n).toFixed(0)}` : ''} µs`
    rows.push(
      `| POST /decisions over HTTP with metrics and tracing on, ${name}: CPU per request, off ÷ on${database === 'postgres' ? ' (server + its PostgreSQL backends)' : ''} | ≥ 0.95 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.95 ? '✓' : '✗'}** (on ${µs('on')}, off ${µs('off')}) |`,
      `| the same, requests served on ÷ off (sharing the core) | ≥ 0.95 | ${ratio.toFixed(2)} (${(cpu.on.n / ROUNDS / SECONDS).toFixed(0)} / ${(cpu.off.n / ROUNDS / SECONDS).toFixed(0)} req/s) |`,
    )
  } finally {
    for (const server of Object.values(servers)) await server?.stop()
    for (const cleanup of cleanups) await cleanup()
  }
}
console.log(
  `${CONNECTIONS} keep-alive connections per server (autocannon), ${SECONDS} s rounds, ${ROUNDS} rounds; both servers loaded at once${canPin ? ', sharing one core' : ' (taskset missing: not pinned)'}. Every request carries a sampled traceparent; ${(receiver.exported() / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`,
)
console.log('| goal | target | reached |\n|---|---|---|')
for (const row of rows) console.log(row)
receiver.stop()
