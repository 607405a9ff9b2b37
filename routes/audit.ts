// The audit log, read: GET /audit for Admins and Owners (sessions and keys of the organization;
// agent keys never). Newest first, filtered by type and time, paged by an opaque cursor bound to
// the organization. Events are written by storage, in the transaction of each change.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { sha256 } from '@oslojs/crypto/sha2'
import { encodeHexLowerCase } from '@oslojs/encoding'
import { ACTOR_TYPES, AUDIT_EVENT_TYPES, type AuditEventType } from '../domain/audit.ts'
import { listAuditEvents, type AuditEventRow } from '../storage/audit-read.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import type { RequestContext, Route } from './deps.ts'
import { CURSOR_INVALID, decodeCursor, encodeCursor, PageSize, parseQuery, Timestamp } from './input.ts'

const MAX_PAGE = 100
const DEFAULT_PAGE = 50

const TYPE_MESSAGE = `type must be one or more of ${AUDIT_EVENT_TYPES.join(', ')}, separated by commas`
const ONE_TYPE = `(?:${AUDIT_EVENT_TYPES.map((type) => type.replace('.', '\\.')).join('|')})`
const TYPE_LIST = new RegExp(`^${ONE_TYPE}(?:,${ONE_TYPE})*$`)

export const AuditQuerySchema = v.object({
  type: v.optional(
    v.pipe(
      v.string(TYPE_MESSAGE),
      v.maxLength(2000, TYPE_MESSAGE),
      v.regex(TYPE_LIST, TYPE_MESSAGE),
      v.description('Only events of these types: one type, or several separated by commas (policy.created,key.revoked). Give the parameter once.'),
      v.transform((text) => [...new Set(text.split(','))] as AuditEventType[]),
    ),
  ),
  from: v.optional(Timestamp('from', 'Earliest occurred_at (inclusive).')),
  to: v.optional(Timestamp('to', 'Latest occurred_at (exclusive).')),
  limit: v.optional(PageSize(MAX_PAGE, DEFAULT_PAGE)),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page (bound to the organization that read it).'))),
})

const Ref = (what: string) =>
  v.object({
    type: v.pipe(v.string(), v.description(what)),
    id: v.pipe(v.nullable(v.string()), v.description('Its id; null for the operator and the system.')),
  })

export const AuditEventSchema = v.pipe(
  v.object({
    event_id: v.pipe(v.number(), v.integer(), v.description('Increasing within the installation; the order of writing.')),
    organization_id: v.pipe(v.string(), v.uuid()),
    occurred_at: v.pipe(v.string(), v.isoTimestamp()),
    actor: v.object({
      type: v.pipe(v.picklist(ACTOR_TYPES), v.description('user (a session), key (an API key), agent (an agent key), operator (a command line), system (sweepers, discovery).')),
      id: v.pipe(v.nullable(v.string()), v.description('The user, key or agent id; null for the operator and the system.')),
    }),
    type: v.pipe(v.picklist(AUDIT_EVENT_TYPES), v.description('<target>.<what happened>.')),
    target: Ref('What changed: policy, agent, key, user, invitation, approval, organization, lead, audit.'),
    data: v.pipe(v.record(v.string(), v.unknown()), v.description('What is useful to know about the change; never a secret, hash, password or token.')),
    request_id: v.pipe(v.nullable(v.string()), v.description('X-Request-Id of the request that made the change; null outside a request.')),
  }),
  v.title('AuditEvent'),
)

export const AuditEventListSchema = v.pipe(v.object({ events: v.array(AuditEventSchema), next_cursor: v.nullable(v.string()) }), v.title('AuditEventList'))

export function auditEventToJson(row: AuditEventRow): v.InferOutput<typeof AuditEventSchema> {
  return {
    event_id: row.event_id,
    organization_id: row.organization_id,
    occurred_at: row.occurred_at.toISOString(),
    actor: { type: row.actor_type, id: row.actor_id },
    type: row.type as AuditEventType,
    target: { type: row.target_type, id: row.target_id },
    data: row.data,
    request_id: row.request_id,
  }
}

/**
 * The cursor names the last event id of the page and a tag of the organization that read it: a
 * cursor from another organization (or edited) answers like any invalid cursor. Queries are
 * scoped by the credential's organization anyway; the tag only makes a foreign cursor useless.
 */
function orgTag(organizationId: string): string {
  return encodeHexLowerCase(sha256(new TextEncoder().encode(`audit-cursor:${organizationId}`))).slice(0, 16)
}

const AuditCursorSchema = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,15}$/)), v.pipe(v.string(), v.regex(/^[0-9a-f]{16}$/))])

function readCursor(cursor: string, organizationId: string): number {
  const [eventId, tag] = decodeCursor(cursor, AuditCursorSchema)
  if (tag !== orgTag(organizationId)) throw new HttpError(400, CURSOR_INVALID)
  return Number(eventId)
}

export function auditRoutes(guard: Guard): Route[] {
  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    if (new URL(request.url).searchParams.getAll('type').length > 1) throw new HttpError(400, 'type may be given once; separate several types with commas')
    const query = parseQuery(AuditQuerySchema, request)
    if (query.from && query.to && query.from.getTime() >= query.to.getTime()) throw new HttpError(400, 'from must be before to')
    const limit = query.limit ?? DEFAULT_PAGE
    const before = query.cursor === undefined || query.cursor === '' ? null : readCursor(query.cursor, principal.organizationId)
    const filter = { types: query.type ?? [], from: query.from ?? null, to: query.to ?? null }
    const rows = await listAuditEvents(ctx.deps.db, principal.organizationId, filter, { before, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    const next = rows.length > limit && last ? encodeCursor([String(last.event_id), orgTag(principal.organizationId)]) : null
    return json(200, { events: page.map(auditEventToJson), next_cursor: next })
  }

  return [{ method: 'GET', path: '/audit', handler: guard.protect('audit:read', list), doc: listDoc }]
}

const listDoc: OperationDoc = {
  operationId: 'listAuditEvents',
  summary: 'Read the audit log',
  description:
    "Admins and Owners (sessions and API keys of the organization); agent keys and other roles get 403. Every change (policies, agents, keys, members, invitations, sign-ins, approvals, settings) is an event written in the same transaction as the change. Newest first. Only the credential's organization is ever read.",
  tags: ['Audit'],
  scopes: ['audit:read'],
  query: AuditQuerySchema,
  responses: {
    200: { description: 'A page of events.', schema: AuditEventListSchema },
    ...protectedErrors({ 400: 'A bad type, date (from, to), limit or cursor; or type given more than once.' }),
  },
}
