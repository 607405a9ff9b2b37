// Real processes, where a process is the point: start-up on an empty data directory, graceful
// SIGTERM, a restart that keeps the data, kill -9 right after a 200, and the operator commands
// (`leads export`, `migrate`). PGlite under a temp DATA_DIR (no DATABASE_URL).
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { EXPORT_COLUMNS } from '../../cli/export.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'steward-process-'))
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', LEAD_RATE_LIMIT: '1000/60' }
  delete env.DATABASE_URL
  delete env.NODE_OPTIONS
  return env
}

interface Server {
  readonly child: ChildProcess
  readonly url: string
  readonly lines: Array<Record<string, unknown>>
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

const children = new Set<ChildProcess>()
t.teardown(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

/** Spawns `server.ts start` and resolves once it logs `listening`. */
async function startServer(): Promise<Server & { startedInMs: number }> {
  const started = Date.now()
  const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts', 'start'], { cwd: ROOT, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  const lines: Array<Record<string, unknown>> = []
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = ''
    child.stdout!.on('data', (chunk) => {
      buffer += chunk
      let newline: number
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + 1)
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>
          lines.push(parsed)
          if (parsed.msg === 'listening') resolve(String(parsed.url))
        } catch {
          lines.push({ text: line })
        }
      }
    })
    void exited.then(({ code }) => reject(new Error(`server exited with ${code} before listening: ${stderr}`)))
  })
  return { child, url, lines, exited, startedInMs: Date.now() - started }
}

/** Runs an operator command to completion. */
function runCommand(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts', ...args], { cwd: ROOT, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    children.add(child)
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.once('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

async function post(url: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: response.status, text: await response.text() }
}

/** Sends raw bytes on a fresh connection and returns what the server wrote back. */
function rawExchange(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes))
    let reply = ''
    socket.on('data', (chunk) => (reply += chunk))
    socket.on('end', () => resolve(reply))
    socket.on('error', reject)
    socket.setTimeout(5000, () => socket.destroy(new Error('timeout')))
  })
}

const first = 'first@example.com'
const inflight = 'in-flight@example.com'
const afterRestart = 'after-restart@example.com'
const beforeKill = 'killed-right-after@example.com'

t.test('start, serve, SIGTERM with a request in flight', async (t) => {
  const server = await startServer()
  t.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/, 'the listening line names the real URL')
  t.not(new URL(server.url).port, '0', 'PORT=0 is reported as the port actually bound')
  t.ok(server.startedInMs < 20_000, `listening after ${server.startedInMs} ms on a fresh data directory`)
  t.equal(server.lines.find((line) => line.msg === 'listening')?.database, 'pglite')

  t.same(await post(server.url, '/newsletter', { email: first }), { status: 200, text: '{"message":"OK"}' })

  // TRACE and malformed HTTP through the real Node adapter.
  const trace = await new Promise<number>((resolve, reject) => {
    const req = httpRequest(`${server.url}/newsletter`, { method: 'TRACE' }, (res) => {
      res.resume()
      resolve(res.statusCode ?? 0)
    })
    req.on('error', reject)
    req.end()
  })
  t.equal(trace, 405, 'TRACE answers 405')
  const malformed = await rawExchange(server.url, 'NOT HTTP AT ALL\r\n\r\n')
  t.match(malformed, /^HTTP\/1\.1 400 Bad Request\r\n/)
  t.match(malformed, /\{"error":"Malformed HTTP request"\}$/)

  // Through the real adapter: an oversized body is refused, and no X-Powered-By.
  const big = await fetch(`${server.url}/newsletter`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'big@example.com', pad: 'x'.repeat(20_000) }) })
  t.equal(big.status, 413)
  t.equal(await big.text(), '{"error":"Request body is larger than 16384 bytes"}')
  t.equal(big.headers.get('x-powered-by'), null)
  t.equal(big.headers.get('x-content-type-options'), 'nosniff')

  // A request whose body is still arriving when SIGTERM comes.
  const { hostname, port } = new URL(server.url)
  const body = JSON.stringify({ email: inflight })
  const socket = connect(Number(port), hostname)
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  let reply = ''
  socket.on('data', (chunk) => (reply += chunk))
  const replied = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write(`POST /newsletter HTTP/1.1\r\nHost: ${hostname}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`)
  socket.write(`${(10).toString(16)}\r\n${body.slice(0, 10)}\r\n`)
  await new Promise((resolve) => setTimeout(resolve, 200))
  const signalled = Date.now()
  server.child.kill('SIGTERM')
  await new Promise((resolve) => setTimeout(resolve, 300))
  const rest = body.slice(10)
  socket.write(`${Buffer.byteLength(rest).toString(16)}\r\n${rest}\r\n0\r\n\r\n`)
  await replied
  t.match(reply, /^HTTP\/1\.1 200 OK\r\n/, 'the in-flight request finishes with 200')
  t.match(reply, /\{"message":"OK"\}$/)

  const exit = await server.exited
  t.same(exit, { code: 0, signal: null }, 'exits with 0')
  t.ok(Date.now() - signalled < 5000, `stopped ${Date.now() - signalled} ms after SIGTERM`)
  t.ok(server.lines.some((line) => line.msg === 'stopped'), 'logs "stopped"')
})

t.test('a restart keeps the data; kill -9 right after a 200 loses nothing', async (t) => {
  const server = await startServer()
  t.same(await post(server.url, '/newsletter', { email: first.toUpperCase() }), { status: 409, text: '{"message":"Already registered"}' })
  t.same(await post(server.url, '/newsletter', { email: inflight }), { status: 409, text: '{"message":"Already registered"}' }, 'the in-flight request was stored')
  t.same(await post(server.url, '/newsletter', { email: afterRestart, source: 'restart' }), { status: 200, text: '{"message":"OK"}' })
  const demo = {
    first_name: '=HYPERLINK("http://evil.example","click")',
    last_name: 'Smith, Jr.',
    email: beforeKill,
    company: 'Acme "Rockets"',
    linkedin: '+linkedin',
    phone: '-1 555 0100',
    source: '@campaign',
    analytics_distinct_id: 'line1\nline2',
  }
  const response = await post(server.url, '/demo-request', demo)
  server.child.kill('SIGKILL')
  t.same(response, { status: 200, text: '{"message":"OK"}' })
  t.same(await server.exited, { code: null, signal: 'SIGKILL' })

  const ndjson = await runCommand(['leads', 'export', '--format', 'ndjson'])
  t.equal(ndjson.code, 0, ndjson.stderr)
  const leads = ndjson.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
  t.same(
    leads.map((lead) => [lead.list, lead.email]),
    [
      ['demo', beforeKill],
      ['newsletter', first],
      ['newsletter', inflight],
      ['newsletter', afterRestart],
    ],
    'every lead answered with 200 is there, the one before kill -9 included',
  )
  const killed = leads[0]!
  t.same(Object.keys(killed), [...EXPORT_COLUMNS])
  t.equal(killed.first_name, demo.first_name, 'NDJSON keeps values as they are')
  t.equal(killed.analytics_distinct_id, 'line1\nline2')
  t.equal(killed.via, null)
  t.equal(leads[3]!.source, 'restart')
  t.equal(leads[3]!.via, '/newsletter')
  t.match(String(killed.received_at), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)

  const csv = await runCommand(['leads', 'export', '--list', 'demo'])
  t.equal(csv.code, 0, csv.stderr)
  const [header, row, end] = csv.stdout.split('\r\n')
  t.equal(header, EXPORT_COLUMNS.join(','))
  t.equal(end, '', 'rows end with CRLF')
  t.equal(
    row,
    [
      'demo',
      String(killed.id),
      beforeKill,
      `"'=HYPERLINK(""http://evil.example"",""click"")"`,
      '"Smith, Jr."',
      '"Acme ""Rockets"""',
      "'+linkedin",
      "'-1 555 0100",
      "'@campaign",
      '"line1\nline2"',
      '',
      String(killed.received_at),
      '',
      '',
    ].join(','),
    'formula cells are neutralised with a leading quote; commas, quotes and newlines are quoted',
  )

  const bad = await runCommand(['leads', 'export', '--format', 'xml'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--format must be csv or ndjson/)
})

t.test('migrate reports an up-to-date schema and exits 0', async (t) => {
  const result = await runCommand(['migrate'])
  t.equal(result.code, 0, result.stderr)
  t.equal(result.stdout, 'schema is up to date\n')
})
