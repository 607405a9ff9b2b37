// Benchmark baseline: raw node:http answering the same small JSON as GET /health. Not product code.
import { createServer } from 'node:http'

const body = JSON.stringify({ status: 'ok' })
const server = createServer((_req, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) })
  res.end(body)
})
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const address = server.address() as { port: number }
  console.log(JSON.stringify({ msg: 'listening', url: `http://127.0.0.1:${address.port}` }))
})
process.once('SIGTERM', () => {
  server.close(() => process.exit(0))
  server.closeAllConnections()
})
