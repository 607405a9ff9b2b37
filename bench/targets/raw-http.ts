// Benchmark baseline, not product code: node:http alone, with no framework and no adapter, as
// the floor under every server on Node. On the three refusals the pipeline rows measure it does
// the work the Fastify reference does and writes the answer Steward writes, byte for byte but the
// request id and the date:
//   GET /policies with a key that is not of the key format  401 {"status":"Unauthorized",…}
//   POST /demo-request whose JSON body misses a field        400 {"error":"Missing required fields"}
//   a path no route has                                       404 {"error":"No resource at <path>"}
// with the same headers (security, CORS, a fresh request id; no-store on /policies). GET /health
// makes Steward's shared database check and gives its answer (health-check.ts, as the bare fetch
// function does), so that the latency goal compares like with like: both wait for the same
// database. Anything else (a valid lead, a well-formed key) answers a fixed small JSON.
// DATABASE_URL: as for bare-fetch.ts; unset, /health answers without a database round trip.
//   DATABASE_URL=postgres://… PORT=0 node --import tsx bench/targets/raw-http.ts
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { healthAnswer, openHealthCheck } from './health-check.ts'
import { CSP, EXPOSED, keyIsWellFormed, leadIsValid, MISSING, UNAUTHORIZED } from './reference-work.ts'

const OK = JSON.stringify({ status: 'ok' })
const database = await openHealthCheck(process.env.DATABASE_URL)

function send(res: ServerResponse, status: number, body: string, extra?: Record<string, string>): void {
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    ...extra,
    'x-content-type-options': 'nosniff',
    'content-security-policy': CSP,
    'x-request-id': crypto.randomUUID(),
    'access-control-allow-origin': '*',
    'access-control-expose-headers': EXPOSED,
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
}

function ok(res: ServerResponse): void {
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(OK) })
  res.end(OK)
}

function lead(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => (leadIsValid(Buffer.concat(chunks).toString('utf8')) ? ok(res) : send(res, 400, MISSING)))
}

const server = createServer((req, res) => {
  const url = req.url ?? '/'
  const query = url.indexOf('?')
  const path = query < 0 ? url : url.slice(0, query)
  if (path === '/health') {
    void database.check().then((up) => {
      const answer = healthAnswer(up)
      send(res, answer.status, answer.body, answer.headers)
    })
    return
  }
  if (path === '/policies' && req.method === 'GET') {
    return keyIsWellFormed(req.headers.authorization) ? ok(res) : send(res, 401, UNAUTHORIZED, { 'cache-control': 'no-store' })
  }
  if (path === '/demo-request' && req.method === 'POST') return lead(req, res)
  send(res, 404, JSON.stringify({ error: `No resource at ${path}` }))
})
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address() as { port: number }
  console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${address.port}` }))
})
process.once('SIGTERM', () => {
  server.close(() => void database.close().finally(() => process.exit(0)))
  server.closeAllConnections()
})
