// Every surface's routes as itty-routers, one per first path segment, registered through the
// router's own API. A request meets only the routes that share its first segment, and a segment
// no route has is a 404 that needs no router and no waiting. `match` walks the router's public
// `routes` table as its `fetch` does, but without a promise (see match below). Each
// route is wrapped in its per-route steps (sunset, lifecycle headers, the surface's error format
// and headers); each path also answers its other methods (405 with Allow) and OPTIONS.
import { IttyRouter, type IRequest, type IttyRouterType } from 'itty-router'
import { isPromise } from './reply.ts'
import type { PipelineConfig, PipelineDeps, RequestContext } from './context.ts'
import { preflight } from './cors.ts'
import { errorReply } from './error-reply.ts'
import { HttpError } from './errors.ts'
import { createVersionLifecycle, isSunset, lifecycleHeaders } from './lifecycle.ts'
import { setHeaders, type Reply } from './reply.ts'
import type { Route, Surface } from './surface.ts'

export type SegmentRouter<C extends PipelineConfig, D extends PipelineDeps> = IttyRouterType<IRequest, [RequestContext<C, D>], Reply | undefined>

export interface Routing<C extends PipelineConfig, D extends PipelineDeps> {
  /** The router of the path's first segment; none when no route starts with that segment. */
  routerFor(path: string): SegmentRouter<C, D> | undefined
  /**
   * The answer to a path no route matches: a 404 in the format of the surface that owns its first
   * segment (a client of the product API gets a product error for `/keys//rotate`), else in the
   * fallback's.
   */
  notFound(request: Request, path: string, ctx: RequestContext<C, D>): Reply
  /** Adds a surface's own headers to one of its answers. */
  addSurfaceHeaders(reply: Reply, surface: Surface<C, D>): void
}

/**
 * The first route of the router whose method and pattern match, called, as itty-router's own
 * `fetch` does (the same public `routes` table, order, `params` and `route`); undefined: none.
 * Unlike `fetch` it is not async and parses no query string (list routes parse theirs with their
 * schema), so a refusal made before any I/O (a malformed key's 401) stays a Reply that the runtime
 * adapter writes at once: `fetch` made every routed answer a promise and cost the 401 about a
 * quarter more CPU, below the Fastify goal (bench/RESULTS.md).
 */
export function match<C extends PipelineConfig, D extends PipelineDeps>(
  router: SegmentRouter<C, D>,
  request: IRequest,
  /** pathOf(request.url), already worked out by the caller. */
  path: string,
  ctx: RequestContext<C, D>,
): Reply | Promise<Reply> | undefined {
  const method = request.method
  for (const [routeMethod, pattern, handlers, route] of router.routes) {
    if (routeMethod !== method && routeMethod !== 'ALL') continue
    const found = pattern.exec(path)
    if (found === null) continue
    request.params = found.groups ?? {}
    request.route = route!
    // Every path registers exactly one handler per method, which always answers.
    return handlers[0]!(request, ctx) as Reply | Promise<Reply>
  }
  return undefined
}

const ANY_METHOD = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'] as const

export function createRouting<C extends PipelineConfig, D extends PipelineDeps>(
  surfaces: readonly Surface<C, D>[],
  fallback: Surface<C, D>,
  config: C,
): Routing<C, D> {
  const routers = new Map<string, SegmentRouter<C, D>>()
  const surfaceBySegment = new Map<string, Surface<C, D>>()
  const allowByPath = new Map<string, Set<string>>()
  const surfaceByPath = new Map<string, Surface<C, D>>()
  const addSurfaceHeaders = surfaceHeaders([...surfaces, fallback])
  const versionLifecycle = createVersionLifecycle(config.lifecycle)
  // Lifecycle (deprecation/sunset) is fixed per path: every answer on the path (a route's, a 405,
  // a preflight) carries its headers.
  const lifecycleByPath = new Map<string, Record<string, string>>()
  for (const [path, entry] of Object.entries(config.lifecycle.routes)) lifecycleByPath.set(path, lifecycleHeaders(entry))

  const routerFor = (path: string): SegmentRouter<C, D> => {
    const segment = firstSegment(path)
    if (segment.startsWith(':') || segment.includes('*')) throw new Error(`route ${path}: the first path segment must be literal`)
    let router = routers.get(segment)
    if (!router) routers.set(segment, (router = IttyRouter<IRequest, [RequestContext<C, D>], Reply | undefined>()))
    return router
  }

  /**
   * A route wrapped in its per-route steps: the sunset check, the error reply and the headers. Not
   * an async function, so a handler that answers without waiting gets its reply back the same way.
   */
  const wrap = (surface: Surface<C, D>, route: Route<C, D>) => {
    const entry = config.lifecycle.routes[route.path]
    const lifecycle = lifecycleByPath.get(route.path)
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
          return settle(new HttpError(410, `This endpoint was retired on ${entry.sunset!.toUTCString()}${replacement}`), request, ctx)
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

  for (const surface of surfaces) {
    for (const route of surface.routes) {
      routerFor(route.path)[route.method.toLowerCase() as 'get'](route.path, wrap(surface, route))
      const allowed = allowByPath.get(route.path) ?? new Set<string>()
      allowed.add(route.method)
      if (route.method === 'GET') allowed.add('HEAD')
      allowByPath.set(route.path, allowed)
      surfaceByPath.set(route.path, surface)
    }
  }
  // A known path with another method: 405 with Allow (RFC 9110 §15.5.6); OPTIONS answers CORS.
  // Registered after every route, so a path's own methods match first.
  for (const [path, allowed] of allowByPath) {
    const surface = surfaceByPath.get(path)!
    const segment = firstSegment(path)
    if (!surfaceBySegment.has(segment)) surfaceBySegment.set(segment, surface)
    const allow = [...allowed]
    // A deprecated path says so on every answer, a 405 or a preflight included.
    const lifecycle = lifecycleByPath.get(path)
    routerFor(path).all(path, (request: IRequest, ctx: RequestContext<C, D>): Reply => {
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
    })
  }

  return {
    routerFor: (path) => routers.get(firstSegment(path)),
    addSurfaceHeaders,
    notFound(request, path, ctx) {
      // A CORS preflight is answered whatever the path, so that a cross-origin client (the console
      // on another origin) reads the 404 below instead of a failed preflight it cannot tell apart
      // from a network error.
      if (request.method === 'OPTIONS' && request.headers.get('access-control-request-method') !== null) return preflight(config, request, ANY_METHOD)
      const surface = surfaceBySegment.get(firstSegment(path)) ?? fallback
      const reply = errorReply(surface, new HttpError(404, `No resource at ${path}`), ctx)
      addSurfaceHeaders(reply, surface)
      return reply
    },
  }
}

/** Each surface's own headers, their names lower-cased once rather than on every answer. */
function surfaceHeaders<C extends PipelineConfig, D extends PipelineDeps>(surfaces: readonly Surface<C, D>[]): (reply: Reply, surface: Surface<C, D>) => void {
  const bySurface = new Map<Surface<C, D>, Readonly<Record<string, string>>>()
  for (const surface of surfaces) {
    if (surface.headers) bySurface.set(surface, Object.fromEntries(Object.entries(surface.headers).map(([name, value]) => [name.toLowerCase(), value])))
  }
  return (reply, surface) => {
    const headers = bySurface.get(surface)
    if (headers) Object.assign(reply.headers, headers)
  }
}

function firstSegment(path: string): string {
  const end = path.indexOf('/', 1)
  return end < 0 ? path.slice(1) : path.slice(1, end)
}
