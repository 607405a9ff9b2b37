// The services one server process holds, built once by the composition root and handed to every
// door that needs them (the HTTP routes today, other doors next). Building them opens nothing:
// start() subscribes the cross-process feeds, close() drains what is queued and ends the feeds.
import type { Config } from '../config.ts'
import { createApprovalHub, type ApprovalHub } from './approvals.ts'
import { createCredentials, type Credentials } from './credentials.ts'
import { createDecisionService, type DecisionService } from './decisions.ts'
import { createDecisionWriter, type DecisionWriter } from './decision-writer.ts'
import type { Deps } from './deps.ts'
import { isPostgresUrl } from '../domain/database-url.ts'
import { createLeadMail, type LeadMail } from './lead-mail.ts'
import { createLeadSpam, type LeadSpam } from './lead-spam.ts'
import { createMcpServerService, type McpServerService } from './mcp-servers.ts'
import { createSecrets, type Secrets } from './secrets.ts'
import { createPolicySetCache, type PolicySetCache } from './policyset-cache.ts'
import { createRateLimiter, type RateLimiter } from './ratelimit.ts'
import { decisionObserver, observedApprovals } from './telemetry-observe.ts'

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
  /** The key that seals secrets at rest (MCP server headers) and signs the gateway's request state. */
  readonly secrets: Secrets
  /** The upstream MCP server registry, and the gateway's lookups of enabled upstreams. */
  readonly mcpServers: McpServerService
  /** Lead notifications, double opt-in and unsubscribe (docs/leads.md); its outbox job sends. */
  readonly leadMail: LeadMail
  /** The lead forms' spam screen (honeypot, CAPTCHA) and its settings' secrets (docs/leads.md). */
  readonly leadSpam: LeadSpam
  /** Subscribes the credential and approval feeds (PostgreSQL) and the credential cache's timers. */
  start(): void
  /** Writes what is queued, then ends the feeds and wakes every waiter. */
  close(): Promise<void>
}

export function createServices(config: Config, deps: Deps): Services {
  const credentials = createCredentials(config, deps)
  const sets = createPolicySetCache(deps.db)
  const writer = createDecisionWriter(deps.db, deps.clock)
  const approvals = observedApprovals(createApprovalHub(config, deps), deps.telemetry)
  const decisions = createDecisionService({ db: deps.db, clock: deps.clock, logger: deps.logger, config, sets, writer, onDecided: decisionObserver(deps.telemetry) })
  const secrets = createSecrets(config)
  const listenUrl = deps.listenUrl !== undefined ? deps.listenUrl : isPostgresUrl(config.databaseUrl) ? config.databaseUrl : null
  const mcpServers = createMcpServerService({ db: deps.db, logger: deps.logger, clock: deps.clock, config, secrets, listenUrl })
  const leadMail = createLeadMail({ db: deps.db, config, logger: deps.logger, secrets })
  return {
    credentials,
    apiLimiter: createRateLimiter(config.apiRateLimit, 'api', deps.rateLimits ?? null),
    apiOrgLimiter: createRateLimiter(config.apiOrgRateLimit, 'api-org', deps.rateLimits ?? null),
    sets,
    writer,
    approvals,
    decisions,
    secrets,
    mcpServers,
    leadMail,
    leadSpam: createLeadSpam(config, deps.logger, secrets),
    start() {
      credentials.start()
      approvals.start()
      mcpServers.start()
    },
    async close() {
      await writer.drain()
      await approvals.close()
      await credentials.close()
      await mcpServers.close()
      leadMail.close()
    },
  }
}
