// The cost of one request in process, without the network: the target's own node:http 'request'
// listener is handed real IncomingMessage and ServerResponse objects on a socket that throws away
// what is written. What is measured is the JavaScript of the adapter, the pipeline and Node's HTTP
// writer: no kernel, no load generator sharing the two cores, no scheduling. For A/Bs of pipeline
// code, where the throughput rows of bench/run.ts move by more than the change from run to run.
//
//   node --import tsx bench/inprocess.ts <target> <route> [--requests N] [--rounds R]
//     CPU per request (process.cpuUsage, user + system), each round and the median
//   node --import tsx bench/inprocess.ts --instructions <target> <route> [--requests N]
//     instructions per request under valgrind (callgrind): the driver is bundled with esbuild,
//     run for N and for 5 N requests after the same warm-up, and the difference divided by 4 N,
//     so start-up and warm-up cancel out. The count moves by a few percent between identical
//     runs (V8 compiles in the background); the machine's load does not move it.
//
// target: steward (createHandler and cli/serve.ts, as `./steward start` wires them, on a database
//         that throws if touched: these routes answer before any query), fastify
//         (bench/fastify-reference.ts), bare (bench/targets/bare-fetch.ts)
// route:  notfound (GET /nope), badkey (GET /policies, malformed key), badbody (POST
//         /demo-request, invalid body): the refusals of the pipeline rows in bench/run.ts
import { spawnSync } from 'node:child_process'
import http from 'node:http'
import { syncBuiltinESMExports } from 'node:module'
import { Duplex } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import { parseArgs } from 'node:util'

const TARGETS = ['steward', 'fastify', 'bare'] as const
type Target = (typeof TARGETS)[number]

interface RouteCase {
  readonly method: string
  readonly path: string
  /** Raw header lines, name then value (Content-Length is added for a body). */
  readonly headers: readonly string[]
  readonly body: string | null
  /** The status every answer must have: anything else stops the run. */
  readonly status: number
}
const HOST = ['Host', '127.0.0.1:3000']
const ROUTES: Readonly<Record<string, RouteCase>> = {
  notfound: { method: 'GET', path: '/nope', headers: HOST, body: null, status: 404 },
  badkey: { method: 'GET', path: '/policies?organization_id=00000000-0000-0000-0000-000000000000', headers: [...HOST, 'Authorization', 'Bearer stw_key_notavalidkeyatall'], body: null, status: 401 },
  badbody: { method: 'POST', path: '/demo-request', headers: [...HOST, 'Content-Type', 'application/json'], body: '{"email":"x"}', status: 400 },
}
const WARM_UP = 20_000
const USAGE = `usage: bench/inprocess.ts [--instructions] ${TARGETS.join('|')} ${Object.keys(ROUTES).join('|')} [--requests N] [--rounds R]`

const { values, positionals } = (() => {
  try {
    return parseArgs({
      options: { requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '5' }, instructions: { type: 'boolean', default: false } },
      allowPositionals: true,
    })
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`)
    process.exit(2)
  }
})()
const [target, route] = positionals as [Target, string]
const requests = Number(values.requests)
const rounds = Number(values.rounds)
if (positionals.length !== 2 || !TARGETS.includes(target) || !(route in ROUTES) || !(Number.isInteger(requests) && requests > 0) || !(Number.isInteger(rounds) && rounds > 0)) {
  console.error(USAGE)
  process.exit(2)
}

if (values.instructions) {
  console.log(`${target} ${route}: ${await instructionsPerRequest(target, route, requests)} instructions per request`)
  process.exit(0)
}

const listener = await listenerOf(target)
const { method, path: url, body, status: expected } = ROUTES[route]!
const rawHeaders = body === null ? ROUTES[route]!.headers : [...ROUTES[route]!.headers, 'Content-Length', String(Buffer.byteLength(body))]

/** A socket that accepts every write and keeps nothing. */
class Sink extends Duplex {
  remoteAddress = '127.0.0.1'
  remotePort = 40_000
  encrypted = false
  override _read(): void {}
  override _write(_chunk: unknown, _encoding: unknown, done: () => void): void {
    done()
  }
  override _writev(_chunks: unknown[], done: () => void): void {
    done()
  }
  setTimeout(): this {
    return this
  }
  setNoDelay(): this {
    return this
  }
}
const socket = new Sink()

/** One exchange, as Node's HTTP server would start it; resolves with the status once the answer is written. */
function exchange(): Promise<number> {
  const request = new http.IncomingMessage(socket as never)
  request.method = method
  request.url = url
  request.httpVersion = '1.1'
  request.httpVersionMajor = 1
  request.httpVersionMinor = 1
  // What the HTTP parser calls: the raw lines, from which `headers` is built when first read.
  ;(request as unknown as { _addHeaderLines(lines: readonly string[], n: number): void })._addHeaderLines(rawHeaders, rawHeaders.length)
  if (body !== null) request.push(Buffer.from(body))
  request.push(null)
  request.complete = true
  const response = new http.ServerResponse(request)
  response.assignSocket(socket as never)
  return new Promise((resolve) => {
    response.once('finish', () => {
      response.detachSocket(socket as never)
      resolve(response.statusCode)
    })
    listener(request, response)
  })
}

async function runRequests(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const status = await exchange()
    if (status !== expected) throw new Error(`${target} ${route}: status ${status}, expected ${expected}`)
  }
}

await runRequests(WARM_UP)
const perRound: number[] = []
for (let round = 0; round < rounds; round++) {
  const before = process.cpuUsage()
  await runRequests(requests)
  const used = process.cpuUsage(before)
  perRound.push((used.user + used.system) / requests)
}
const sorted = [...perRound].sort((a, b) => a - b)
console.log(`${target} ${route}: CPU µs per request ${perRound.map((x) => x.toFixed(2)).join(' ')}; median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)}`)
process.exit(0)

/** Starts the target with node:http's createServer watched, and returns its request listener. */
async function listenerOf(which: Target): Promise<(request: http.IncomingMessage, response: http.ServerResponse) => void> {
  let server: http.Server | null = null
  const createServer = http.createServer
  ;(http as { createServer: unknown }).createServer = (...given: unknown[]) => (server = (createServer as (...a: unknown[]) => http.Server)(...given))
  // ES module imports of node:http read the module's exports as they were: update them too.
  syncBuiltinESMExports()
  process.env.PORT = '0'
  process.env.HOST = '127.0.0.1'
  if (which === 'steward') {
    // In the bundle (--instructions) server.ts shares this file's import.meta and would take
    // itself for the script being run, and start the CLI: the arguments are read already.
    process.argv[1] = ''
    const { createHandler, loadConfig } = await import('../server.ts')
    const { serve } = await import('../cli/serve.ts')
    const config = loadConfig({ DATABASE_URL: 'memory://', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', LEAD_RATE_LIMIT: '100000000/60', API_RATE_LIMIT: '100000000/60' })
    const untouchable = new Proxy({}, {
      get() {
        throw new Error('bench/inprocess.ts: this route touched the database; measure it with bench/run.ts')
      },
    })
    // No start(): no background work, nothing but the requests in the measurement.
    const app = createHandler(config, { db: untouchable as never, clock: Date.now, logger: { log() {} }, listenUrl: null })
    await serve(app, config)
  } else if (which === 'fastify') {
    process.env.DATABASE_URL ||= 'postgres://postgres@127.0.0.1:5432/test'
    await import('./fastify-reference.ts')
  } else {
    delete process.env.DATABASE_URL
    await import('./targets/bare-fetch.ts')
  }
  for (let i = 0; i < 100 && !server; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  const found = server as http.Server | null
  if (!found) throw new Error(`${which}: no node:http server was created`)
  return found.listeners('request')[0] as (request: http.IncomingMessage, response: http.ServerResponse) => void
}

/** Instructions per request: the difference of two callgrind runs of the bundled driver. */
async function instructionsPerRequest(which: Target, routeName: string, n: number): Promise<number> {
  const root = join(fileURLToPath(import.meta.url), '..', '..')
  const bundle = join(root, '.build', 'inprocess.mjs')
  const esbuild = await import('esbuild')
  await esbuild.build({
    entryPoints: [fileURLToPath(import.meta.url)],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    external: ['@electric-sql/pglite', 'pg', 'pg-native', 'esbuild'],
    banner: { js: "import { createRequire as __benchRequire } from 'node:module'; const require = __benchRequire(import.meta.url);" },
    logLevel: 'silent',
  })
  const count = (requestsRun: number): number => {
    const run = spawnSync('valgrind', ['--tool=callgrind', '--callgrind-out-file=/dev/null', '--smc-check=all-non-file', process.execPath, bundle, which, routeName, '--requests', String(requestsRun), '--rounds', '1'], {
      cwd: root,
      encoding: 'utf8',
      env: process.env,
    })
    const collected = /Collected : (\d+)/.exec(run.stderr ?? '')
    if (run.status !== 0 || !collected) throw new Error(`valgrind failed (${run.error?.message ?? run.status}): ${(run.stderr ?? '').slice(-500)}`)
    return Number(collected[1])
  }
  const few = count(n)
  const many = count(5 * n)
  return Math.round((many - few) / (4 * n))
}
