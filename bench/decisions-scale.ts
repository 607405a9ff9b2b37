// Decisions per second of one and of two Steward processes on one PostgreSQL database: both
// processes start (bench/lib.ts), then POST /decisions is driven through one of them, then
// through both at once (autocannon, keep-alive, CONNECTIONS per process), in alternating rounds.
// Every decision starts from its agent's context (read once per process, checked by the insert),
// evaluates and commits its row (group commit); each asks about a new order (decision-world.ts).
//
//   node --import tsx bench/decisions-scale.ts            (BENCH_DATABASE_URL or TEST_DATABASE_URL,
//                                                          else postgres://postgres@127.0.0.1:5432/test)
// SECONDS (3) per measurement, ROUNDS (2), CONNECTIONS (10 per process).
import os from 'node:os'
import { decisionBody, seedDecisionWorld } from './decision-world.ts'
import { createScratchDatabase, reachable, startServer, type ServerProcess } from './lib.ts'
import { maxThroughput, type RequestSpec } from './load.ts'

const SECONDS = Number(process.env.SECONDS ?? 3)
const ROUNDS = Number(process.env.ROUNDS ?? 2)
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 10)
const adminUrl = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test'
if (!(await reachable(adminUrl))) {
  console.log(`no PostgreSQL at ${adminUrl}: nothing to measure (several processes share one PostgreSQL database, never one PGlite directory)`)
  process.exit(0)
}
const scratch = await createScratchDatabase(adminUrl, 'steward_scale')
const servers: ServerProcess[] = []
try {
  const env = { DATABASE_URL: scratch.url, LOG_LEVEL: 'warn', API_RATE_LIMIT: '1000000000/60', API_ORG_RATE_LIMIT: '1000000000/60' }
  servers.push(await startServer('node', env))
  const world = await seedDecisionWorld({ databaseUrl: scratch.url })
  servers.push(await startServer('node', env))
  let sent = 0
  const spec: RequestSpec = { method: 'POST', path: '/decisions', headers: { authorization: `Bearer ${world.key}` }, body: () => decisionBody(world.handle, sent++) }
  for (const server of servers) await maxThroughput(server.url, spec, 1, CONNECTIONS) // warm-up: JIT, key cache, compiled set
  const one: number[] = []
  const two: number[] = []
  const statuses = new Set<string>()
  const measure = async (count: 1 | 2) => {
    const results = await Promise.all(servers.slice(0, count).map((server) => maxThroughput(server.url, spec, SECONDS, CONNECTIONS)))
    for (const r of results) for (const status of Object.keys(r.statuses)) statuses.add(status)
    return results.reduce((sum, r) => sum + r.rps, 0)
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const count of round % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const)) (count === 1 ? one : two).push(await measure(count))
  }
  const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!
  const m1 = median(one)
  const m2 = median(two)
  console.log(`Node ${process.version}, ${os.cpus().length} CPUs (load average ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}), local PostgreSQL; ${CONNECTIONS} connections per process, ${SECONDS} s × ${ROUNDS} rounds, medians; statuses ${[...statuses].join(', ')}`)
  console.log('')
  console.log('| Steward processes | POST /decisions per second | each round |')
  console.log('|---:|---:|---|')
  console.log(`| 1 | ${Math.round(m1).toLocaleString('en-US')} | ${one.map((n) => Math.round(n)).join(', ')} |`)
  console.log(`| 2 | ${Math.round(m2).toLocaleString('en-US')} (${(m2 / m1).toFixed(2)}×) | ${two.map((n) => Math.round(n)).join(', ')} |`)
} finally {
  await Promise.all(servers.map((s) => s.stop(5000).catch(() => {})))
  await scratch.drop()
}
