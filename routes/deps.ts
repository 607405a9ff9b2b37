// What a handler is built from and what its routes see: the configuration and the dependencies
// travel together in the request context (ctx.config, ctx.deps). Tests pass their own.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type * as http from '../http/pipeline.ts'
import type { RequestContext as HttpRequestContext } from '../http/context.ts'
import type { Logger } from '../log.ts'
import type { PasswordHasher } from '../storage/passwords.ts'
import type { RateLimitSync } from '../storage/ratelimits.ts'
import type { Database } from '../storage/schema.ts'

export interface Deps {
  readonly db: Kysely<Database>
  /** Milliseconds since the epoch; tests pass a fake. */
  readonly clock: () => number
  readonly logger: Logger
  /** Bounds and shares out the password hashing of sign-ins and new accounts. */
  readonly passwords: PasswordHasher
  /** Shares rate-limit counts with other processes on the same database; absent: per process. */
  readonly rateLimits?: RateLimitSync
  /**
   * PostgreSQL URL of a dedicated LISTEN connection over which processes sharing one database
   * learn of revoked credentials (product API cache invalidation). Omitted: config.databaseUrl
   * when it is postgres://; null: no feed (a single process, e.g. on PGlite).
   */
  readonly listenUrl?: string | null
}

export type RequestContext = HttpRequestContext<Config, Deps>
export type Route = http.Route<Config, Deps>
export type Surface = http.Surface<Config, Deps>
export type RouteHandler = http.RouteHandler<Config, Deps>
