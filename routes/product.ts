// The product API surface (docs/api.md): the token endpoint, policies, API keys, members
// and the health probe, behind bearer credentials. Errors are {"status": reason phrase, "error": message};
// the token endpoint adds RFC 6749 §5.2 codes as {"status", "error": code, "error_description"}.
import type { Config } from '../config.ts'
import { startDecisionMaintenance } from '../storage/decision-partitions.ts'
import { createDecisionWriter } from '../storage/decision-writer.ts'
import { createPasswordHasher, type PasswordHasher } from '../storage/passwords.ts'
import { createPolicySetCache } from '../storage/policyset-cache.ts'
import { createGuard } from './access.ts'
import { agentRoutes } from './agents.ts'
import { authRoutes } from './auth.ts'
import { createCredentials } from './credentials.ts'
import { decisionRoutes } from './decisions.ts'
import type { Deps } from './deps.ts'
import { healthRoutes } from './health.ts'
import { REASON } from './http.ts'
import { invitationRoutes } from './invitations.ts'
import { keyRoutes } from './keys.ts'
import { memberRoutes } from './members.ts'
import { policyRoutes } from './policies.ts'
import { createRateLimiter } from './ratelimit.ts'
import type { Surface } from './surface.ts'

export interface ProductSurface extends Surface {
  /** Drops cached credential lookups (of one id, or all): see Credentials.forget. */
  forgetCredentials(id?: string): void
}

export function createProductSurface(config: Config, deps: Deps): ProductSurface {
  const credentials = createCredentials(config, deps)
  const guard = createGuard(
    credentials,
    createRateLimiter(config.apiRateLimit, 'api', deps.rateLimits ?? null),
    // Per organization too: minting more keys must not multiply an organization's budget.
    createRateLimiter(config.apiOrgRateLimit, 'api-org', deps.rateLimits ?? null),
  )
  const passwords = deps.passwords ?? passwordHasher(config)
  const sets = createPolicySetCache(deps.db)
  const writer = createDecisionWriter(deps.db, deps.clock)
  // Monthly partitions of the decision log ahead of time, and retention: now, then daily.
  const maintenance = startDecisionMaintenance(deps.db, deps.clock, (error) =>
    deps.logger.log('warn', 'decision log maintenance failed', { code: (error as { code?: string }).code ?? null }),
  )
  return {
    name: 'product',
    routes: [
      ...authRoutes(config, credentials, passwords),
      ...policyRoutes(guard),
      ...keyRoutes(guard, credentials),
      ...memberRoutes(guard, credentials),
      ...invitationRoutes(config, guard, passwords),
      ...agentRoutes(guard, credentials, sets),
      ...decisionRoutes(guard, { sets, writer }),
      ...healthRoutes(deps.db),
    ],
    errorBody: (status, error) =>
      error.code
        ? { status: REASON[status] ?? 'Error', error: error.code, error_description: error.message }
        : { status: REASON[status] ?? 'Error', error: error.message },
    headers: { 'Cache-Control': 'no-store' },
    close: async () => {
      maintenance.stop()
      await maintenance.done
      await writer.drain()
      await credentials.close()
    },
    forgetCredentials: (id) => credentials.forget(id),
  }
}

export function passwordHasher(config: Config): PasswordHasher {
  return createPasswordHasher(config.passwordHashCost, {
    concurrency: config.passwordHashConcurrency,
    queue: config.passwordHashQueue,
    perClient: config.passwordHashPerClient,
    perAccount: config.passwordHashPerAccount,
  })
}
