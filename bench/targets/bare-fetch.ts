// Benchmark baseline: a bare fetch function (no router, no middleware) on the same
// @hono/node-server adapter and options Steward uses, answering the same small JSON. Not product code.
import { serve } from '@hono/node-server'

const body = JSON.stringify({ status: 'ok' })
const server = serve(
  {
    port: Number(process.env.PORT ?? 0),
    hostname: process.env.HOST ?? '127.0.0.1',
    fetch: () => new Response(body, { status: 200, headers: { 'Content-Type': 'application/json; charset=utf-8' } }),
  },
  (info) => console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${info.port}` })),
)
process.once('SIGTERM', () => {
  const http = server as import('node:http').Server
  http.close(() => process.exit(0))
  http.closeAllConnections()
})
