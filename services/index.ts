// The services one server process holds, built once by the composition root and handed to every
// door that needs them (the HTTP routes today, other doors next). Building them opens nothing:
// start() subscribes the cross-process feeds, close() drains what is queued and ends the feeds.
import type { Config } from '../config.ts'
import { createApprovalHub, type ApprovalHub } from './approvals.ts'
import { createCredentials, type Credentials } from './credentials.ts'
import { createDecisionService, type DecisionService } from './decisions.ts'
import { createDecisionWriter, type DecisionWriter } from './decision-writer.ts'
import type { Deps } from './deps.ts'
import { createPolicySetCache, type PolicySetCache } from './policyset-cache.ts'
import { createRateLimiter, type RateLimiter } from './ratelimit.ts'

/** A limiter whose name its answers' RateLimit headers carry. */
export type NamedLimiter = RateLimiter & { readonly name: string }

export interface Services {
  readonly credentials: Credentials
  /** Product API requests per client, and per organization (more keys must not mean more budget). */
  readonly apiLimiter: NamedLimiter
  readonly apiOrgLimiter: NamedLimiter
  readonly sets: PolicySetCache
  readonly writer: DecisionWriter
  readonly approvals: ApprovalHub
  readonly decisions: DecisionService
  /** Subscribes the credential and approval feeds (PostgreSQL) and the credential cache's timers. */
  start(): void
  /** Writes what is queued, then ends the feeds and wakes every waiter. */
  close(): Promise<void>
}

export function createServices(config: Config, deps: Deps): Services {
  const credentials = createCredentials(config, deps)
  const sets = createPolicySetCache(deps.db)
  const writer = createDecisionWriter(deps.db, deps.clock)
  const approvals = createApprovalHub(config, deps)
  const decisions = createDecisionService({ db: deps.db, clock: deps.clock, logger: deps.logger, config, sets, writer })
  return {
    credentials,
    apiLimiter: createRateLimiter(config.apiRateLimit, 'api', deps.rateLimits ?? null),
    apiOrgLimiter: createRateLimiter(config.apiOrgRateLimit, 'api-org', deps.rateLimits ?? null),
    sets,
    writer,
    approvals,
    decisions,
    start() {
      credentials.start()
      approvals.start()
    },
    async close() {
      await writer.drain()
      await approvals.close()
      await credentials.close()
    },
  }
}
