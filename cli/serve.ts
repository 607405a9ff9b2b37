// Serves a fetch handler on whichever runtime runs us: Bun.serve, Deno.serve, or Node through
// @hono/node-server. Each passes the peer address (and TLS) on as ConnectionInfo.
import { readFileSync } from 'node:fs'
import type { Config } from '../config.ts'
import type { ConnectionInfo } from '../routes/http.ts'

export interface Served {
  readonly runtime: 'node' | 'bun' | 'deno'
  readonly port: number
  /** Stops accepting connections, lets in-flight requests finish, then resolves. */
  close(): Promise<void>
}

type Fetch = (request: Request, conn?: ConnectionInfo) => Promise<Response>

const GRACE_MS = 10_000

export async function serve(fetch: Fetch, config: Config): Promise<Served> {
  const tls = config.tlsCertFile && config.tlsKeyFile
    ? { cert: readFileSync(config.tlsCertFile, 'utf8'), key: readFileSync(config.tlsKeyFile, 'utf8') }
    : null
  const g = globalThis as Record<string, any>
  if (g.Bun) {
    const server = g.Bun.serve({
      port: config.port,
      hostname: config.host,
      ...(tls ? { tls } : {}),
      fetch: (request: Request, srv: any) =>
        fetch(request, { remoteAddress: srv.requestIP(request)?.address, tls: tls !== null }),
    })
    return { runtime: 'bun', port: server.port, close: () => server.stop(false) }
  }
  if (g.Deno) {
    let port = config.port
    const listening = new Promise<void>((resolve) => {
      const server = g.Deno.serve(
        {
          port: config.port,
          hostname: config.host,
          ...(tls ?? {}),
          onListen: (addr: { port: number }) => {
            port = addr.port
            resolve()
          },
        },
        (request: Request, info: { remoteAddr: { hostname: string } }) =>
          fetch(request, { remoteAddress: info.remoteAddr.hostname, tls: tls !== null }),
      )
      g.__stewardDenoServer = server
    })
    await listening
    const server = g.__stewardDenoServer
    delete g.__stewardDenoServer
    return { runtime: 'deno', port, close: () => server.shutdown() }
  }
  const { serve: nodeServe } = await import('@hono/node-server')
  const https = tls ? await import('node:https') : null
  return await new Promise<Served>((resolve, reject) => {
    const server = nodeServe(
      {
        port: config.port,
        hostname: config.host,
        fetch: (request, env) => {
          const socket = env.incoming.socket as import('node:tls').TLSSocket
          return fetch(request, { remoteAddress: socket.remoteAddress, tls: socket.encrypted === true })
        },
        ...(https && tls ? { createServer: https.createServer, serverOptions: { cert: tls.cert, key: tls.key } } : {}),
      },
      (info) => {
        const http = server as import('node:http').Server
        // Node answers malformed HTTP itself with an empty 400; answer with JSON instead.
        http.removeAllListeners('clientError')
        http.on('clientError', (_error, socket) => {
          if (socket.writable) {
            const body = '{"error":"Malformed HTTP request"}'
            socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`)
          } else socket.destroy()
        })
        resolve({
          runtime: 'node',
          port: info.port,
          close: () =>
            new Promise<void>((done) => {
              const force = setTimeout(() => http.closeAllConnections(), GRACE_MS).unref()
              // Idle keep-alive sockets would hold shutdown for seconds: close them as they go idle.
              const sweep = setInterval(() => http.closeIdleConnections(), 100).unref()
              http.close(() => {
                clearTimeout(force)
                clearInterval(sweep)
                done()
              })
              http.closeIdleConnections()
            }),
        })
      },
    )
    ;(server as import('node:http').Server).once('error', reject)
  })
}
