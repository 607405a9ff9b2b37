// Serves a fetch handler on whichever runtime runs us: Bun.serve, Deno.serve, or Node through
// @hono/node-server. Each passes the peer address (and TLS) on as ConnectionInfo.
//
// Every answer is ours: what the runtime refuses before a Request exists (malformed HTTP, a bad
// request target or Host, CONNECT, a headers timeout, a connection over the cap) is answered
// through the handler's `refuse`, in the same JSON error format and with the same headers as
// any other answer. Node lets us do all of that; Bun and Deno answer some of it themselves.
import { readFileSync } from 'node:fs'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Config } from '../config.ts'
import type { ConnectionInfo } from '../http/context.ts'
import { BAD_TARGET, connectNotSupported, HttpError, REASON } from '../http/errors.ts'
import type { FetchHandler } from '../http/pipeline.ts'
import type { Reply } from '../http/reply.ts'

export interface Served {
  readonly runtime: 'node' | 'bun' | 'deno'
  readonly port: number
  /** Stops accepting connections, lets in-flight requests finish, then resolves. */
  close(): Promise<void>
}

type Handler = Pick<FetchHandler, 'fetch' | 'refuse'>

const GRACE_MS = 10_000
/**
 * How long a connection we close keeps reading (and discarding) what the client still sends.
 * Closing a socket with unread bytes makes the kernel send a reset, and a client that is still
 * uploading may then lose the answer it was sent (a 413 or 408) before reading it.
 */
const LINGER_MS = 2_000

export async function serve(app: Handler, config: Config): Promise<Served> {
  const tls = config.tlsCertFile && config.tlsKeyFile
    ? { cert: readFileSync(config.tlsCertFile, 'utf8'), key: readFileSync(config.tlsKeyFile, 'utf8') }
    : null
  const g = globalThis as Record<string, any>
  if (g.Bun) return serveBun(g.Bun, app, config, tls)
  if (g.Deno) return serveDeno(g.Deno, app, config, tls)
  return serveNode(app, config, tls)
}

type Tls = { cert: string; key: string } | null

/**
 * Loads Node's HTTP adapter (and the fetch classes of Node it pulls in) on a
 * later turn of the event loop: called before the database opens, the loading runs while the
 * embedded database waits on its file reads and WebAssembly compilation instead of after them.
 * (Not at once: inside the bundle the import is a function call, which would run before the
 * data-directory lock instead of beside the database's waits.)
 */
export function preloadServe(): void {
  const g = globalThis as Record<string, unknown>
  if (g.Bun || g.Deno) return
  setImmediate(() => void import('@hono/node-server').catch(() => {}))
}

/**
 * Bun answers malformed HTTP, CONNECT and a missing Host itself (documented for operators); it
 * has no connection cap or headers timeout, only an idle timeout, set from HEADERS_TIMEOUT_MS.
 */
function serveBun(bun: any, app: Handler, config: Config, tls: Tls): Served {
  const server = bun.serve({
    port: config.port,
    hostname: config.host,
    ...(tls ? { tls } : {}),
    // Seconds, 1..255: a connection that sends nothing for this long is closed.
    idleTimeout: Math.min(255, Math.max(1, Math.ceil(config.headersTimeoutMs / 1000))),
    fetch: (request: Request, srv: any) => app.fetch(request, { remoteAddress: srv.requestIP(request)?.address, tls: tls !== null }),
    error: (error: unknown) => toResponse(app.refuse(asHttpError(error))),
  })
  return { runtime: 'bun', port: server.port, close: () => server.stop(false) }
}

/** Deno answers malformed HTTP itself and has no connection cap or timeouts to set. */
async function serveDeno(deno: any, app: Handler, config: Config, tls: Tls): Promise<Served> {
  let port = config.port
  let server: any
  await new Promise<void>((resolve) => {
    server = deno.serve(
      {
        port: config.port,
        hostname: config.host,
        ...tls,
        onListen: (addr: { port: number }) => {
          port = addr.port
          resolve()
        },
        onError: (error: unknown) => toResponse(app.refuse(asHttpError(error))),
      },
      (request: Request, info: { remoteAddr: { hostname: string } }) =>
        app.fetch(request, { remoteAddress: info.remoteAddr.hostname, tls: tls !== null }),
    )
  })
  return { runtime: 'deno', port, close: () => server.shutdown() }
}

/** A thrown value from the runtime's own request handling: never shown, a generic 500. */
function asHttpError(error: unknown): HttpError {
  return error instanceof HttpError ? error : new HttpError(500, 'Internal server error')
}

function toResponse(reply: Reply): Response {
  return new Response(reply.body, { status: reply.status, headers: { ...reply.headers, connection: 'close' } })
}

async function serveNode(app: Handler, config: Config, tls: Tls): Promise<Served> {
  const { getRequestListener, RequestError } = await import('@hono/node-server')
  const http = tls ? await import('node:https') : await import('node:http')
  const connOf = (socket: Socket): ConnectionInfo => ({
    remoteAddress: socket.remoteAddress,
    tls: (socket as import('node:tls').TLSSocket).encrypted === true,
  })

  // The exchange @hono/node-server is building a Request for: its errorHandler is called
  // synchronously from inside the listener when that fails, with the error only.
  let building: { incoming: IncomingMessage; outgoing: ServerResponse } | null = null
  const listener = getRequestListener((request, env) => app.fetch(request, connOf(env.incoming.socket)), {
    hostname: config.host,
    errorHandler: (error) => {
      const exchange = building
      // A URL or Host @hono/node-server cannot turn into a Request (e.g. `GET /\health`).
      const httpError = error instanceof RequestError
        ? new HttpError(400, `${BAD_TARGET}: ${error.message}`)
        : asHttpError(error)
      if (exchange === null) return toResponse(app.refuse(httpError))
      answer(exchange.incoming, exchange.outgoing, httpError)
    },
  })

  const answer = (incoming: IncomingMessage, outgoing: ServerResponse, error: HttpError): void => {
    const origin = incoming.headers.origin
    const reply = app.refuse(error, new Headers(origin ? { origin } : {}), connOf(incoming.socket))
    const body = reply.body ?? ''
    outgoing.writeHead(reply.status, { ...reply.headers, 'content-length': Buffer.byteLength(body), connection: 'close' })
    outgoing.end(body)
  }

  const onRequest = (incoming: IncomingMessage, outgoing: ServerResponse): void => {
    lingerOnClose(incoming.socket)
    // Node's own check answers a bare 400; we turned it off (requireHostHeader) to answer here.
    if (incoming.headers.host === undefined && incoming.httpVersion !== '1.0') {
      return answer(incoming, outgoing, new HttpError(400, 'The Host header is required'))
    }
    if (incoming.url === '*') {
      return answer(incoming, outgoing, new HttpError(400, 'The request target * is not supported; send OPTIONS to a path'))
    }
    building = { incoming, outgoing }
    try {
      void listener(incoming, outgoing)
    } finally {
      building = null
    }
  }

  const requestTimeout = config.headersTimeoutMs + config.bodyTimeoutMs + 1000
  const options = {
    requireHostHeader: false,
    headersTimeout: config.headersTimeoutMs,
    // A backstop for a body nobody reads; the body reader's own 408 comes first.
    requestTimeout,
    // Node checks both timeouts on this interval (30 s by default, longer than the timeouts).
    connectionsCheckingInterval: Math.max(50, Math.min(30_000, Math.floor(config.headersTimeoutMs / 4))),
    ...(tls ? { cert: tls.cert, key: tls.key } : {}),
  }
  const server: Server = (http.createServer as (options: object, listener: typeof onRequest) => Server)(options, onRequest)
  answerClientErrors(server, app, connOf)
  answerConnect(server, app, connOf)
  capConnections(server, app, config, tls !== null)

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(config.port, config.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  return {
    runtime: 'node',
    port: typeof address === 'object' && address ? address.port : config.port,
    close: () =>
      new Promise<void>((done) => {
        const force = setTimeout(() => server.closeAllConnections(), GRACE_MS).unref()
        // Idle keep-alive sockets would hold shutdown for seconds: close them as they go idle.
        const sweep = setInterval(() => server.closeIdleConnections(), 100).unref()
        server.close(() => {
          clearTimeout(force)
          clearInterval(sweep)
          done()
        })
        server.closeIdleConnections()
      }),
  }
}

/** An answer written straight to a socket, for when Node never made a request of it. */
function rawResponse(reply: Reply): string {
  const body = reply.body ?? ''
  let head = `HTTP/1.1 ${reply.status} ${REASON[reply.status] ?? 'Error'}\r\n`
  for (const [name, value] of Object.entries(reply.headers)) {
    if (name !== 'connection' && name !== 'content-length') head += `${name}: ${value}\r\n`
  }
  return `${head}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
}

/** Writes the last bytes of a connection, then closes it without a reset (see LINGER_MS). */
function endSocket(socket: Socket, bytes: string): void {
  socket.on('error', () => {})
  socket.resume()
  socket.end(bytes)
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref()
  socket.once('close', () => clearTimeout(timer))
}

const lingering = new WeakSet<Socket>()

/**
 * Node destroys a socket as soon as a `Connection: close` answer is written (destroySoon): with
 * request bytes still arriving (a 413 or 408 before the body ended) that is a TCP reset, and
 * the client may lose the answer. Instead: end our side, let the rest be read and dropped, and
 * destroy after LINGER_MS if the client has not closed by then.
 */
function lingerOnClose(socket: Socket): void {
  if (lingering.has(socket)) return
  lingering.add(socket)
  socket.destroySoon = function lingeringClose(this: Socket): void {
    if (this.destroyed) return
    if (this.writable) this.end()
    this.resume()
    const timer = setTimeout(() => this.destroy(), LINGER_MS).unref()
    this.once('close', () => clearTimeout(timer))
  }
}

/** Malformed HTTP, oversized headers and the headers/request timeouts: our JSON, not Node's bare answer. */
function answerClientErrors(server: Server, app: Handler, connOf: (socket: Socket) => ConnectionInfo): void {
  server.removeAllListeners('clientError')
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (error.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
      socket.destroy()
      return
    }
    let httpError: HttpError
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') httpError = new HttpError(408, 'The request did not arrive in time')
    else if (error.code === 'HPE_HEADER_OVERFLOW') httpError = new HttpError(431, 'Request headers are too large')
    else httpError = new HttpError(400, 'Malformed HTTP request')
    endSocket(socket, rawResponse(app.refuse(httpError, null, connOf(socket))))
  })
}

/** CONNECT asks us to be a proxy: Node hands it to 'connect' listeners, or drops it silently. */
function answerConnect(server: Server, app: Handler, connOf: (socket: Socket) => ConnectionInfo): void {
  server.on('connect', (request: IncomingMessage, socket: Socket) => {
    const origin = request.headers.origin
    endSocket(socket, rawResponse(app.refuse(connectNotSupported(), new Headers(origin ? { origin } : {}), connOf(socket))))
  })
}

/**
 * Caps open connections, in total and per client address, before Node gives them an HTTP
 * parser: thousands of slow connections would otherwise exhaust file descriptors and memory and
 * deny everyone. The excess gets a short 503 (plain HTTP) or is closed (TLS, where a plain
 * answer would be garbage), and the others keep being served. Trusted proxies are exempt from
 * the per-client cap: every client behind them shares their address.
 */
function capConnections(server: Server, app: Handler, config: Config, tls: boolean): void {
  const accept = server.listeners('connection') as Array<(socket: Socket) => void>
  server.removeAllListeners('connection')
  const perClient = new Map<string, number>()
  let open = 0
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? ''
    const mine = perClient.get(address) ?? 0
    const exempt = config.trustProxy === '*' || config.trustProxy.includes(address)
    if (open >= config.maxConnections || (!exempt && mine >= config.maxConnectionsPerClient)) {
      refuseConnection(socket, app, tls, open >= config.maxConnections)
      return
    }
    open++
    perClient.set(address, mine + 1)
    socket.once('close', () => {
      open--
      const left = (perClient.get(address) ?? 1) - 1
      if (left > 0) perClient.set(address, left)
      else perClient.delete(address)
    })
    for (const listener of accept) listener.call(server, socket)
  })
}

function refuseConnection(socket: Socket, app: Handler, tls: boolean, full: boolean): void {
  if (tls) {
    socket.destroy()
    return
  }
  const message = full ? 'The server has too many open connections; try again shortly' : 'Too many open connections from your address; close some and try again'
  const error = new HttpError(503, message, { headers: { 'Retry-After': '1' } })
  endSocket(socket, rawResponse(app.refuse(error, null, { remoteAddress: socket.remoteAddress, tls: false })))
}
