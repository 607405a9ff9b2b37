// Everything that runs on a timer, started together by the composition root after the services
// and stopped before them: each job settles the pass under way before stop() resolves.
import type { Config } from '../config.ts'
import type { Services } from '../services/index.ts'
import type { Deps } from '../services/deps.ts'
import { startApprovalExpiry } from './approval-expiry.ts'
import { startAuditSealer } from './audit-seal.ts'
import { startDecisionMaintenance } from './decision-maintenance.ts'
import { startLeadMailJob } from './lead-mail.ts'
import { startSpamPurge } from './lead-spam-purge.ts'
import { startReportRollup } from './report-rollup.ts'
import { createWebhookWorker } from './webhook-delivery.ts'

export interface Jobs {
  stop(): Promise<void>
}

export interface JobDeps {
  readonly config: Config
  readonly deps: Deps
  readonly services: Pick<Services, 'approvals' | 'leadMail'>
}

/** Starts decision-log maintenance, the audit sealer, webhook delivery and approval expiry. */
export function startJobs({ config, deps, services }: JobDeps): Jobs {
  const warn = (message: string) => (error: unknown) => deps.logger.log('warn', message, { code: (error as { code?: string }).code ?? null })
  // Partitions of the decision log ahead of time at once, and retention: then daily.
  const maintenance = startDecisionMaintenance(deps.db, deps.clock, warn('decision log maintenance failed'))
  // Seals over the audit log and the decisions, every AUDIT_SEAL_INTERVAL_MS.
  const sealer = startAuditSealer(deps.db, deps.clock, config.auditSealIntervalMs, warn('audit sealing failed'))
  const webhooks = createWebhookWorker(config, deps)
  webhooks.start()
  const expiry = startApprovalExpiry(deps, services.approvals)
  // The decision log's hourly rollup for the reports, every minute.
  const rollup = startReportRollup(deps.db, deps.clock, warn('report rollup failed'))
  // Lead mail: the outbox sent with retries, unconfirmed subscriptions expired.
  const leadMail = startLeadMailJob(config, deps, services.leadMail)
  // Lead spam past its retention, and used CAPTCHA tokens past their lifetime: hourly.
  const spamPurge = startSpamPurge(deps.db, deps.clock, deps.logger, config.leadSpamRetentionDays)
  return {
    async stop() {
      await sealer.stop()
      maintenance.stop()
      await webhooks.close()
      await expiry.stop()
      await rollup.stop()
      await leadMail.stop()
      await spamPurge.stop()
      await maintenance.done
    },
  }
}
