// The product API surface (docs/api.md): the token endpoint, policies, agents, decisions,
// approvals, keys, members, audit, webhooks and the health probe, behind bearer credentials.
// Errors are {"status": reason phrase, "error": message}; the token endpoint adds RFC 6749 §5.2
// codes as {"status", "error": code, "error_description"}. The services it calls are built by the
// composition root (server.ts) and started there, with the jobs.
import type { Config } from '../config.ts'
import { REASON } from '../http/errors.ts'
import { createServices, type Services } from '../services/index.ts'
import { createGuard } from './access.ts'
import { agentRoutes } from './agents.ts'
import { agentUsageRoutes } from './agent-usage.ts'
import { approvalRoutes } from './approvals.ts'
import { auditRoutes } from './audit.ts'
import { auditVerifyRoutes } from './audit-verify.ts'
import { authRoutes } from './auth.ts'
import { decisionRoutes } from './decisions.ts'
import type { Deps, Surface } from './deps.ts'
import { healthRoutes } from './health.ts'
import { invitationRoutes } from './invitations.ts'
import { keyRoutes } from './keys.ts'
import { leadListRoutes } from './lead-lists.ts'
import { leadPeopleRoutes } from './lead-people.ts'
import { leadSpamRoutes } from './lead-spam.ts'
import { leadLinkRoutes } from './lead-links.ts'
import { leadSettingsRoutes } from './lead-settings.ts'
import { mcpServerRoutes } from './mcp-servers.ts'
import { memberRoutes } from './members.ts'
import { organizationRoutes } from './organization.ts'
import { policyRoutes } from './policies.ts'
import { policyReplayRoutes } from './policy-replay.ts'
import { policySetRoutes } from './policy-sets.ts'
import { policyVersionRoutes } from './policy-versions.ts'
import { reportRoutes } from './reports.ts'
import { toolhiveRoutes } from './toolhive.ts'
import { webhookRoutes } from './webhooks.ts'

/** Builds the product surface over the given services (tests that only read its routes may omit them). */
export function createProductSurface(config: Config, deps: Deps, services: Services = createServices(config, deps)): Surface {
  const { credentials } = services
  const guard = createGuard(credentials, services.apiLimiter, services.apiOrgLimiter)
  const passwords = deps.passwords
  return {
    name: 'product',
    routes: [
      ...authRoutes(config.loginRateLimit, credentials, passwords),
      ...policyReplayRoutes(guard),
      ...policySetRoutes(guard),
      ...policyRoutes(guard),
      ...policyVersionRoutes(guard),
      ...organizationRoutes(guard),
      ...keyRoutes(guard, credentials),
      ...memberRoutes(guard, credentials),
      ...invitationRoutes(config, guard, passwords),
      ...agentRoutes(guard, credentials, services.sets),
      ...agentUsageRoutes(guard, services.sets),
      ...decisionRoutes(guard, services.decisions),
      ...toolhiveRoutes(services),
      ...leadListRoutes(guard, services.leadMail),
      ...leadSettingsRoutes(guard, services.leadMail),
      ...leadSpamRoutes(guard, services.leadSpam),
      ...leadPeopleRoutes(guard, services.secrets),
      ...leadLinkRoutes(services.leadMail),
      ...approvalRoutes(guard, services.approvals),
      ...auditVerifyRoutes(guard),
      ...auditRoutes(guard),
      ...webhookRoutes(guard),
      ...mcpServerRoutes(guard, services.mcpServers),
      ...reportRoutes(guard),
      ...healthRoutes(deps.db),
    ],
    errorBody: (status, error) =>
      error.code
        ? { status: REASON[status] ?? 'Error', error: error.code, error_description: error.message }
        : { status: REASON[status] ?? 'Error', error: error.message },
    headers: { 'Cache-Control': 'no-store' },
  }
}
