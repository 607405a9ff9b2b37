// The request pipeline: each surface is a list of routes plus its error format; `createFetch`
// turns any set of surfaces into one fetch handler over itty-router's route tables. Step by step
// (docs/architecture.md): build the context, route, run the route's lifecycle check and handler,
// turn a thrown error into the surface's error body, add lifecycle and surface headers, then the
// headers every answer carries (security.ts), log, and build the one Response.
import { Router, type IRequest, type RouteEntry } from 'itty-router'
import type { GenericSchema } from 'valibot'
import { errorCode } from '../log.ts'
import { buildContext, type ConnectionInfo, type PipelineConfig, type PipelineDeps, type RequestContext } from './context.ts'
import { preflight } from './cors.ts'
import { BAD_TARGET, CLIENT_CLOSED, ClientAbortError, connectNotSupported, HttpError, isDatabaseUnavailable } from './errors.ts'
import { createVersionLifecycle, isSunset, lifecycleHeaders } from './lifecycle.ts'
import { BoundedMap } from './bounded-map.ts'
import { json, jsonText, setHeaders, type Reply } from './reply.ts'
import { finish } from './security.ts'

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * Handlers answer with a Reply (reply.ts `json`, `created`, `noContent`); fetch builds the Response.
 * A refusal may be thrown as an HttpError or returned as one; the pipeline answers both the same
 * way. Returning is for refusals on hot paths (a bad credential): in a server, every throw that
 * crosses an `await` cost several microseconds (docs/architecture.md).
 */
export type RouteHandler<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> = (
  request: IRequest,
  ctx: RequestContext<C, D>,
) => Reply | HttpError | Promise<Reply | HttpError>

export interface ResponseDoc {
  readonly description: string
  /** valibot schema of the JSON body; omitted for bodiless responses. */
  readonly schema?: GenericSchema
  /** Media type of the body when it is not application/json (e.g. text/plain for llms.txt). */
  readonly mediaType?: string
  /** Response headers worth documenting (name → description). */
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * A request body as published and as validated: `readInput` (body.ts) reads a body with exactly
 * these media types and this schema, so the OpenAPI document cannot drift from the code.
 */
export interface BodyDoc<S extends GenericSchema = GenericSchema> {
  readonly schema: S
  /** application/json, application/x-www-form-urlencoded, text/plain (holding JSON). */
  readonly mediaTypes: readonly BodyMediaType[]
  /** false: an empty body reads as {}. */
  readonly required: boolean
  /** Messages that win over any other problem, in this order (e.g. "Missing required fields"). */
  readonly precedence?: readonly string[]
  /** A JSON null counts as an absent field. */
  readonly nullIsAbsent?: boolean
}

export type BodyMediaType = 'application/json' | 'application/merge-patch+json' | 'application/x-www-form-urlencoded' | 'text/plain'

/**
 * What the OpenAPI document says of a route. Written beside the route, from the same valibot
 * schemas the handler validates with, so the document cannot drift from the code.
 */
export interface OperationDoc {
  readonly operationId: string
  readonly summary: string
  readonly description?: string
  readonly tags: readonly string[]
  /** null: public (`security: []`); otherwise the bearer scheme with these scopes. */
  readonly scopes: readonly string[] | null
  /** valibot object schema of the query parameters. */
  readonly query?: GenericSchema
  /** The request body: the handler reads it through this very object (body.ts `readInput`). */
  readonly body?: BodyDoc
  /** Request headers worth documenting (name → description), e.g. Service-Api-Version. */
  readonly headers?: Readonly<Record<string, string>>
  readonly responses: Readonly<Record<number, ResponseDoc>>
  readonly deprecated?: boolean
}

export interface Route<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> {
  readonly method: Method
  /** itty-router pattern, e.g. "/policies/:policy_id". */
  readonly path: string
  readonly handler: RouteHandler<C, D>
  /** What the OpenAPI document says of it: every route is published. */
  readonly doc: OperationDoc
}

export interface Surface<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> {
  readonly name: string
  readonly routes: readonly Route<C, D>[]
  /**
   * The body of an error response on this surface. A function of its arguments alone: the body of
   * a fixed refusal (errors.ts `fixedError`) is computed once and reused.
   */
  errorBody(status: number, error: HttpError): unknown
  /** Headers on every response of this surface (e.g. Cache-Control: no-store). */
  readonly headers?: Readonly<Record<string, string>>
  /** Starts background work (timers, LISTEN connections); nothing runs before it. */
  start?(): void
  /** Stops what start() began. */
  close?(): Promise<void>
}

/** What the discovery documents read of a route: its method, path and doc. */
export type PublishedRoute = Pick<Route, 'method' | 'path' | 'doc'>

/** What the discovery documents read of a surface: its name and routes, whatever its context types. */
export interface PublishedSurface {
  readonly name: string
  readonly routes: readonly PublishedRoute[]
}

export interface FetchHandler {
  /**
   * Answers a request: a Response when nothing had to be waited for (an unknown path), else a
   * promise of one, as Bun.serve, Deno.serve and @hono/node-server accept. Callers `await` it.
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

const ANY_METHOD = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const
const GENERIC_500 = 'Internal server error'
const UNAVAILABLE = 'Service temporarily unavailable; try again shortly'

/** Turns a thrown value into a reply in the surface's format; unknown errors are logged, never shown. */
function errorReply(surface: Surface<any, any>, error: unknown, ctx: RequestContext): Reply {
  let httpError: HttpError
  if (error instanceof HttpError) {
    httpError = error
  } else if (error instanceof ClientAbortError) {
    // Checked before the database test: a reset client stream carries ECONNRESET too. Logged and
    // counted by the fetch handler; the reply reaches nobody.
    httpError = new HttpError(CLIENT_CLOSED, error.message)
  } else if (isDatabaseUnavailable(error)) {
    ctx.deps.logger.log('warn', 'database unavailable', { requestId: ctx.requestId, code: errorCode(error) })
    httpError = new HttpError(503, UNAVAILABLE, { headers: { 'Retry-After': '5' } })
  } else {
    const e = error as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown }
    // Logged by name, code and message only: pg's `detail` can hold submitted values.
    ctx.deps.logger.log('error', 'unhandled error', {
      requestId: ctx.requestId,
      error: String(e?.name ?? 'Error'),
      code: errorCode(error),
      message: typeof e?.message === 'string' ? e.message.slice(0, 500) : null,
      stack: typeof e?.stack === 'string' ? e.stack.split('\n').slice(0, 6).join(' | ') : null,
    })
    httpError = new HttpError(500, GENERIC_500)
  }
  if (!httpError.fixed) return json(httpError.status, surface.errorBody(httpError.status, httpError), httpError.headers)
  // A fixed refusal (errors.ts `fixedError`) is the same on every request: its body, once per surface.
  let bodies = FIXED_BODIES.get(surface)
  if (bodies === undefined) FIXED_BODIES.set(surface, (bodies = new WeakMap()))
  let text = bodies.get(httpError)
  if (text === undefined) bodies.set(httpError, (text = JSON.stringify(surface.errorBody(httpError.status, httpError))))
  return jsonText(httpError.status, text, httpError.headers)
}

/** The serialized error body of each fixed refusal, per surface (errorReply). */
const FIXED_BODIES = new WeakMap<Surface<any, any>, WeakMap<HttpError, string>>()

export function createFetch<C extends PipelineConfig, D extends PipelineDeps>(surfaces: readonly Surface<C, D>[], options: FetchOptions<C, D>): FetchHandler {
  const { config, deps, fallback } = options
  // One itty-router per first path segment. itty-router tests each route's pattern in turn, so
  // one router for everything tested ~150 patterns before answering an unknown path (about a
  // third of a 404's cost); here a request meets only the routes that share its first segment,
  // and a segment no route has is a 404 without any. Every route starts with a literal segment.
  type SegmentRouter = ReturnType<typeof Router<IRequest, [RequestContext<C, D>]>>
  const routers = new Map<string, SegmentRouter>()
  const routerFor = (path: string): SegmentRouter => {
    const segment = firstSegment(path)
    if (segment.startsWith(':') || segment.includes('*')) throw new Error(`route ${path}: the first path segment must be literal`)
    let router = routers.get(segment)
    if (!router) routers.set(segment, (router = Router<IRequest, [RequestContext<C, D>]>()))
    return router
  }
  const allowByPath = new Map<string, Set<string>>()
  const surfaceByPath = new Map<string, Surface<C, D>>()
  const versionLifecycle = createVersionLifecycle(config.lifecycle)
  // Lifecycle (deprecation/sunset) is fixed per path: its headers are built once, here, and every
  // answer on the path (a route's, a 405, a preflight) carries them.
  const lifecycleByPath = new Map<string, Record<string, string>>()
  for (const [path, entry] of Object.entries(config.lifecycle.routes)) lifecycleByPath.set(path, lifecycleHeaders(entry))
  const accessLog = config.logLevel === 'debug' || config.logLevel === 'info'
  // Each surface's own headers, their names lower-cased once, here, rather than on every answer.
  const surfaceHeaders = new Map<Surface<C, D>, Readonly<Record<string, string>> | null>()
  for (const surface of [...surfaces, fallback]) {
    const given = surface.headers ? Object.entries(surface.headers) : []
    surfaceHeaders.set(surface, given.length > 0 ? Object.freeze(Object.fromEntries(given.map(([name, value]) => [name.toLowerCase(), value]))) : null)
  }
  /** Adds a surface's own headers to one of its answers. */
  const addSurfaceHeaders = (reply: Reply, surface: Surface<C, D>): void => {
    // Most answers come from a surface with none (the lead forms, the 404 of an unknown path).
    if (surface.headers === undefined) return
    const headers = surfaceHeaders.get(surface)
    if (headers) Object.assign(reply.headers, headers)
  }
  for (const surface of surfaces) {
    for (const route of surface.routes) {
      const handler = wrap(surface, route)
      routerFor(route.path)[route.method.toLowerCase() as 'get'](route.path, handler)
      const allowed = allowByPath.get(route.path) ?? new Set<string>()
      allowed.add(route.method)
      if (route.method === 'GET') allowed.add('HEAD')
      allowByPath.set(route.path, allowed)
      surfaceByPath.set(route.path, surface)
    }
  }
  // A known path with another method: 405 with Allow (RFC 9110 §15.5.6); OPTIONS answers CORS.
  for (const [path, allowed] of allowByPath) {
    const surface = surfaceByPath.get(path)!
    const allow = [...allowed]
    // A deprecated path says so on every answer, a 405 or a preflight included.
    const lifecycle = lifecycleByPath.get(path)
    routerFor(path).all(path, notAllowed)
    function notAllowed(request: IRequest, ctx: RequestContext<C, D>): Reply {
      let reply: Reply
      if (request.method === 'OPTIONS') reply = preflight(config, request, allow)
      else {
        const error = new HttpError(405, `Method ${request.method} is not allowed on ${path}; use ${allow.join(', ')}`, {
          headers: { Allow: [...allow, 'OPTIONS'].join(', ') },
        })
        reply = errorReply(surface, error, ctx)
        addSurfaceHeaders(reply, surface)
      }
      if (lifecycle) setHeaders(reply, lifecycle)
      return reply
    }
  }
  // An unknown path answers in the format of the surface that owns its first segment (a client of
  // the product API gets a product error for `/keys//rotate`), else in the fallback's.
  const surfaceBySegment = new Map<string, Surface<C, D>>()
  for (const [path, surface] of surfaceByPath) {
    const segment = firstSegment(path)
    if (!surfaceBySegment.has(segment)) surfaceBySegment.set(segment, surface)
  }
  const notFound = (request: IRequest, path: string, ctx: RequestContext<C, D>): Reply => {
    // A CORS preflight is answered whatever the path, so that a cross-origin client (the console
    // on another origin) reads the 404 below instead of a failed preflight it cannot tell apart
    // from a network error.
    if (request.method === 'OPTIONS' && request.headers.get('access-control-request-method') !== null) return preflight(config, request, ANY_METHOD)
    const surface = surfaceBySegment.get(firstSegment(path)) ?? fallback
    const reply = errorReply(surface, new HttpError(404, `No resource at ${path}`), ctx)
    addSurfaceHeaders(reply, surface)
    return reply
  }
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
    // The one place a Response is built, from a plain headers record nothing reads back.
    return new Response(request.method === 'HEAD' ? null : reply.body, { status: reply.status, headers: reply.headers })
  }
  /** A request the router could not take, or a route's rejection that escaped its wrapper. */
  const failed = (request: Request, error: unknown, ctx: RequestContext<C, D>): Reply =>
    // A URL the runtime let through that the router cannot parse (Bun builds one from a Host like
    // `a b`): the client's request is at fault, not us.
    errorReply(fallback, URL.canParse(request.url) ? error : new HttpError(400, BAD_TARGET), ctx)

  const counters: HandlerCounters = { clientAborts: 0 }
  const parseable = parseableUrls()
  return {
    counters,
    refuse(error: HttpError, headers?: Headers | null, conn?: ConnectionInfo): Reply {
      const request = new Request('http://refused.invalid/', headers ? { headers } : {})
      // A fresh id: the request never got far enough for its own X-Request-Id to be believed.
      const ctx = buildContext(request, config, deps, conn, crypto.randomUUID())
      const out = errorReply(fallback, error, ctx)
      addSurfaceHeaders(out, fallback)
      finish(out, request, ctx)
      return out
    },
    fetch(request: Request, conn?: ConnectionInfo): Response | Promise<Response> {
      const started = accessLog ? performance.now() : 0
      const ctx = buildContext(request, config, deps, conn)
      let routed: IRequest
      let path: string
      let answer: Reply | Promise<Reply> | undefined
      try {
        // Runtimes that pass CONNECT on (Bun) would route it to "/" and answer 404.
        if (request.method === 'CONNECT') throw connectNotSupported()
        // HEAD is GET without the body (RFC 9110 §9.3.2).
        routed = (request.method === 'HEAD' ? new Request(request, { method: 'GET' }) : request) as IRequest
        path = pathOf(request.url)
        const router = routers.get(firstSegment(path))
        // A path whose first segment no route has needs no waiting: its 404 (or preflight) is
        // returned as a Response, not a promise of one (docs/architecture.md, "Performance idioms").
        if (!router) return respond(notFound(routed, path, ctx), request, ctx, started)
        // itty-router's own fetch threw on a URL it cannot parse (Bun builds one from a Host like
        // `a b`); its table is walked here, so the check is made here, the same way.
        if (!parseable(request.url)) throw new HttpError(400, BAD_TARGET)
        answer = dispatch(router.routes, routed, path, ctx)
      } catch (error) {
        return respond(failed(request, error, ctx), request, ctx, started)
      }
      if (answer === undefined) return respond(notFound(routed, path, ctx), request, ctx, started)
      // A route that answered without waiting (a refusal before any I/O) is returned as it is.
      if (!isPromise(answer)) return respond(answer, request, ctx, started)
      return answer.then(
        (reply) => respond(reply, request, ctx, started),
        (error: unknown) => respond(failed(request, error, ctx), request, ctx, started),
      )
    },
  }

  /**
   * A route wrapped in its per-route steps: the sunset check, the error reply and the headers. Not
   * an async function: a handler that answers without waiting (a refusal before any I/O) gets its
   * reply back the same way, so the whole answer needs no promise.
   */
  function wrap(surface: Surface<C, D>, route: Route<C, D>) {
    const entry = config.lifecycle.routes[route.path]
    const lifecycle = lifecycleByPath.get(route.path)
    /** The route's headers on its reply, and a refusal turned into the surface's error body. */
    const settle = (answer: Reply | HttpError, request: IRequest, ctx: RequestContext<C, D>): Reply => {
      const reply = answer instanceof HttpError ? errorReply(surface, answer, ctx) : answer
      // The route's own lifecycle wins over the one of the version the client asked for.
      const version = versionLifecycle(request)
      if (version) setHeaders(reply, version)
      if (lifecycle) setHeaders(reply, lifecycle)
      addSurfaceHeaders(reply, surface)
      return reply
    }
    return (request: IRequest, ctx: RequestContext<C, D>): Reply | Promise<Reply> => {
      let answer: Reply | HttpError | Promise<Reply | HttpError>
      try {
        if (entry && isSunset(entry, ctx.now)) {
          const replacement = entry.replacement ? `; use ${entry.replacement} instead` : ''
          throw new HttpError(410, `This endpoint was retired on ${entry.sunset!.toUTCString()}${replacement}`)
        }
        answer = route.handler(request, ctx)
      } catch (error) {
        return settle(errorReply(surface, error, ctx), request, ctx)
      }
      if (!isPromise(answer)) return settle(answer, request, ctx)
      return answer.then(
        (resolved) => settle(resolved, request, ctx),
        (error: unknown) => settle(errorReply(surface, error, ctx), request, ctx),
      )
    }
  }
}

/**
 * Finds the first route of the table whose method and pattern match, as itty-router's own `fetch`
 * does (same table, same order, same `params` and `route` on the request), and calls it. Unlike
 * that `fetch`, it is not an async function, and it does not parse the query string (no route
 * reads `request.query`; list routes parse their query with their schema): an answer that needs
 * no waiting stays a Reply, which the runtime adapter writes at once (docs/architecture.md).
 */
function dispatch<C extends PipelineConfig, D extends PipelineDeps>(
  routes: readonly RouteEntry<IRequest, [RequestContext<C, D>]>[],
  request: IRequest,
  /** pathOf(request.url), which the caller has already worked out. */
  path: string,
  ctx: RequestContext<C, D>,
): Reply | Promise<Reply> | undefined {
  const method = request.method
  for (const [routeMethod, pattern, handlers, route] of routes) {
    if (routeMethod !== method && routeMethod !== 'ALL') continue
    const match = pattern.exec(path)
    if (match === null) continue
    request.params = match.groups ?? {}
    request.route = route!
    // Every route registers exactly one handler (createFetch), which always answers.
    return handlers[0]!(request, ctx) as Reply | Promise<Reply>
  }
  return undefined
}

/**
 * URL.canParse, remembered by scheme and authority: parsing an http(s) URL can fail only there
 * (a bad host or port), never in its path, query or fragment, and clients send the same few Host
 * headers. The check was about a twentieth of a malformed-key 401's CPU (docs/architecture.md). At
 * most 256 authorities are remembered (a flood of made-up Host headers empties the memory, it never
 * grows it further).
 */
function parseableUrls(): (url: string) => boolean {
  const known = new BoundedMap<string, boolean>(256)
  // The "scheme://authority" of the last parseable URL: a URL that begins with it and then "/" has
  // that very authority, and needs neither the slice nor the lookup (clients repeat their Host).
  let last = ''
  return (url) => {
    if (last !== '' && url.startsWith(last) && url.charCodeAt(last.length) === 47) return true
    const authorityStart = url.indexOf('//') + 2
    const slash = url.indexOf('/', authorityStart)
    const authority = slash < 0 ? url : url.slice(0, slash)
    // Only a plain "scheme://authority": anything else in it is checked on its own, every time.
    if (authorityStart < 2 || /[?#\\]/.test(authority)) return URL.canParse(url)
    let answer = known.get(authority)
    if (answer === undefined) known.set(authority, (answer = URL.canParse(url)))
    if (answer && slash >= 0) last = authority
    return answer
  }
}

function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function'
}

function firstSegment(path: string): string {
  const end = path.indexOf('/', 1)
  return end < 0 ? path.slice(1) : path.slice(1, end)
}

/**
 * The pathname of a request URL without parsing it again (the router already did): request.url is
 * an absolute, already-normalized URL, so the path runs from the first "/" after "//" to "?"/"#".
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
