// What a route module is built from and what its handlers see: the configuration and the
// dependencies travel together in the request context (ctx.config, ctx.deps). Tests pass their own.
import type { Config } from '../config.ts'
import type * as http from '../http/pipeline.ts'
import type { Deps } from '../services/deps.ts'

export type { Deps, RequestContext } from '../services/deps.ts'
export type Route = http.Route<Config, Deps>
export type Surface = http.Surface<Config, Deps>
export type RouteHandler = http.RouteHandler<Config, Deps>
