// How finely can the latency goal's measurement tell two servers apart on this machine? An A/A
// test of bench/run.ts's p99 method: two identical Steward servers and two identical raw node:http
// servers (bench/targets/raw-http.ts), each probed the way bench/run.ts probes (load.ts
// fixedRateLatency: ten keep-alive sockets, evenly paced sends, 1 s a probe, the probe's client on
// the first core, every other server of the run stopped, a quiet machine before each probe), the
// p50 and p99 of each server the medians of its probes. Identical servers should read 1.00 of each
// other; how far they stray is the smallest difference the method can show here. Beside the A/A
// ratios it prints each Steward's p99 ÷ its raw node:http's, the ratio the goal reads
// (p99 ≤ 1.5 × raw node:http's at the same rate).
//
//   node --import tsx bench/p99-aa.ts [--routes bad-key-401,bad-body-400] [--rates 2000,7000] [--probes 8]
//
// Needs PostgreSQL (BENCH_DATABASE_URL, TEST_DATABASE_URL or postgres://postgres@127.0.0.1:5432/test):
// the four servers share one scratch database, dropped at the end. Loopback only; about
// (servers × probes × (1 s + the quiet wait)) per route and rate: some 50 s for the defaults.
import { parseArgs } from 'node:util'
import { createScratchDatabase, findPostgres, median, NO_RATE_LIMITS, runtimeCommand, startProcess, startServer, type ServerProcess } from './lib.ts'
import { fixedRateLatency, PIPELINE_REFUSALS, waitForQuiet, withPaused, withProbePinned, type Latency, type RequestSpec } from './load.ts'

/** The refusals of bench/run.ts's pipeline rows, with the status each server must answer. */
const ROUTES: Readonly<Record<string, RequestSpec & { readonly status: number }>> = PIPELINE_REFUSALS
const USAGE = `usage: bench/p99-aa.ts [--routes ${Object.keys(ROUTES).join(',')}] [--rates N,N…] [--probes N (even)]`

const refuse = (message: string): never => {
  console.error(`${message}\n${USAGE}`)
  process.exit(2)
}
const { values } = (() => {
  try {
    return parseArgs({ options: { routes: { type: 'string', default: 'bad-key-401,bad-body-400' }, rates: { type: 'string', default: '2000' }, probes: { type: 'string', default: '8' } } })
  } catch (error) {
    return refuse((error as Error).message)
  }
})()
const routes = values.routes.split(',')
for (const route of routes) if (!(route in ROUTES)) refuse(`unknown route: ${route}`)
const wholeNumber = (text: string, name: string): number => (/^[1-9]\d{0,5}$/.test(text) ? Number(text) : refuse(`${name} must be a positive whole number: ${text}`))
const rates = values.rates.split(',').map((rate) => wholeNumber(rate, '--rates'))
const probes = wholeNumber(values.probes, '--probes')
if (probes % 2 !== 0) refuse('--probes must be even (each round runs the servers forwards, the next one backwards)')

const adminUrl = (await findPostgres()) ?? refuse('no PostgreSQL answers (BENCH_DATABASE_URL, TEST_DATABASE_URL, postgres://postgres@127.0.0.1:5432/test)')

const scratch = await createScratchDatabase(adminUrl, 'steward_aa')
const servers: Array<{ name: string; process: ServerProcess }> = []
try {
  // One at a time: the first Steward migrates the scratch database.
  for (const name of ['steward-a', 'steward-b']) servers.push({ name, process: await startServer('node', { DATABASE_URL: scratch.url, LOG_LEVEL: 'warn', ...NO_RATE_LIMITS }) })
  const [cmd, args] = runtimeCommand('node', 'bench/targets/raw-http.ts')
  for (const name of ['raw-a', 'raw-b']) servers.push({ name, process: await startProcess('node', cmd, args, { DATABASE_URL: scratch.url }) })

  console.log(`# A/A of the p99 method: ${probes} probes of 1 s per server, forwards then backwards; p50 and p99 are medians of each server's probes (ms)`)
  console.log('| route | rate (req/s) | steward-a p50 / p99 | steward-b p50 / p99 | raw-a p50 / p99 | raw-b p50 / p99 | steward-a ÷ steward-b | raw-a ÷ raw-b | steward-a ÷ raw-a | steward-b ÷ raw-b |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const route of routes) {
    const spec = ROUTES[route]!
    for (const { name, process: server } of servers) {
      // A probe that measured the wrong answer would time nothing worth reading.
      const answer = await fetch(server.url + spec.path, { method: spec.method, headers: { ...(spec.body ? { 'content-type': 'application/json' } : {}), ...spec.headers }, body: spec.body as string | undefined })
      await answer.arrayBuffer()
      if (answer.status !== spec.status) throw new Error(`${name} answered ${route} with ${answer.status}, not ${spec.status}`)
      await fixedRateLatency(server.url, spec, 3000, 2) // warm-up
    }
    for (const rate of rates) {
      const seen = new Map<string, Latency[]>(servers.map(({ name }) => [name, []]))
      for (let round = 0; round < probes; round++) {
        for (const { name, process: server } of round % 2 === 0 ? servers : [...servers].reverse()) {
          await waitForQuiet()
          const others = servers.filter((s) => s.name !== name).map((s) => s.process.child.pid!)
          const { result } = await withPaused(others, () => withProbePinned(() => fixedRateLatency(server.url, spec, rate, 1)))
          if (result.errors > 0) throw new Error(`${name}: ${result.errors} malformed answers at ${rate} req/s`)
          seen.get(name)!.push(result)
        }
      }
      const p50 = (name: string) => median(seen.get(name)!.map((x) => x.p50))
      const p99 = (name: string) => median(seen.get(name)!.map((x) => x.p99))
      const cell = (name: string) => `${p50(name).toFixed(3)} / ${p99(name).toFixed(3)}`
      const ratio = (a: string, b: string) => (p99(a) / p99(b)).toFixed(2)
      console.log(`| ${route} | ${rate} | ${cell('steward-a')} | ${cell('steward-b')} | ${cell('raw-a')} | ${cell('raw-b')} | ${ratio('steward-a', 'steward-b')} | ${ratio('raw-a', 'raw-b')} | ${ratio('steward-a', 'raw-a')} | ${ratio('steward-b', 'raw-b')} |`)
    }
  }
} finally {
  for (const { process: server } of servers) await server.stop()
  await scratch.drop()
}
process.exit(0)
