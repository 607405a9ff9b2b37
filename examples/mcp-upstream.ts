// A small upstream MCP server to put behind Steward's gateway (README walkthrough, tests, bench),
// built only with the official SDK: createMcpHandler serves protocol revision 2026-07-28 and
// 2025-era clients statelessly, on loopback, behind the SDK's Host and Origin checks. Its tools:
// `echo` (answers the text it is given) and `refund` (pretends to refund an order). It counts the
// tool calls it serves, so one can see that a denied call never arrives: GET /calls.
//
//   node --import tsx examples/mcp-upstream.ts [--port 8931]
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { realpathSync } from 'node:fs'
import { getRequestListener } from '@hono/node-server'
import {
  createMcpHandler,
  fromJsonSchema,
  hostHeaderValidationResponse,
  localhostAllowedHostnames,
  localhostAllowedOrigins,
  McpServer,
  originValidationResponse,
  type CallToolResult,
} from '@modelcontextprotocol/server'

export interface UpstreamCalls {
  /** tools/call requests served, all tools together. */
  total: number
  byTool: Record<string, number>
}

export interface RunningUpstream {
  /** The MCP endpoint, e.g. http://127.0.0.1:8931/mcp. */
  readonly url: string
  readonly calls: UpstreamCalls
  close(): Promise<void>
}

const EchoInput = fromJsonSchema<{ text: string }>({
  type: 'object',
  properties: { text: { type: 'string', description: 'What to say back.' } },
  required: ['text'],
  additionalProperties: false,
})

const RefundInput = fromJsonSchema<{ order: string; amount: number }>({
  type: 'object',
  properties: { order: { type: 'string', description: 'The order to refund.' }, amount: { type: 'number', description: 'The amount, in euros.' } },
  required: ['order', 'amount'],
  additionalProperties: false,
})

function text(value: string): CallToolResult {
  return { content: [{ type: 'text', text: value }] }
}

/** The MCP server of one request (createMcpHandler builds one per request). */
function buildServer(calls: UpstreamCalls): McpServer {
  const server = new McpServer({ name: 'example-upstream', version: '1.0.0' })
  const count = (tool: string) => {
    calls.total++
    calls.byTool[tool] = (calls.byTool[tool] ?? 0) + 1
  }
  server.registerTool('echo', { description: 'Answers the text it is given.', inputSchema: EchoInput }, async ({ text: said }) => {
    count('echo')
    return text(said)
  })
  server.registerTool('refund', { description: 'Refunds an order (an example: nothing is paid back).', inputSchema: RefundInput }, async ({ order, amount }) => {
    count('refund')
    return text(`Refunded ${amount} EUR on order ${order}`)
  })
  return server
}

/** Starts the upstream on loopback; port 0 picks a free one. */
export async function startUpstream(options: { port?: number; host?: string } = {}): Promise<RunningUpstream> {
  const calls: UpstreamCalls = { total: 0, byTool: {} }
  const handler = createMcpHandler(() => buildServer(calls))
  const hosts = localhostAllowedHostnames()
  const origins = localhostAllowedOrigins()
  const listener = getRequestListener(async (request: Request) => {
    const path = new URL(request.url).pathname
    if (path === '/calls' && request.method === 'GET') return Response.json(calls)
    if (path !== '/mcp') return new Response('Not found\n', { status: 404 })
    // The SDK's entry checks nothing itself: DNS rebinding is refused here, as its docs ask.
    return hostHeaderValidationResponse(request, hosts) ?? originValidationResponse(request, origins) ?? handler.fetch(request)
  })
  const server: Server = createServer(listener)
  const host = options.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  return {
    url: `http://${host}:${port}/mcp`,
    calls,
    async close() {
      await handler.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function isMain(): boolean {
  const script = process.argv[1]
  if (!script) return false
  try {
    return import.meta.url === pathToFileURL(realpathSync(script)).href
  } catch {
    return false
  }
}

if (isMain()) {
  const at = process.argv.indexOf('--port')
  const port = at >= 0 ? Number(process.argv[at + 1]) : 8931
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error('usage: node --import tsx examples/mcp-upstream.ts [--port 8931]')
    process.exit(2)
  }
  const upstream = await startUpstream({ port })
  console.log(`example upstream MCP server on ${upstream.url} (tool calls served: GET ${upstream.url.replace(/\/mcp$/, '/calls')})`)
  const stop = () => void upstream.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
