// Reading the leads (demo requests and newsletter subscriptions) through the product API, for the
// console: GET /leads/demo-requests and GET /leads/newsletter, newest first, searchable.
// Leads belong to the installation, not to an organization, so they are not scoped like other
// rows: exactly one organization holds them (LEADS_ORGANIZATION_ID, else the one created first),
// and only its Owners and Admins (the members:manage permission) read them. Every other
// credential gets the same 403, whatever its role elsewhere.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { unsafeTextProblem } from '../http/body-parse.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import { listLeadPage, type ExportedLead, type LeadList } from '../storage/leads.ts'
import { findOldestOrganizationId } from '../storage/organizations.ts'
import { subscriptionStatuses } from '../storage/lead-subscriptions.ts'
import type { LeadMail } from '../services/lead-mail.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { Principal } from '../services/credentials.ts'
import type { RequestContext, Route } from './deps.ts'
import { CURSOR_INVALID, decodeCursor, encodeCursor, PageSize, parseValue } from './input.ts'

export const LEADS_FORBIDDEN = 'Leads belong to the installation: only Owners and Admins of the organization that holds them (LEADS_ORGANIZATION_ID) may read them'
const DEFAULT_PAGE = 50
const MAX_PAGE = 100
const MAX_QUERY = 200

const QueryText = v.pipe(
  v.string(),
  v.maxLength(MAX_QUERY, `q is longer than ${MAX_QUERY} characters`),
  v.check((text) => unsafeTextProblem(text) === null, 'q holds a NUL character or an unpaired surrogate'),
  v.description('Only leads whose email, name, company or source contain this text (case-insensitive).'),
)

const CursorId = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,15}$/), v.transform(Number))])

export const LeadListQuerySchema = v.object({
  q: v.optional(QueryText),
  limit: v.optional(PageSize(MAX_PAGE, DEFAULT_PAGE)),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

const text = v.nullable(v.string())
const received = v.pipe(v.string(), v.isoTimestamp(), v.description('When the lead arrived.'))

export const DemoRequestLeadSchema = v.pipe(
  v.object({
    id: v.pipe(v.number(), v.integer()),
    email: v.pipe(v.string(), v.description('As submitted, trimmed.')),
    first_name: v.string(),
    last_name: v.string(),
    company: v.string(),
    linkedin: v.string(),
    phone: text,
    source: text,
    analytics_distinct_id: text,
    received_at: received,
  }),
  v.title('DemoRequestLead'),
)

export const NewsletterLeadSchema = v.pipe(
  v.object({
    id: v.pipe(v.number(), v.integer()),
    email: v.pipe(v.string(), v.description('As submitted, trimmed.')),
    source: text,
    analytics_distinct_id: text,
    via: v.pipe(v.string(), v.description('The path posted to: /newsletter or the legacy /waitlist.')),
    received_at: received,
    status: v.pipe(v.picklist(['pending', 'active']), v.description('pending: waiting for the subscriber to confirm (double opt-in); active otherwise. Unsubscribed and expired subscribers leave the list.')),
    unsubscribe_url: v.pipe(v.nullable(v.string()), v.description('The one-click unsubscribe URL (RFC 8058) for whatever mails this subscriber; null without a secrets key.')),
  }),
  v.title('NewsletterLead'),
)

const nextCursor = v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.'))
export const DemoRequestLeadListSchema = v.pipe(v.object({ leads: v.array(DemoRequestLeadSchema), next_cursor: nextCursor }), v.title('DemoRequestLeadList'))
export const NewsletterLeadListSchema = v.pipe(v.object({ leads: v.array(NewsletterLeadSchema), next_cursor: nextCursor }), v.title('NewsletterLeadList'))

function leadToJson(lead: ExportedLead): Record<string, unknown> {
  const { id, email, source, analytics_distinct_id, received_at } = lead
  if (lead.list === 'newsletter') return { id, email, source, analytics_distinct_id, via: lead.via, received_at }
  const { first_name, last_name, company, linkedin, phone } = lead
  return { id, email, first_name, last_name, company, linkedin, phone, source, analytics_distinct_id, received_at }
}

/** Newsletter leads with their status and unsubscribe link (services/lead-mail.ts). */
async function withSubscription(ctx: RequestContext, leads: ExportedLead[], mail: Pick<LeadMail, 'unsubscribeUrl'> | null): Promise<Record<string, unknown>[]> {
  const statuses = await subscriptionStatuses(ctx.deps.db, leads.map((lead) => lead.id))
  return leads.map((lead) => ({ ...leadToJson(lead), status: statuses.get(lead.id) ?? 'active', unsubscribe_url: mail?.unsubscribeUrl(lead.id) ?? null }))
}

export async function assertHoldsLeads(ctx: RequestContext, principal: Principal): Promise<void> {
  const holder = ctx.config.leadsOrganizationId ?? (await findOldestOrganizationId(ctx.deps.db))
  if (holder === null || principal.organizationId !== holder) throw new HttpError(403, LEADS_FORBIDDEN)
}

export function leadListRoutes(guard: Guard, mail: Pick<LeadMail, 'unsubscribeUrl'> | null = null): Route[] {
  const page = (list: LeadList) =>
    async function (request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
      await assertHoldsLeads(ctx, principal)
      const query = new URL(request.url).searchParams
      const q = query.get('q')
      const rawLimit = query.get('limit')
      const cursor = query.get('cursor')
      const options = {
        q: q === null || q.trim() === '' ? null : parseValue(QueryText, q.trim()),
        limit: rawLimit === null ? DEFAULT_PAGE : parseValue(PageSize(MAX_PAGE, DEFAULT_PAGE), rawLimit),
        before: cursor === null || cursor === '' ? null : decodeCursor(cursor, CursorId)[0],
      }
      const found = await listLeadPage(ctx.deps.db, list, options)
      const leads = list === 'newsletter' ? await withSubscription(ctx, found.leads, mail) : found.leads.map(leadToJson)
      return json(200, { leads, next_cursor: found.nextBefore === null ? null : encodeCursor([String(found.nextBefore)]) })
    }
  return [
    { method: 'GET', path: '/leads/demo-requests', handler: guard.protect('members:manage', page('demo')), doc: listDoc('demo') },
    { method: 'GET', path: '/leads/newsletter', handler: guard.protect('members:manage', page('newsletter')), doc: listDoc('newsletter') },
  ]
}

function listDoc(list: LeadList): OperationDoc {
  const demo = list === 'demo'
  return {
    operationId: demo ? 'listDemoRequestLeads' : 'listNewsletterLeads',
    summary: demo ? 'List the demo requests received' : 'List the newsletter subscriptions received',
    description:
      'Newest first, a page at a time. Leads belong to the installation, not to an organization: only Owners and Admins of the organization named by LEADS_ORGANIZATION_ID (by default the organization created first) may read them; any other credential gets 403.',
    tags: ['Leads'],
    scopes: ['members:manage'],
    query: LeadListQuerySchema,
    responses: {
      200: { description: 'A page of leads.', schema: demo ? DemoRequestLeadListSchema : NewsletterLeadListSchema },
      ...protectedErrors({
        400: `A credential sent in the URL, a bad limit, a q longer than ${MAX_QUERY} characters or holding a NUL, or a cursor not from a previous page ("${CURSOR_INVALID}").`,
        403: 'The credential is not an Owner or Admin of the organization that holds the leads, or its role lacks members:manage.',
      }),
    },
  }
}
