// Reports (docs/reports.md): GET /reports/decisions, /denials, /approvals, /policies,
// /policies/{policy_id}, /agents and /leads. Read-only counts of the caller's organization over a
// window (from, to, tz) bounded here: at most 400 days and 1,000 buckets, so no request can ask for
// a minute-long query. Leads belong to the installation and are read as the lead pages read them.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { Principal } from '../services/credentials.ts'
import { POLICY_NOT_FOUND } from '../services/policies.ts'
import { createReports, MAX_BUCKETS, MAX_WINDOW_DAYS, type Bucket, type ReportWindow } from '../services/reports.ts'
import { findOldestOrganizationId } from '../storage/organizations.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { LEADS_FORBIDDEN } from './lead-lists.ts'
import { parseQuery, pathId, Timestamp } from './input.ts'
import { ReportSchemas } from './report-schemas.ts'

const DAY = 86_400_000
const HOUR = 3_600_000
const DEFAULT_DAYS = 7
const ZONE_MESSAGE = 'tz is not an IANA time zone (such as UTC or Europe/Paris)'
const ZONE_NAME = /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/

export const WINDOW_TOO_LONG = `from and to span more than ${MAX_WINDOW_DAYS} days: ask for a shorter window`
export const TOO_MANY_BUCKETS = `bucket=hour over this window makes more than ${MAX_BUCKETS} buckets: use bucket=day or a shorter window`

const TimeZone = v.pipe(
  v.string(ZONE_MESSAGE),
  v.maxLength(64, ZONE_MESSAGE),
  v.regex(ZONE_NAME, ZONE_MESSAGE),
  v.check(knownZone, ZONE_MESSAGE),
  v.description('IANA time zone the buckets follow (default UTC).'),
)

function knownZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name })
    return true
  } catch {
    return false
  }
}

const Limit = (max: number, fallback: number) =>
  v.pipe(
    v.string(`limit must be a whole number from 1 to ${max}`),
    v.regex(/^\d{1,4}$/, `limit must be a whole number from 1 to ${max}`),
    v.check((text) => Number(text) >= 1 && Number(text) <= max, `limit must be a whole number from 1 to ${max}`),
    v.description(`How many to list, 1 to ${max} (default ${fallback}).`),
    v.transform(Number),
  )

const window = {
  from: v.optional(Timestamp('from', `Start of the window, inclusive (default: to minus ${DEFAULT_DAYS} days).`)),
  to: v.optional(Timestamp('to', 'End of the window, exclusive (default: now).')),
  tz: v.optional(TimeZone),
}
const BucketParam = v.optional(v.pipe(v.picklist(['hour', 'day'], 'bucket must be hour or day'), v.description('Bucket size (default day).')))
const GroupParam = v.optional(
  v.pipe(v.picklist(['outcome', 'agent', 'action', 'policy'], 'group must be one of outcome, agent, action, policy'), v.description('What a series is (default outcome).')),
)

export const DecisionsReportQuery = v.object({ ...window, bucket: BucketParam, group: GroupParam, limit: v.optional(Limit(50, 10)) })
export const DenialsReportQuery = v.object({ ...window, limit: v.optional(Limit(50, 10)) })
export const ApprovalsReportQuery = v.object({ ...window, limit: v.optional(Limit(200, 50)) })
export const PoliciesReportQuery = v.object(window)
export const PolicyReportQuery = v.object({ ...window, bucket: BucketParam })
export const AgentsReportQuery = v.object({ ...window, limit: v.optional(Limit(200, 50)) })
export const LeadsReportQuery = v.object({ ...window, bucket: BucketParam })

interface WindowInput {
  from?: Date
  to?: Date
  tz?: string
}

/** The window asked for, with its defaults, refused when backwards, too long or too finely bucketed. */
export function reportWindow(input: WindowInput, now: number, bucket: Bucket | null): ReportWindow {
  const to = input.to ?? new Date(now)
  const from = input.from ?? new Date(to.getTime() - DEFAULT_DAYS * DAY)
  if (from.getTime() >= to.getTime()) throw new HttpError(400, 'from must be before to')
  if (to.getTime() - from.getTime() > MAX_WINDOW_DAYS * DAY) throw new HttpError(400, WINDOW_TOO_LONG)
  // A window of h hours starts at most one local hour before from: h + 1 hour buckets at most.
  if (bucket === 'hour' && to.getTime() - from.getTime() > (MAX_BUCKETS - 1) * HOUR) throw new HttpError(400, TOO_MANY_BUCKETS)
  return { from, to, tz: input.tz ?? 'UTC' }
}

async function assertHoldsLeads(ctx: RequestContext, principal: Principal): Promise<void> {
  const holder = ctx.config.leadsOrganizationId ?? (await findOldestOrganizationId(ctx.deps.db))
  if (holder === null || principal.organizationId !== holder) throw new HttpError(403, LEADS_FORBIDDEN)
}

export function reportRoutes(guard: Guard): Route[] {
  const reports = (ctx: RequestContext) => createReports(ctx.deps.db)
  const read = (handler: (request: IRequest, ctx: RequestContext, principal: Principal) => Promise<unknown>) =>
    guard.protect('decisions:read', async (request, ctx, principal): Promise<Reply> => json(200, await handler(request, ctx, principal)))

  const decisions = read((request, ctx, principal) => {
    const query = parseQuery(DecisionsReportQuery, request)
    const bucket = query.bucket ?? 'day'
    return reports(ctx).decisions(principal.organizationId, reportWindow(query, ctx.now, bucket), bucket, query.group ?? 'outcome', query.limit ?? 10)
  })
  const denials = read((request, ctx, principal) => {
    const query = parseQuery(DenialsReportQuery, request)
    return reports(ctx).denials(principal.organizationId, reportWindow(query, ctx.now, null), query.limit ?? 10)
  })
  const approvals = read((request, ctx, principal) => {
    const query = parseQuery(ApprovalsReportQuery, request)
    return reports(ctx).approvals(principal.organizationId, reportWindow(query, ctx.now, null), new Date(ctx.now), query.limit ?? 50)
  })
  const policies = read((request, ctx, principal) => {
    const query = parseQuery(PoliciesReportQuery, request)
    return reports(ctx).policies(principal.organizationId, reportWindow(query, ctx.now, null))
  })
  const policy = read(async (request, ctx, principal) => {
    const policyId = pathId(request, 'policy_id')
    const query = parseQuery(PolicyReportQuery, request)
    const bucket = query.bucket ?? 'day'
    const found = policyId === null ? null : await reports(ctx).policy(principal.organizationId, policyId, reportWindow(query, ctx.now, bucket), bucket)
    if (found === null) throw new HttpError(404, POLICY_NOT_FOUND)
    return found
  })
  const agents = read((request, ctx, principal) => {
    const query = parseQuery(AgentsReportQuery, request)
    return reports(ctx).agents(principal.organizationId, reportWindow(query, ctx.now, null), query.limit ?? 50)
  })
  const leads = guard.protect('members:manage', async (request, ctx, principal) => {
    await assertHoldsLeads(ctx, principal)
    const query = parseQuery(LeadsReportQuery, request)
    const bucket = query.bucket ?? 'day'
    return json(200, await reports(ctx).leads(reportWindow(query, ctx.now, bucket), bucket))
  })

  return [
    { method: 'GET', path: '/reports/decisions', handler: decisions, doc: doc('reportDecisions', 'Decisions over time', DecisionsReportQuery, ReportSchemas.decisions, BUCKETED) },
    { method: 'GET', path: '/reports/denials', handler: denials, doc: doc('reportDenials', 'The most denied agents and actions', DenialsReportQuery, ReportSchemas.denials) },
    { method: 'GET', path: '/reports/approvals', handler: approvals, doc: doc('reportApprovals', 'Approvals: outcomes, time to decision, what waits now', ApprovalsReportQuery, ReportSchemas.approvals) },
    { method: 'GET', path: '/reports/policies', handler: policies, doc: doc('reportPolicies', 'Policy effectiveness: hits, unmatched policies, monitor-mode evidence', PoliciesReportQuery, ReportSchemas.policies) },
    {
      method: 'GET',
      path: '/reports/policies/:policy_id',
      handler: policy,
      doc: doc('reportPolicy', "One policy's hits over time", PolicyReportQuery, ReportSchemas.policy, BUCKETED, { 404: 'No such policy in this organization ("Policy not found").' }),
    },
    { method: 'GET', path: '/reports/agents', handler: agents, doc: doc('reportAgents', 'Agents: active in the window, discovered and gone', AgentsReportQuery, ReportSchemas.agents) },
    { method: 'GET', path: '/reports/leads', handler: leads, doc: leadsDoc },
  ]
}

const BUCKETED = ` Buckets follow tz: local midnights or local hour starts; at most ${MAX_BUCKETS} of them.`
const WINDOW_DOC = `Counts the caller's organization over [from, to) (default the last ${DEFAULT_DAYS} days; at most ${MAX_WINDOW_DAYS} days).`
const BAD_QUERY = `A bad parameter, named in the error: from or to not RFC 3339, from not before to, a window over ${MAX_WINDOW_DAYS} days, tz not an IANA zone, bucket, group or limit out of range, or bucket=hour over more than ${MAX_BUCKETS} buckets.`

function doc(operationId: string, summary: string, query: v.GenericSchema, schema: v.GenericSchema, extra = '', errors: Record<number, string> = {}): OperationDoc {
  return {
    operationId,
    summary,
    description: `${WINDOW_DOC}${extra} See docs/reports.md.`,
    tags: ['Reports'],
    scopes: ['decisions:read'],
    query,
    responses: { 200: { description: summary, schema }, ...protectedErrors({ 400: BAD_QUERY, ...errors }) },
  }
}

const leadsDoc: OperationDoc = {
  ...doc('reportLeads', 'Leads per day, source and list, and duplicates refused', LeadsReportQuery, ReportSchemas.leads, BUCKETED),
  description: `Leads received over [from, to) (default the last ${DEFAULT_DAYS} days; at most ${MAX_WINDOW_DAYS} days), and the submissions refused as duplicates (counted per hour since this version). Leads belong to the installation: only Owners and Admins of the organization named by LEADS_ORGANIZATION_ID (by default the organization created first) may read them.`,
  scopes: ['members:manage'],
  responses: {
    200: { description: 'The leads report.', schema: ReportSchemas.leads },
    ...protectedErrors({ 400: BAD_QUERY, 403: 'The credential is not an Owner or Admin of the organization that holds the leads.' }),
  },
}
