// Benchmark baseline, not product code: a bare fetch function (no router, no middleware, no reply
// objects) on the same @hono/node-server adapter Steward uses, answering what Steward answers on
// the routes the pipeline rows measure, with the same headers:
//   GET /health   the shared database check of routes/health.ts (health-check.ts: concurrent probes
//                 wait for one `select 1` that started after they arrived), then 200 or 503;
//   GET /policies with a key that is not of the key format: 401, answered at once, after the
//                 Fastify reference's check (reference-work.ts);
//   POST /demo-request whose JSON body misses a field: 400, after reading the body as Steward does
//                 (http/body-text.ts readText) and the reference's check;
//   anything else 404 {"error":"No resource at <path>"}, returned as a Response rather than a
//                 promise (nothing to wait for), which the adapter writes at once.
// So "Fastify ÷ bare function" on each row is the ceiling of any pipeline on this adapter.
// DATABASE_URL: postgres://… (a pg pool from database/connect.ts), memory:// (in-memory PGlite),
// or unset (/health answers without a database round trip).
//   DATABASE_URL=postgres://… PORT=0 node --import tsx bench/targets/bare-fetch.ts
import { serve } from '@hono/node-server'
import { readText } from '../../http/body-text.ts'
import { pathOf } from '../../http/pipeline.ts'
import { healthAnswer, openHealthCheck } from './health-check.ts'
import { CSP, EXPOSED, keyIsWellFormed, leadIsValid, MISSING, UNAUTHORIZED } from './reference-work.ts'

// Steward's defaults (BODY_LIMIT_BYTES, BODY_TIMEOUT_MS in the README).
const BODY_LIMIT = 16_384
const BODY_TIMEOUT_MS = 10_000
const JSON_TYPE = 'application/json; charset=utf-8'

const database = await openHealthCheck(process.env.DATABASE_URL)

/** The headers Steward puts on every answer (http/security.ts, http/cors.ts), as a plain record. */
function headers(extra?: Record<string, string>): Record<string, string> {
  return {
    'content-type': JSON_TYPE,
    ...extra,
    'x-content-type-options': 'nosniff',
    'content-security-policy': CSP,
    'x-request-id': crypto.randomUUID(),
    'access-control-allow-origin': '*',
    'access-control-expose-headers': EXPOSED,
  }
}

/** /health waits for the check; a 404 needs no waiting and is returned as it is, as Steward's is. */
function fetch(request: Request): Response | Promise<Response> {
  const path = pathOf(request.url)
  if (path === '/health' && request.method === 'GET') return health()
  if (path === '/policies' && request.method === 'GET') {
    if (!keyIsWellFormed(request.headers.get('authorization'))) return new Response(UNAUTHORIZED, { status: 401, headers: headers({ 'cache-control': 'no-store' }) })
    return new Response(JSON.stringify({ status: 'ok' }), { status: 200, headers: headers({ 'cache-control': 'no-store' }) })
  }
  if (path === '/demo-request' && request.method === 'POST') return lead(request)
  return new Response(JSON.stringify({ error: `No resource at ${path}` }), { status: 404, headers: headers() })
}

async function lead(request: Request): Promise<Response> {
  // Steward's own reader (http/body-text.ts): bounded, with its deadline, strict UTF-8.
  const text = await readText(request, BODY_LIMIT, BODY_TIMEOUT_MS)
  if (leadIsValid(text)) return new Response(JSON.stringify({ status: 'ok' }), { status: 200, headers: headers() })
  return new Response(MISSING, { status: 400, headers: headers() })
}

async function health(): Promise<Response> {
  const answer = healthAnswer(await database.check())
  return new Response(answer.body, { status: answer.status, headers: headers(answer.headers) })
}

const server = serve(
  { port: Number(process.env.PORT ?? 0), hostname: process.env.HOST ?? '127.0.0.1', fetch },
  (info) => console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${info.port}` })),
)
process.once('SIGTERM', () => {
  const http = server as import('node:http').Server
  http.close(() => void database.close().finally(() => process.exit(0)))
  http.closeAllConnections()
})
