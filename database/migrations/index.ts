// Every migration, in order. A static list (not a folder scan) so Node, Bun, Deno and bundlers
// all see the same set. Add new files at the end; never edit a shipped one.
import type { Migration } from 'kysely'
import * as leads from './2026-11-22T00-leads.ts'
import * as product from './2026-11-22T01-product.ts'
import * as rateLimits from './2026-11-22T02-rate-limits.ts'
import * as invitationsCaps from './2026-11-23T01-invitations-caps.ts'
import * as governance from './2026-11-23T02-governance.ts'
import * as approvals from './2026-11-23T03-approvals.ts'
import * as audit from './2026-11-23T04-audit.ts'
import * as webhooks from './2026-11-23T05-webhooks.ts'
import * as sealIndex from './2026-11-23T06-seal-index.ts'
import * as auditColumnTypes from './2026-11-24T00-audit-column-types.ts'
import * as mcp from './2026-11-28T00-mcp.ts'
import * as budgets from './2026-12-06T01-budgets.ts'
import * as reports from './2026-12-06T02-reports.ts'
import * as leadMail from './2026-12-06T03-lead-mail.ts'
import * as leadSpam from './2026-12-06T04-lead-spam.ts'

export const migrations: Readonly<Record<string, Migration>> = Object.freeze({
  '2026-11-22T00-leads': leads,
  '2026-11-22T01-product': product,
  '2026-11-22T02-rate-limits': rateLimits,
  '2026-11-23T01-invitations-caps': invitationsCaps,
  '2026-11-23T02-governance': governance,
  '2026-11-23T03-approvals': approvals,
  '2026-11-23T04-audit': audit,
  '2026-11-23T05-webhooks': webhooks,
  '2026-11-23T06-seal-index': sealIndex,
  '2026-11-24T00-audit-column-types': auditColumnTypes,
  '2026-11-28T00-mcp': mcp,
  '2026-12-06T01-budgets': budgets,
  '2026-12-06T02-reports': reports,
  '2026-12-06T03-lead-mail': leadMail,
  '2026-12-06T04-lead-spam': leadSpam,
})
