// What services, jobs and routes are built from: the database, a clock, a logger and the shared
// pieces that bound work across requests. The composition root (server.ts) fills it; tests pass their own.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { RequestContext as HttpRequestContext } from '../http/context.ts'
import type { Logger } from '../log.ts'
import type { PasswordHasher } from '../auth/passwords.ts'
import type { RateLimitSync } from '../storage/ratelimits.ts'
import type { Database } from '../database/schema.ts'
import type { PoolStats, Telemetry } from './telemetry.ts'

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
  /** Metrics and traces (services/telemetry.ts); absent: both off, every hook skipped. */
  readonly telemetry?: Telemetry
  /** The PostgreSQL pool, for the metrics of its use and errors; absent on PGlite. */
  readonly pool?: PoolStats | null
}

/** A request's context as services see it: the configuration and these dependencies. */
export type RequestContext = HttpRequestContext<Config, Deps>
