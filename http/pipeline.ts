// The request pipeline: `createFetch` turns any set of surfaces (surface.ts) into one fetch
// handler. Step by step (docs/architecture.md): build the context, route (router.ts), run the
// route's lifecycle check and handler, turn a thrown error into the surface's error body, add
// lifecycle and surface headers, then the headers every answer carries (security.ts), log, tell
// the telemetry (metrics and traces), and build the one Response.
import { buildContext, type ConnectionInfo, type PipelineConfig, type PipelineDeps, type RequestContext } from './context.ts'
import { errorReply } from './error-reply.ts'
import { BAD_TARGET, CLIENT_CLOSED, connectNotSupported, HttpError } from './errors.ts'
import type { IRequest } from 'itty-router'
import { isPromise, type Reply } from './reply.ts'
import { createRouting, match, type SegmentRouter } from './router.ts'
import { finish } from './security.ts'
import { BoundedMap } from './bounded-map.ts'
import type { Surface } from './surface.ts'

// The route contract, where the route files have always imported it from.
export type { BodyDoc, BodyMediaType, Method, OperationDoc, PublishedRoute, PublishedSurface, ResponseDoc, Route, RouteHandler, Surface } from './surface.ts'

export interface FetchHandler {
  /**
   * Answers a request: a Response when the answer needs no waiting (a 404, a preflight, a
   * refusal made before any I/O), else a promise of one, as Bun.serve, Deno.serve and @hono/node-server accept.
   * Callers `await` it.
   */
  fetch(request: Request, conn?: ConnectionInfo): Response | Promise<Response>
  /**
   * Our answer to what the runtime refuses before it becomes a Request (malformed HTTP, a bad
   * request target or Host, CONNECT, a connection over the cap, a headers timeout): the error in
   * the fallback surface's format with the headers every answer carries. `headers` are the
   * request's when the runtime parsed them (for CORS), else none.
   */
  refuse(error: HttpError, headers?: Headers | null, conn?: ConnectionInfo): Reply
  /** Running counts, for operators and tests. */
  readonly counters: Readonly<HandlerCounters>
}

export interface HandlerCounters {
  /** Requests whose client went away while sending the body (logged as `client aborted`). */
  clientAborts: number
}

export interface FetchOptions<C extends PipelineConfig, D extends PipelineDeps> {
  readonly config: C
  readonly deps: D
  /** The surface whose error format answers unknown paths. */
  readonly fallback: Surface<C, D>
}

export function createFetch<C extends PipelineConfig, D extends PipelineDeps>(surfaces: readonly Surface<C, D>[], options: FetchOptions<C, D>): FetchHandler {
  const { config, deps, fallback } = options
  const routing = createRouting(surfaces, fallback, config)
  const accessLog = config.logLevel === 'debug' || config.logLevel === 'info'
  const observer = deps.telemetry ?? null
  const timed = accessLog || observer !== null
  const counters: HandlerCounters = { clientAborts: 0 }
  const parseable = parseableUrls()

  /** The last steps of every answer: the headers every answer carries, the log line, the Response. */
  const respond = (reply: Reply, request: Request, ctx: RequestContext<C, D>, started: number): Response => {
    finish(reply, request, ctx)
    if (reply.status === CLIENT_CLOSED) {
      counters.clientAborts++
      deps.logger.log('info', 'client aborted', { requestId: ctx.requestId, method: request.method, path: pathOf(request.url).slice(0, 200), aborts: counters.clientAborts })
    }
    if (accessLog) {
      const path = pathOf(request.url)
      // The path only: a query string may hold a token someone sent by mistake.
      deps.logger.log('info', 'request', {
        requestId: ctx.requestId,
        method: request.method,
        path: path.length > 200 ? path.slice(0, 200) + '…' : path,
        status: reply.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
      })
    }
    observer?.answered(request, ctx.requestId, reply.status, reply.headers, started)
    // The one place a Response is built, from a plain headers record nothing reads back.
    return new Response(request.method === 'HEAD' ? null : (reply.stream ?? reply.body), { status: reply.status, headers: reply.headers })
  }

  /** A request the router could not take (or CONNECT). */
  const failed = (request: Request, error: unknown, ctx: RequestContext<C, D>): Reply =>
    // A URL the runtime let through that the router cannot parse (Bun builds one from a Host like
    // `a b`): the client's request is at fault, not us.
    errorReply(fallback, URL.canParse(request.url) ? error : new HttpError(400, BAD_TARGET), ctx)

  /** The route's answer, else the path's 404. */
  const route = (router: SegmentRouter<C, D>, request: Request, path: string, ctx: RequestContext<C, D>): Reply | Promise<Reply> => {
    // itty-router's fetch refuses a URL it cannot parse (Bun builds one from a Host like `a b`);
    // match skips that parse, so the check is made here.
    if (!parseable(request.url)) throw new HttpError(400, BAD_TARGET)
    // HEAD is GET without the body (RFC 9110 §9.3.2).
    const routed = (request.method === 'HEAD' ? new Request(request, { method: 'GET' }) : request) as IRequest
    return match(router, routed, path, ctx) ?? routing.notFound(routed, path, ctx)
  }

  return {
    counters,
    refuse(error: HttpError, headers?: Headers | null, conn?: ConnectionInfo): Reply {
      const request = new Request('http://refused.invalid/', headers ? { headers } : {})
      // A fresh id: the request never got far enough for its own X-Request-Id to be believed.
      const ctx = buildContext(request, config, deps, conn, crypto.randomUUID())
      const out = errorReply(fallback, error, ctx)
      routing.addSurfaceHeaders(out, fallback)
      finish(out, request, ctx)
      return out
    },
    fetch(request: Request, conn?: ConnectionInfo): Response | Promise<Response> {
      const started = timed ? performance.now() : 0
      const ctx = buildContext(request, config, deps, conn)
      // Runtimes that pass CONNECT on (Bun) would route it to "/" and answer 404.
      if (request.method === 'CONNECT') return respond(failed(request, connectNotSupported(), ctx), request, ctx, started)
      const path = pathOf(request.url)
      const router = routing.routerFor(path)
      // A first segment no route has: its 404 (or preflight) needs no waiting, so it is a Response
      // rather than a promise of one, which the runtime adapter writes at once.
      if (!router) return respond(routing.notFound(request, path, ctx), request, ctx, started)
      let answer: Reply | Promise<Reply>
      try {
        answer = route(router, request, path, ctx)
      } catch (error) {
        return respond(failed(request, error, ctx), request, ctx, started)
      }
      // A route that answered without waiting (a refusal before any I/O) is returned as it is.
      if (!isPromise(answer)) return respond(answer, request, ctx, started)
      return answer.then(
        (reply) => respond(reply, request, ctx, started),
        (error: unknown) => respond(failed(request, error, ctx), request, ctx, started),
      )
    },
  }
}

/**
 * URL.canParse, remembered by scheme and authority: parsing an http(s) URL can fail only there (a
 * bad host or port), never in its path, query or fragment, and clients send the same few Host
 * headers. At most 256 authorities are remembered: a flood of made-up Host headers empties the
 * memory, it never grows it further.
 */
function parseableUrls(): (url: string) => boolean {
  const known = new BoundedMap<string, boolean>(256)
  return (url) => {
    const authorityStart = url.indexOf('//') + 2
    const slash = url.indexOf('/', authorityStart)
    const authority = slash < 0 ? url : url.slice(0, slash)
    // Only a plain "scheme://authority": anything else in it is checked on its own, every time.
    if (authorityStart < 2 || /[?#\\]/.test(authority)) return URL.canParse(url)
    let answer = known.get(authority)
    if (answer === undefined) known.set(authority, (answer = URL.canParse(url)))
    return answer
  }
}

/**
 * The pathname of a request URL without parsing it as a URL: request.url is absolute and already
 * normalized (the runtime made it), so the path runs from the first "/" after "//" to "?"/"#".
 */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start < 0) return '/'
  let end = url.length
  const query = url.indexOf('?', start)
  if (query >= 0) end = query
  const hash = url.indexOf('#', start)
  if (hash >= 0 && hash < end) end = hash
  return url.slice(start, end)
}
