// The product API surface (docs/api.md): the token endpoint, policies, API keys, members
// and the health probe, behind bearer credentials. Errors are {"status": reason phrase, "error": message};
// the token endpoint adds RFC 6749 §5.2 codes as {"status", "error": code, "error_description"}.
import type { Config } from '../config.ts'
import { startDecisionMaintenance, type DecisionMaintenance } from '../jobs/decision-maintenance.ts'
import { startAuditSealer, type AuditSealer } from '../jobs/audit-seal.ts'
import { auditVerifyRoutes } from './audit-verify.ts'
import { createDecisionWriter } from '../services/decision-writer.ts'
import { createPolicySetCache } from '../services/policyset-cache.ts'
import { createGuard } from './access.ts'
import { agentRoutes } from './agents.ts'
import { authRoutes } from './auth.ts'
import { createCredentials } from '../services/credentials.ts'
import { approvalRoutes, createApprovalHub } from './approvals.ts'
import { decisionRoutes } from './decisions.ts'
import type { Deps, Surface } from './deps.ts'
import { healthRoutes } from './health.ts'
import { REASON } from '../http/errors.ts'
import { invitationRoutes } from './invitations.ts'
import { keyRoutes } from './keys.ts'
import { leadListRoutes } from './lead-lists.ts'
import { memberRoutes } from './members.ts'
import { organizationRoutes } from './organization.ts'
import { auditRoutes } from './audit.ts'
import { policyRoutes } from './policies.ts'
import { policyReplayRoutes } from './policy-replay.ts'
import { createRateLimiter } from '../services/ratelimit.ts'
import { createWebhookWorker } from '../jobs/webhook-delivery.ts'
import { webhookRoutes } from './webhooks.ts'

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
  const sets = createPolicySetCache(deps.db)
  const writer = createDecisionWriter(deps.db, deps.clock)
  // Approval waiters, the expiry sweeper and the cross-process approval feed: from start().
  const approvals = createApprovalHub(config, deps)
  // Monthly partitions of the decision log ahead of time, and retention: from start(), then daily.
  let maintenance: DecisionMaintenance | null = null
  // Seals over the audit log and the decisions: from start(), every AUDIT_SEAL_INTERVAL_MS.
  let sealer: AuditSealer | null = null
  // Webhook fan-out and delivery: from start().
  const webhooks = createWebhookWorker(config, deps)
  return {
    name: 'product',
    routes: [
      ...authRoutes(config.loginRateLimit, credentials, passwords),
      ...policyReplayRoutes(guard),
      ...policyRoutes(guard),
      ...organizationRoutes(guard),
      ...keyRoutes(guard, credentials),
      ...memberRoutes(guard, credentials),
      ...invitationRoutes(config, guard, passwords),
      ...agentRoutes(guard, credentials, sets),
      ...decisionRoutes(guard, { sets, writer }),
      ...leadListRoutes(guard),
      ...approvalRoutes(guard, approvals),
      ...auditVerifyRoutes(guard),
      ...auditRoutes(guard),
      ...webhookRoutes(guard),
      ...healthRoutes(deps.db),
    ],
    errorBody: (status, error) =>
      error.code
        ? { status: REASON[status] ?? 'Error', error: error.code, error_description: error.message }
        : { status: REASON[status] ?? 'Error', error: error.message },
    headers: { 'Cache-Control': 'no-store' },
    start: () => {
      credentials.start()
      approvals.start()
      webhooks.start()
      maintenance ??= startDecisionMaintenance(deps.db, deps.clock, (error) =>
        deps.logger.log('warn', 'decision log maintenance failed', { code: (error as { code?: string }).code ?? null }),
      )
      sealer ??= startAuditSealer(deps.db, deps.clock, config.auditSealIntervalMs, (error) =>
        deps.logger.log('warn', 'audit sealing failed', { code: (error as { code?: string }).code ?? null }),
      )
    },
    close: async () => {
      await sealer?.stop()
      maintenance?.stop()
      await webhooks.close()
      await maintenance?.done
      await writer.drain()
      await approvals.close()
      await credentials.close()
    },
    forgetCredentials: (id) => credentials.forget(id),
  }
}
