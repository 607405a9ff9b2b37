// The product API surface (docs/api.md): the token endpoint, policies, API keys, members
// and the health probe, behind bearer credentials. Errors are {"status": reason phrase, "error": message};
// the token endpoint adds RFC 6749 §5.2 codes as {"status", "error": code, "error_description"}.
import type { Config } from '../config.ts'
import { createGuard } from './access.ts'
import { authRoutes } from './auth.ts'
import { createCredentials } from './credentials.ts'
import type { Deps } from './deps.ts'
import { healthRoutes } from './health.ts'
import { REASON } from '../http/errors.ts'
import { invitationRoutes } from './invitations.ts'
import { keyRoutes } from './keys.ts'
import { leadListRoutes } from './lead-lists.ts'
import { memberRoutes } from './members.ts'
import { policyRoutes } from './policies.ts'
import { createRateLimiter } from './ratelimit.ts'
import type { Surface } from './deps.ts'

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
  const passwords = deps.passwords
  return {
    name: 'product',
    routes: [
      ...authRoutes(config, credentials, passwords),
      ...policyRoutes(guard),
      ...keyRoutes(guard, credentials),
      ...memberRoutes(guard, credentials),
      ...invitationRoutes(config, guard, passwords),
      ...leadListRoutes(guard),
      ...healthRoutes(deps.db),
    ],
    errorBody: (status, error) =>
      error.code
        ? { status: REASON[status] ?? 'Error', error: error.code, error_description: error.message }
        : { status: REASON[status] ?? 'Error', error: error.message },
    headers: { 'Cache-Control': 'no-store' },
    start: () => credentials.start(),
    close: () => credentials.close(),
    forgetCredentials: (id) => credentials.forget(id),
  }
}
