// The MCP gateway's cost (issue #34): a tools/call of the example upstream's echo tool through
// Steward's /mcp against POST /decisions asking the same decision (same agent key, same policies,
// same action, arguments and context), and the gateway's latency against a direct call of the
// upstream. Goals: the gateway's throughput ≥ 0.8 × POST /decisions' (proxying costs little
// beyond the decision itself), and its median latency at 10 % of its maximum rate at most 2 ms
// above the direct call's at the same rate. Beside them, the CPU time Steward's process spends
// per call (the upstream runs in a process of its own and is not counted).
//
// The ceiling: every gateway call is also one tools/call served by the upstream, on the same two
// cores. So the upstream alone (a direct call, no Steward) is measured the same way, and its
// throughput against POST /decisions is the most the gateway could ever reach here; when that
// ceiling is below the goal, the goal cannot be met on this machine whatever the gateway does.
//
// Every gateway call must reach the upstream exactly once: the upstream counts the calls it
// serves (GET /calls), and the run fails when that count is below the 200s the gateway gave (a
// 200 that was a tool error, not forwarded) or above them by more than the calls still in flight
// when the load generator stopped (one per connection and window).
//
//   node --import tsx bench/mcp-gateway.ts [--databases pglite,postgres] [--seconds 5]
//     [--rounds 4] [--connections 10]
//
// PostgreSQL: BENCH_DATABASE_URL, else TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
// Prints a Markdown section; exits 1 when a request answered anything but 200 or a count is off.
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import os from 'node:os'
import { parseScriptArgs } from '../cli/command.ts'
import { createScratchDatabase, findPostgres, freePort, median, NO_RATE_LIMITS, startProcess, startServer, type ServerProcess } from './lib.ts'
import { fixedRateLatency, maxThroughput, processCpuMicros, type Latency, type RequestSpec, type Throughput } from './load.ts'
import { alternatingRounds, fmt, medianCpu, medianLatency, medianRps, statusesOf, verdict } from './report.ts'
import { seedGatewayWorld, type GatewayWorld } from './mcp-world.ts'

const options = parseScriptArgs({ databases: { type: 'string' }, seconds: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' } })
const count = (name: keyof typeof options, fallback: number): number => {
  const value = Number(options[name] ?? fallback)
  if (!(value > 0)) {
    process.stderr.write(`usage error: --${name} must be a positive number\n`)
    process.exit(2)
  }
  return value
}
const SECONDS = count('seconds', 5)
const ROUNDS = Math.round(count('rounds', 4))
const CONNECTIONS = Math.round(count('connections', 10))
const WARMUP_SECONDS = Math.min(2, SECONDS)
const PROBE_SECONDS = Math.min(2, SECONDS)
const THROUGHPUT_GOAL = 0.8
const LATENCY_GOAL_MS = 2
const DATABASES = (options.databases ?? 'pglite,postgres').split(',')
for (const name of DATABASES) {
  if (name !== 'pglite' && name !== 'postgres') {
    process.stderr.write(`usage error: unknown database '${name}' (pglite, postgres)\n`)
    process.exit(2)
  }
}

type Route = 'gateway' | 'decisions' | 'direct'
interface Result {
  readonly database: string
  readonly samples: Map<Route, Throughput[]>
  readonly ratio: number | null
  /** The upstream alone against POST /decisions: the gateway's ceiling on this machine. */
  readonly ceiling: number | null
  readonly rate: number
  readonly latency: Record<'gateway' | 'decisions' | 'direct', ReturnType<typeof medianLatency>>
  /** 200s the gateway answered, and tools/call requests the upstream served meanwhile. */
  readonly forwarded: { answered: number; served: number }
}

/** The MCP headers of a 2026-07-28 tools/call (stateless: no session, the method and name as headers). */
const mcpHeaders = (tool: string): Record<string, string> => ({
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': 'tools/call',
  'mcp-name': tool,
})
const CLIENT = { name: 'steward-bench', version: '1.0.0' }
const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': CLIENT }
const callBody = (tool: string, n: number) => JSON.stringify({ jsonrpc: '2.0', id: n, method: 'tools/call', params: { name: tool, arguments: { text: `hello ${n}` }, _meta: envelope } })
/** What the gateway asks of the decision service for that call, as POST /decisions. */
const decisionBody = (n: number) =>
  JSON.stringify({ action: 'mcp.echo.echo', resource: 'echo', args: { text: `hello ${n}` }, context: { mcp: { tool: 'echo__echo', client: CLIENT, protocol_version: '2026-07-28' } } })

/** Waits until the process has been nearly idle for a quarter second (at most 10 s); the CPU µs it spent meanwhile (as decision-pair.ts). */
async function settle(pid: number): Promise<number> {
  const first = processCpuMicros(pid)
  if (first === null) return 0
  let last = first
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250))
    const now = processCpuMicros(pid) ?? last
    const busy = now - last
    last = now
    if (busy < 25_000) break
  }
  return last - first
}

async function servedBy(upstream: ServerProcess): Promise<number> {
  return ((await (await fetch(`${upstream.url}/calls`)).json()) as { total: number }).total
}

async function measure(database: 'pglite' | 'postgres', adminUrl: string | null): Promise<Result | null> {
  const dataDir = join(os.tmpdir(), `steward-bench-mcp-${process.pid}`)
  const scratch = database === 'postgres' && adminUrl ? await createScratchDatabase(adminUrl, 'steward_mcp') : null
  if (database === 'postgres' && !scratch) return null
  let server: ServerProcess | null = null
  let upstream: ServerProcess | null = null
  try {
    const upstreamPort = await freePort()
    upstream = await startProcess('node', process.execPath, ['--import', 'tsx', 'examples/mcp-upstream.ts', '--port', String(upstreamPort)], {}, 60_000, `http://127.0.0.1:${upstreamPort}`)
    const upstreamUrl = `http://127.0.0.1:${upstreamPort}/mcp`
    const world: GatewayWorld = await seedGatewayWorld(scratch ? { databaseUrl: scratch.url } : { dataDir })
    server = await startServer('node', { DATABASE_URL: scratch?.url ?? '', DATA_DIR: scratch ? '' : dataDir, LOG_LEVEL: 'warn', MCP_ALLOW_PRIVATE: 'true', ...(scratch ? { SECRETS_KEY: randomBytes(32).toString('base64url') } : {}), ...NO_RATE_LIMITS })
    const registered = await fetch(`${server.url}/mcp/servers`, { method: 'POST', headers: { authorization: `Bearer ${world.adminKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'echo', url: upstreamUrl }) })
    if (registered.status !== 201) throw new Error(`POST /mcp/servers answered ${registered.status}: ${await registered.text()}`)
    const pid = server.child.pid!
    let sent = 0
    const auth = { authorization: `Bearer ${world.agentKey}` }
    const specs: Record<Route | 'direct', RequestSpec> = {
      gateway: { method: 'POST', path: '/mcp', headers: { ...auth, ...mcpHeaders('echo__echo') }, body: () => callBody('echo__echo', sent++) },
      decisions: { method: 'POST', path: '/decisions', headers: auth, body: () => decisionBody(sent++) },
      direct: { method: 'POST', path: '/mcp', headers: mcpHeaders('echo'), body: () => callBody('echo', sent++) },
    }
    const servedBefore = await servedBy(upstream)
    let answered = 0
    const servedAt = async () => (await servedBy(upstream!)) - directs
    let directs = 0
    const samples = await alternatingRounds<Route>(['decisions', 'gateway', 'direct'], ROUNDS, async (route, warmUp) => {
      // The direct calls are served by the upstream too: counted apart, so the check below sees only the gateway's.
      const before = route === 'direct' ? await servedBy(upstream!) : 0
      const measured = route === 'direct' ? upstream!.child.pid! : pid
      const result = await maxThroughput(route === 'direct' ? upstream!.url : server!.url, specs[route], warmUp ? WARMUP_SECONDS : SECONDS, CONNECTIONS, measured)
      if (route === 'gateway') answered += result.statuses['200'] ?? 0
      const after = await settle(measured)
      if (route === 'direct') directs += (await servedBy(upstream!)) - before
      return { ...result, cpuMicros: result.cpuMicros === null || result.cpuMicros === undefined || result.answered === 0 ? null : result.cpuMicros + after / result.answered }
    })
    // Before the probes: the direct ones are served by the upstream too.
    const served = (await servedAt()) - servedBefore
    const gateway = samples.get('gateway')!
    const decisions = samples.get('decisions')!
    const ratios = gateway.map((g, i) => g.rps / (decisions[i]?.rps ?? NaN)).filter(Number.isFinite)
    const ceilings = samples.get('direct')!.map((d, i) => d.rps / (decisions[i]?.rps ?? NaN)).filter(Number.isFinite)
    // The latency probes at a tenth of the gateway's maximum, ABCCBA twice: the gateway, the upstream
    // alone, and POST /decisions (how much of the gateway's time is the logged decision itself).
    const rate = Math.max(10, Math.round((medianRps(gateway) ?? 100) / 10))
    const probes: Record<'gateway' | 'decisions' | 'direct', Latency[]> = { gateway: [], decisions: [], direct: [] }
    for (let i = 0; i < 2; i++) {
      for (const route of ['gateway', 'direct', 'decisions', 'decisions', 'direct', 'gateway'] as const) {
        probes[route].push(await fixedRateLatency(route === 'direct' ? upstream.url : server.url, specs[route], rate, PROBE_SECONDS, CONNECTIONS))
        await settle(pid)
      }
    }
    return {
      database: scratch ? 'PostgreSQL' : 'PGlite',
      samples,
      ratio: ratios.length ? median(ratios) : null,
      ceiling: ceilings.length ? median(ceilings) : null,
      rate,
      latency: { gateway: medianLatency(probes.gateway), decisions: medianLatency(probes.decisions), direct: medianLatency(probes.direct) },
      forwarded: { answered, served },
    }
  } finally {
    await server?.stop(5000).catch(() => {})
    await upstream?.stop(5000).catch(() => {})
    await scratch?.drop().catch(() => {})
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/**
 * The most the gateway could reach if Steward's process is what bounds both routes: every gateway
 * call costs at least its decision plus the official SDK's serving of one tools/call (measured as
 * the upstream alone's CPU per call, which is that and nothing more), and the SDK's client call
 * upstream comes on top.
 */
function cpuCeiling(r: Result): number | null {
  const decision = medianCpu(r.samples.get('decisions'))
  const sdk = medianCpu(r.samples.get('direct'))
  return decision === null || sdk === null ? null : decision / (decision + sdk)
}

const adminUrl = DATABASES.includes('postgres') ? await findPostgres() : null
const results: Result[] = []
for (const database of DATABASES as Array<'pglite' | 'postgres'>) {
  const result = await measure(database, adminUrl)
  if (result) results.push(result)
}

const lines = ['## MCP gateway: tools/call through Steward vs POST /decisions, and vs the upstream alone (bench/mcp-gateway.ts)', '']
lines.push(
  `The example upstream (examples/mcp-upstream.ts, the official SDK) in a process of its own; one organization with an agent key, the upstream registered as \`echo\`, and 10 policies, one allowing \`mcp.echo.*\`. ` +
    `Gateway: a 2026-07-28 tools/call of \`echo__echo\` with new arguments each time, decided, logged and forwarded. POST /decisions: the same decision (agent key, action, resource, arguments, context) and nothing more. ` +
    `${CONNECTIONS} keep-alive connections, ${ROUNDS} rounds of ${SECONDS} s per route in alternating order after a warm-up; the ratio is the median of the rounds' neighbour ratios. ` +
    `The upstream alone: the same tools/call sent straight to the upstream, measured in the same rounds; every gateway call is also one of these, on the same two cores, so its ratio to POST /decisions is the gateway's ceiling here; and its CPU per call is what the official SDK spends serving one tools/call, which the gateway spends too before it forwards anything, so decision ÷ (decision + that) bounds the gateway's ratio when Steward's process is the bottleneck. ` +
    `CPU per call: Steward's process (with PGlite, the database too) over the window and until it was idle again; the upstream's CPU is not in it (for the upstream alone: the upstream's process). ` +
    `Latency: the gateway, a direct call of the upstream and POST /decisions at 10 % of the gateway's maximum rate, four ${PROBE_SECONDS} s probes each (ABCCBA twice).`,
  '',
)
lines.push('| goal | target | reached |', '|---|---|---|')
for (const r of results) {
  lines.push(`| MCP tools/call through the gateway vs POST /decisions, throughput, ${r.database} | ≥ ${THROUGHPUT_GOAL} | ${verdict(r.ratio, THROUGHPUT_GOAL)} |`)
  lines.push(`| its ceiling here by throughput: the upstream alone vs POST /decisions, ${r.database} | (≥ ${THROUGHPUT_GOAL} for the goal to be reachable) | ${verdict(r.ceiling, THROUGHPUT_GOAL)} |`)
  lines.push(`| its ceiling here by CPU: decision ÷ (decision + the SDK serving one tools/call), ${r.database} | (≥ ${THROUGHPUT_GOAL} for the goal to be reachable) | ${verdict(cpuCeiling(r), THROUGHPUT_GOAL)} |`)
  lines.push(`| MCP gateway median latency above a direct upstream call (ms) at 10 % of its maximum, ${r.database} | ≤ ${LATENCY_GOAL_MS} | ${verdict(r.latency.gateway.p50 - r.latency.direct.p50, LATENCY_GOAL_MS, false)} |`)
}
lines.push(
  '',
  '| database | gateway calls/s | POST /decisions req/s | upstream alone calls/s | CPU µs per call, gateway / decisions / upstream alone | probe rate | median ms, gateway / direct / decisions |',
  '|---|---:|---:|---:|---:|---:|---:|',
)
let bad = false
for (const r of results) {
  const gateway = r.samples.get('gateway')
  const decisions = r.samples.get('decisions')
  const direct = r.samples.get('direct')
  lines.push(`| ${r.database} | ${fmt(medianRps(gateway))} | ${fmt(medianRps(decisions))} | ${fmt(medianRps(direct))} | ${fmt(medianCpu(gateway))} / ${fmt(medianCpu(decisions))} / ${fmt(medianCpu(direct))} | ${fmt(r.rate)} req/s | ${r.latency.gateway.p50.toFixed(2)} / ${r.latency.direct.p50.toFixed(2)} / ${r.latency.decisions.p50.toFixed(2)} |`)
  for (const t of [...(gateway ?? []), ...(decisions ?? []), ...(direct ?? [])]) if (t.errors > 0 || Object.keys(t.statuses).some((status) => status !== '200')) bad = true
  const inFlight = CONNECTIONS * (ROUNDS + 1)
  if (r.latency.gateway.errors + r.latency.decisions.errors + r.latency.direct.errors > 0 || r.forwarded.served < r.forwarded.answered || r.forwarded.served > r.forwarded.answered + inFlight) bad = true
}
lines.push('')
for (const r of results) {
  const each = (route: Route) => r.samples.get(route)!.map((t) => fmt(t.rps)).join(', ')
  lines.push(
    `- ${r.database}: rounds, gateway ${each('gateway')}; decisions ${each('decisions')}; upstream alone ${each('direct')}. Statuses: gateway ${statusesOf(r.samples.get('gateway'))}; decisions ${statusesOf(r.samples.get('decisions'))}; upstream alone ${statusesOf(r.samples.get('direct'))}; ` +
      `probe errors ${r.latency.gateway.errors + r.latency.decisions.errors + r.latency.direct.errors}. Gateway calls answered 200 in the throughput windows: ${r.forwarded.answered}; tool calls the upstream served meanwhile: ${r.forwarded.served} (the difference: calls in flight when a window closed, at most ${CONNECTIONS * (ROUNDS + 1)}).`,
  )
}
if (DATABASES.includes('postgres') && adminUrl === null) lines.push('- PostgreSQL: not measured (none answered).')
console.log(lines.join('\n'))
if (bad) process.exitCode = 1
