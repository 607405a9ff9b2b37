// Security tests at the socket level, through the real Node adapter on loopback: slow bodies and
// slow headers time out, connections are capped (in total and per client address), a client that
// drops mid-upload is an abort and not a database outage, an oversized chunked body gets a 413
// and a clean close, and what the adapter refuses itself is still answered in our format.
// Small caps and short timeouts are set by configuration; a handful of sockets, bounded waits.
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { serve, type Served } from '../../cli/serve.ts'
import { createHandler, type Steward } from '../../server.ts'
import { memoryLogger, openTestDatabase, testConfig, type LogLine } from '../support/helpers.ts'

interface Running {
  readonly port: number
  readonly app: Steward
  readonly logs: LogLine[]
  readonly served: Served
}

// One database for the file: each test serves its own handler (and configuration) on it.
const database = await openTestDatabase(t)

/** A handler on this file's database, served on 127.0.0.1 by the Node adapter until the test ends. */
async function start(t: Test, env: Record<string, string> = {}): Promise<Running> {
  const logger = memoryLogger()
  const config = testConfig({ PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env })
  const app = createHandler(config, { db: database.db, clock: Date.now, logger, listenUrl: null })
  const served = await serve(app, config)
  t.teardown(async () => {
    await served.close()
    await app.close()
  })
  return { port: served.port, app, logs: logger.lines, served }
}

interface Exchange {
  /** Everything the server wrote. */
  readonly text: string
  /** How the connection ended: a clean FIN, a reset or another error, or our own 5 s bound. */
  readonly ending: 'fin' | 'timeout' | string
}

/** Opens a connection and resolves once it is established. */
function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Collects what the server sends on `socket` until it closes the connection (at most 5 s). */
function collect(socket: Socket): Promise<Exchange> {
  return new Promise((resolve) => {
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (text += chunk))
    socket.resume()
    socket.once('end', () => resolve({ text, ending: 'fin' }))
    socket.once('error', (error: NodeJS.ErrnoException) => resolve({ text, ending: error.code ?? 'error' }))
    socket.setTimeout(5000, () => {
      socket.destroy()
      resolve({ text, ending: 'timeout' })
    })
  })
}

/** Sends `bytes` on a fresh connection and collects the answer. */
async function exchange(port: number, bytes: string): Promise<Exchange> {
  const socket = await open(port)
  const answer = collect(socket)
  socket.write(bytes)
  return answer
}

interface Parsed {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/** Parses one HTTP/1.1 response with a Content-Length (all ours have one). */
function parse(text: string): Parsed {
  const end = text.indexOf('\r\n\r\n')
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(text.slice(0, 200))}`)
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  const length = Number(headers['content-length'])
  const body = text.slice(end + 4)
  if (Buffer.byteLength(body) !== length) throw new Error(`body of ${Buffer.byteLength(body)} bytes, Content-Length ${length}: ${JSON.stringify(text.slice(0, 300))}`)
  return { status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]), headers, body }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const JSON_CSP = "default-src 'none'; frame-ancestors 'none'"

/** The headers every answer of ours carries, whoever produced it. */
function assertOurs(t: Test, answer: Parsed, label: string): void {
  t.equal(answer.headers['content-type'], 'application/json; charset=utf-8', `${label}: JSON`)
  t.equal(answer.headers['x-content-type-options'], 'nosniff', `${label}: nosniff`)
  t.equal(answer.headers['content-security-policy'], JSON_CSP, `${label}: CSP`)
  t.match(answer.headers['x-request-id'], UUID, `${label}: a fresh request id`)
  t.equal(answer.headers['access-control-allow-origin'], '*', `${label}: CORS`)
  t.equal(answer.headers.connection, 'close', `${label}: closes`)
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Waits (bounded) until `check` holds; each round 50 ms apart. */
async function until(check: () => boolean | Promise<boolean>, rounds = 100): Promise<boolean> {
  for (let round = 0; round < rounds; round++) {
    if (await check()) return true
    await sleep(50)
  }
  return false
}

const HEALTH = 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'

t.test('a body that trickles in gets 408 within BODY_TIMEOUT_MS, then the connection closes cleanly', async (t) => {
  const { port, logs } = await start(t, { BODY_TIMEOUT_MS: '300' })
  for (const framing of ['Content-Length: 100', 'Transfer-Encoding: chunked']) {
    const socket = await open(port)
    const answer = collect(socket)
    socket.write(`POST /newsletter HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`)
    const chunked = framing.startsWith('Transfer')
    // One byte every 50 ms, at most 60 of them (3 s): far past the 300 ms the body may take.
    let written = 0
    const trickle = setInterval(() => {
      if (socket.destroyed || socket.writableEnded || written >= 60) return clearInterval(trickle)
      socket.write(chunked ? '1\r\n \r\n' : ' ')
      written++
    }, 50)
    const { text, ending } = await answer
    clearInterval(trickle)
    const parsed = parse(text)
    t.equal(parsed.status, 408, framing)
    t.equal(parsed.body, '{"error":"Request body did not arrive within 300 ms"}')
    assertOurs(t, parsed, framing)
    t.equal(ending, 'fin', `${framing}: closed with a FIN, no reset`)
    t.ok(written < 60, `${framing}: answered after ${written} bytes, before the trickle ended`)
  }
  t.notOk(logs.some((line) => line.message === 'database unavailable'))
})

t.test('headers that trickle in get 408 within HEADERS_TIMEOUT_MS and the connection closes', async (t) => {
  const { port } = await start(t, { HEADERS_TIMEOUT_MS: '300' })
  const socket = await open(port)
  const answer = collect(socket)
  socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n')
  let written = 0
  const trickle = setInterval(() => {
    if (socket.destroyed || socket.writableEnded || written >= 60) return clearInterval(trickle)
    socket.write(`X-Slow-${written}: 1\r\n`)
    written++
  }, 50)
  const { text, ending } = await answer
  clearInterval(trickle)
  t.not(ending, 'timeout', 'the server closed the connection')
  const parsed = parse(text)
  t.equal(parsed.status, 408)
  t.equal(parsed.body, '{"error":"The request did not arrive in time"}')
  assertOurs(t, parsed, 'headers timeout')
  t.ok(written < 60, `answered after ${written} header lines`)

  // A connection that sends nothing at all is closed as well.
  const silent = await open(port)
  const quiet = await collect(silent)
  t.not(quiet.ending, 'timeout', 'a silent connection is closed')
})

t.test('MAX_CONNECTIONS: the excess gets 503 at once, the others keep being served, and it recovers', async (t) => {
  const { port } = await start(t, { MAX_CONNECTIONS: '3' })
  const held = await Promise.all([open(port), open(port), open(port)])
  for (let extra = 0; extra < 2; extra++) {
    const refused = await exchange(port, HEALTH)
    t.equal(refused.ending, 'fin', 'the excess connection is closed cleanly')
    const parsed = parse(refused.text)
    t.equal(parsed.status, 503)
    t.equal(parsed.body, '{"error":"The server has too many open connections; try again shortly"}')
    t.equal(parsed.headers['retry-after'], '1')
    assertOurs(t, parsed, 'over the cap')
  }
  // The connections within the cap are served meanwhile.
  const answer = collect(held[0]!)
  held[0]!.write(HEALTH)
  t.equal(parse((await answer).text).status, 200, 'a held connection is served')

  for (const socket of held) socket.destroy()
  const recovered = await until(async () => {
    const again = await exchange(port, HEALTH)
    return again.text.startsWith('HTTP/1.1 200 ')
  })
  t.ok(recovered, 'new connections are served once the others closed')
})

t.test('MAX_CONNECTIONS_PER_CLIENT: one address cannot take more, a trusted proxy is exempt', async (t) => {
  const { port } = await start(t, { MAX_CONNECTIONS: '100', MAX_CONNECTIONS_PER_CLIENT: '2' })
  const held = await Promise.all([open(port), open(port)])
  const refused = await exchange(port, HEALTH)
  const parsed = parse(refused.text)
  t.equal(parsed.status, 503)
  t.equal(parsed.body, '{"error":"Too many open connections from your address; close some and try again"}')
  assertOurs(t, parsed, 'over the per-client cap')
  for (const socket of held) socket.destroy()
  t.ok(await until(async () => (await exchange(port, HEALTH)).text.startsWith('HTTP/1.1 200 ')), 'served again after closing')

  const proxied = await start(t, { MAX_CONNECTIONS: '100', MAX_CONNECTIONS_PER_CLIENT: '2', TRUST_PROXY: '127.0.0.1' })
  const behind = await Promise.all([open(proxied.port), open(proxied.port)])
  t.match((await exchange(proxied.port, HEALTH)).text, /^HTTP\/1\.1 200 /, 'a trusted proxy carries many clients')
  for (const socket of behind) socket.destroy()
})

t.test('a client dropping mid-upload is logged and counted as an abort, never as a database outage', async (t) => {
  const { port, logs, app } = await start(t)
  for (const framing of ['Content-Length: 200', 'Transfer-Encoding: chunked']) {
    const socket = await open(port)
    socket.on('error', () => {})
    const half = '{"email":"half@example.com",'
    socket.write(`POST /newsletter HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n${framing}\r\n\r\n`)
    socket.write(framing.startsWith('Transfer') ? `${half.length.toString(16)}\r\n${half}\r\n` : half)
    // Let the handler start reading the body, then drop the connection.
    await sleep(100)
    socket.resetAndDestroy()
  }
  t.ok(await until(() => logs.filter((line) => line.message === 'client aborted').length === 2), 'both aborts logged')
  const aborts = logs.filter((line) => line.message === 'client aborted')
  t.same(aborts.map((line) => [line.level, line.fields.method, line.fields.path]), [['info', 'POST', '/newsletter'], ['info', 'POST', '/newsletter']])
  t.equal(aborts[1]!.fields.aborts, 2, 'the log line carries the running count')
  t.equal(app.counters.clientAborts, 2, 'counted on the handler')
  t.notOk(logs.some((line) => line.message === 'database unavailable'), 'no database warning')
  const statuses = logs.filter((line) => line.message === 'request').map((line) => line.fields.status)
  t.same(statuses, [499, 499], 'the access log says the client closed, not 503')
  // And the server is fine.
  t.match((await exchange(port, HEALTH)).text, /^HTTP\/1\.1 200 /)
})

t.test('a chunked body over the limit gets a complete 413 with Connection: close, then a clean FIN', async (t) => {
  const { port } = await start(t)
  const chunk = `400\r\n${'x'.repeat(1024)}\r\n`
  const head = 'POST /newsletter HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n'

  // All 64 KiB at once.
  const whole = await exchange(port, head + chunk.repeat(64) + '0\r\n\r\n')
  t.equal(whole.ending, 'fin', 'no reset')
  const parsed = parse(whole.text)
  t.equal(parsed.status, 413)
  t.equal(parsed.body, '{"error":"Request body is larger than 16384 bytes"}')
  assertOurs(t, parsed, '413')

  // A client that writes its whole body before it reads (as most clients do) and is slower
  // than the server: the answer must still be there when it reads, and no reset.
  const socket = await open(port)
  socket.pause()
  socket.write(head + chunk.repeat(20))
  await sleep(300)
  socket.write(chunk.repeat(44) + '0\r\n\r\n')
  await sleep(100)
  const late = await collect(socket)
  t.equal(late.ending, 'fin', 'no reset while the client was still sending')
  t.equal(parse(late.text).status, 413)
})

t.test('what the adapter refuses is answered in our format, with our headers', async (t) => {
  const { port } = await start(t)
  const cases: Array<[string, string, number, string]> = [
    ['backslash in the path', 'GET /\\health HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'Bad request target or Host header: Backslash in request path'],
    ['no Host', 'GET /health HTTP/1.1\r\n\r\n', 400, 'The Host header is required'],
    ['a Host with a space', 'GET /health HTTP/1.1\r\nHost: a b\r\n\r\n', 400, 'Bad request target or Host header: Invalid URL'],
    ['a Host with userinfo', 'GET /health HTTP/1.1\r\nHost: evil@localhost\r\n\r\n', 400, 'Bad request target or Host header: Invalid host header'],
    ['OPTIONS *', 'OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'The request target * is not supported; send OPTIONS to a path'],
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'CONNECT is not supported: this server is not a proxy'],
    ['not HTTP', 'NOT HTTP AT ALL\r\n\r\n', 400, 'Malformed HTTP request'],
  ]
  for (const [label, bytes, status, message] of cases) {
    const { text, ending } = await exchange(port, bytes)
    t.equal(ending, 'fin', `${label}: answered and closed`)
    const parsed = parse(text)
    t.equal(parsed.status, status, label)
    t.equal(parsed.body, JSON.stringify({ error: message }), label)
    assertOurs(t, parsed, label)
  }
  // HTTP/1.0 may leave out Host.
  t.match((await exchange(port, 'GET /health HTTP/1.0\r\n\r\n')).text, /^HTTP\/1\.1 200 /)
})

t.test('refusals echo an allowed Origin when CORS is an allow-list', async (t) => {
  const { port } = await start(t, { CORS_ORIGINS: 'https://www.example.com' })
  const { text } = await exchange(port, 'GET /\\health HTTP/1.1\r\nHost: localhost\r\nOrigin: https://www.example.com\r\n\r\n')
  const parsed = parse(text)
  t.equal(parsed.status, 400)
  t.equal(parsed.headers['access-control-allow-origin'], 'https://www.example.com')
  t.equal(parsed.headers.vary, 'Origin')
})

t.test('what Bun and Deno pass on to the handler is answered the same way', async (t) => {
  const { app } = await start(t)
  // Bun hands CONNECT to the handler as a request for "/" (a plain object: Node's Request refuses
  // to be built with that method).
  const connectRequest = { url: 'http://localhost/', method: 'CONNECT', headers: new Headers() } as unknown as Request
  const connectAnswer = await app.fetch(connectRequest, { remoteAddress: '127.0.0.1' })
  t.equal(connectAnswer.status, 405)
  t.equal(await connectAnswer.text(), '{"error":"CONNECT is not supported: this server is not a proxy"}')
  t.equal(connectAnswer.headers.get('allow'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS')
  // Bun builds request.url from a Host like `a b`, which no URL parser accepts.
  const unparsable = { url: 'http://a b/health', method: 'GET', headers: new Headers() } as unknown as Request
  const response = await app.fetch(unparsable, { remoteAddress: '127.0.0.1' })
  t.equal(response.status, 400)
  t.equal(await response.text(), '{"error":"Bad request target or Host header"}')
  t.equal(response.headers.get('content-security-policy'), JSON_CSP)
  t.equal(response.headers.get('x-content-type-options'), 'nosniff')

  // The parse is remembered by scheme and authority (http/pipeline.ts): every answer stays the
  // parser's own, the second time too, whatever the path, and for hosts and ports it rejects.
  const status = async (url: string) => {
    const answer = await app.fetch({ url, method: 'GET', headers: new Headers() } as unknown as Request, { remoteAddress: '127.0.0.1' })
    await answer.body?.cancel()
    return answer.status
  }
  for (const [url, expected] of [
    ['http://a b/health', 400],
    ['http://a b/policies?x=1', 400],
    ['http://localhost/health', 200],
    ['http://localhost:99999/health', 400],
    ['http://localhost:65535/health', 200],
    // The last good authority is a prefix of these: only "/" right after it is that authority.
    ['http://localhost:655359/health', 400],
    ['http://localhost:65535/policies', 401],
    ['http://1.2.3.999/health', 400],
    ['http://127.0.0.1/health', 200],
    ['http://[::1/health', 400],
    ['http://a b?/health', 400],
    ['http://localhost/%zz/..%2F/no-such-path', 404],
  ] as const) {
    t.equal(await status(url), expected, `${url} (first)`)
    t.equal(await status(url), expected, `${url} (again)`)
  }
  // More made-up authorities than are remembered: each still gets the parser's answer.
  for (let i = 0; i < 300; i++) t.equal(await status(`http://host-${i}:${70000 + i}/health`), 400)
  t.equal(await status('http://localhost/health'), 200, 'a known host after the flood')
})
