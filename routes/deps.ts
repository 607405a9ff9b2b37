// Dependencies a handler is built from. They travel explicitly: tests pass their own.
import type { Kysely } from 'kysely'
import type { PasswordHasher } from '../storage/passwords.ts'
import type { Database } from '../storage/schema.ts'
import type { RateLimitSync } from './ratelimit.ts'

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
export type LogFields = Record<string, string | number | boolean | null | undefined>

export interface Logger {
  log(level: LogLevel, message: string, fields?: LogFields): void
}

export interface Deps {
  readonly db: Kysely<Database>
  /** Milliseconds since the epoch; tests pass a fake. */
  readonly clock: () => number
  readonly logger: Logger
  /** Shares rate-limit counts with other processes on the same database; absent: per process. */
  readonly rateLimits?: RateLimitSync
  /**
   * PostgreSQL URL of a dedicated LISTEN connection over which processes sharing one database
   * learn of revoked credentials (product API cache invalidation). Omitted: config.databaseUrl
   * when it is postgres://; null: no feed (a single process, e.g. on PGlite).
   */
  readonly listenUrl?: string | null
  /**
   * Bounds and shares out the password hashing of sign-ins and new accounts. Omitted: each
   * handler makes its own from the config's PASSWORD_HASH_* settings.
   */
  readonly passwords?: PasswordHasher
}

const ORDER: Record<LogLevel | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }

/**
 * One JSON object per line. Callers pass only fields they chose; request bodies, emails and
 * tokens are never logged.
 */
export function createJsonLogger(
  minimum: LogLevel | 'silent',
  write: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Logger {
  return {
    log(level, message, fields = {}) {
      if (ORDER[level] < ORDER[minimum]) return
      write(JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields }))
    },
  }
}

export const silentLogger: Logger = { log() {} }
