// Metrics and tracing as a client sees them (docs/observability.md): POST /decisions over HTTP to
// two Steward servers started as users start them (./steward start), one with METRICS_TOKEN and
// OTEL_EXPORTER_OTLP_ENDPOINT set (spans exported to a receiver in this process, /metrics scraped
// after every window), one with neither, each on its own database (PGlite data directory, or a
// scratch PostgreSQL database) seeded alike. Every request carries a sampled traceparent (one caller's trace per server).
// Alternating rounds; the ratio is the median of the per-round on ÷ off. Goal: ≥ 0.95.
//   node --import tsx bench/observability-http.ts [--databases pglite,postgres] [--seconds 4] [--rounds 4] [--connections 10]
import { createServer } from 'node:http'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import os from 'node:os'
import { parseScriptArgs } from '../cli/command.ts'
import { decisionBody, seedDecisionWorld } from './decision-world.ts'
import { createScratchDatabase, findPostgres, median, NO_RATE_LIMITS, startServer, type ServerProcess } from './lib.ts'
import { maxThroughput, type RequestSpec } from './load.ts'
import { alternatingRounds } from './report.ts'
import { postgresCpu, treeCpu } from './cpu.ts'

const options = parseScriptArgs({ databases: { type: 'string' }, seconds: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' } })
const SECONDS = Number(options.seconds ?? 4)
const ROUNDS = Math.round(Number(options.rounds ?? 4))
const CONNECTIONS = Math.round(Number(options.connections ?? 10))
const DATABASES = (options.databases ?? 'pglite,postgres').split(',')
const TOKEN = 'bench-metrics-token-0123456789abcdef'

let exported = 0
const receiver = createServer((request, response) => {
  request.on('data', (chunk: Buffer) => (exported += chunk.length))
  request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const endpoint = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`
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
    for (const side of ['off', 'on'] as const) {
      let target: { databaseUrl: string } | { dataDir: string }
      if (database === 'postgres') {
        const scratch = await createScratchDatabase(adminUrl!, `steward_obs_${side}`)
        cleanups.push(() => scratch.drop())
        target = { databaseUrl: scratch.url }
      } else {
        const dataDir = join(os.tmpdir(), `steward-bench-obs-${side}-${process.pid}`)
        cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }))
        target = { dataDir }
      }
      const world = await seedDecisionWorld(target)
      const env = { DATABASE_URL: 'databaseUrl' in target ? target.databaseUrl : '', DATA_DIR: 'dataDir' in target ? target.dataDir : '', LOG_LEVEL: 'warn', ...NO_RATE_LIMITS }
      const server = await startServer('node', side === 'on' ? { ...env, METRICS_TOKEN: TOKEN, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } : env)
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
    // CPU per request of each server process (and of PostgreSQL's processes): what a server that
    // is CPU-bound pays, steadier than req/s on this small shared machine.
    const cpu = { off: { server: 0, postgres: 0, n: 0 }, on: { server: 0, postgres: 0, n: 0 } }
    const samples = await alternatingRounds<Side>(['off', 'on'], ROUNDS, async (side, warmUp) => {
      const pid = servers[side]!.child.pid!
      const [server, postgres] = [treeCpu(pid), postgresCpu()]
      const result = await maxThroughput(servers[side]!.url, specs[side], warmUp ? 2 : SECONDS, CONNECTIONS)
      if ((result.statuses['200'] ?? 0) !== result.answered) throw new Error(`${side}: ${JSON.stringify(result.statuses)}`)
      if (!warmUp) {
        cpu[side].server += treeCpu(pid) - server
        cpu[side].postgres += postgresCpu() - postgres
        cpu[side].n += result.answered
      }
      if (side === 'on') await scrape()
      return result
    })
    const off = samples.get('off')!
    const on = samples.get('on')!
    const ratios = on.map((sample, round) => sample.rps / off[round]!.rps)
    const ratio = median(ratios)
    const name = database === 'postgres' ? 'PostgreSQL' : 'PGlite (data directory)'
    const perRequest = (side: Side) => (cpu[side].server + cpu[side].postgres) / cpu[side].n
    const cpuRatio = perRequest('off') / perRequest('on')
    const µs = (side: Side) => `${(cpu[side].server / cpu[side].n).toFixed(0)} + ${(cpu[side].postgres / cpu[side].n).toFixed(0)} µs`
    rows.push(
      `| POST /decisions over HTTP with metrics and tracing on ÷ both off, ${name}: CPU per request, off ÷ on | ≥ 0.95 | **${cpuRatio.toFixed(2)} ${cpuRatio >= 0.95 ? '✓' : '✗'}** (server + PostgreSQL CPU per request: on ${µs('on')}, off ${µs('off')}) |`,
      `| the same, req/s on ÷ off (median of rounds) | ≥ 0.95 | ${ratio.toFixed(2)} (req/s on/off per round: ${on.map((sample, round) => `${sample.rps.toFixed(0)}/${off[round]!.rps.toFixed(0)}`).join(', ')}) |`,
    )
  } finally {
    for (const server of Object.values(servers)) await server?.stop()
    for (const cleanup of cleanups) await cleanup()
  }
}
console.log(
  `${CONNECTIONS} keep-alive connections per server (autocannon), ${SECONDS} s windows, ${ROUNDS} alternating rounds; the two servers run side by side. Every request carries a traceparent; ${(exported / 2 ** 20).toFixed(1)} MiB of spans reached the receiver.\n`,
)
console.log('| goal | target | reached |\n|---|---|---|')
for (const row of rows) console.log(row)
await new Promise<void>((resolve) => receiver.close(() => resolve()))
receiver.closeAllConnections()
