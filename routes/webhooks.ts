// Webhook endpoints (Admin+): create (the signing secret is shown once), list, read, delete, the
// delivery log and replay. Delivery itself is the worker's (jobs/webhook-delivery.ts).
import { randomBytes } from 'node:crypto'
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Actor } from '../domain/audit.ts'
import { creatorString } from '../domain/creator.ts'
import { WEBHOOK_SUBSCRIPTIONS } from '../domain/webhooks.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { created, json, noContent, type Reply } from '../http/reply.ts'
import { createWebhook, deleteWebhook, findWebhook, listWebhooks, type WebhookRow } from '../storage/webhooks.ts'
import { findDelivery, listDeliveries, replayDelivery, type DeliveryRow } from '../storage/webhook-deliveries.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { Principal } from '../services/credentials.ts'
import type { RequestContext, Route } from './deps.ts'
import { CursorTimestamp, CursorUuid, CURSOR_INVALID, decodeCursor, encodeCursor, PageSize, parseQuery, outboundUrlSchema, pathId } from './input.ts'
import { outboundUrlProblem } from '../services/outbound-url.ts'

const WEBHOOK_NOT_FOUND = 'Webhook not found'
const DELIVERY_NOT_FOUND = 'Delivery not found'

// Any audit type, a family (`policy.*`), `*`, or a named subscription of the first release; the
// list is long, so the message names the forms and docs/webhooks.md lists them.
const EventTypeSchema = v.picklist(
  WEBHOOK_SUBSCRIPTIONS as [string, ...string[]],
  'Field event_types may hold only an audit type (such as key.rotated), a family (such as policy.*), * or a named subscription (policy.changed, mcp_server.changed, decision.denied)',
)

const UrlSchema = outboundUrlSchema(
  'Field url must not hold a user name or password',
  'Where events are POSTed. https; plain http only with WEBHOOK_ALLOW_PRIVATE=true.',
)

const WebhookCreateSchema = v.pipe(
  v.strictObject(
    {
      url: UrlSchema,
      event_types: v.pipe(
        v.array(EventTypeSchema, 'Field event_types must be an array of event types'),
        v.minLength(1, 'Field event_types must name at least one event type'),
        v.maxLength(WEBHOOK_SUBSCRIPTIONS.length, `Field event_types may name at most ${WEBHOOK_SUBSCRIPTIONS.length} event types`),
        v.description(
          'The event types sent to this endpoint: any audit type, a family such as policy.* (every policy.<what happened>), * (everything, decision.denied included), or a named subscription: policy.changed covers policy.created, updated, archived and rolled_back; mcp_server.changed covers mcp_server.created, updated and deleted.',
        ),
      ),
      description: v.optional(
        v.pipe(
          v.string('Field description must be a string'),
          v.maxLength(500, 'Field description is longer than 500 characters'),
          v.check((text) => !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text), 'Field description holds a control character'),
        ),
        '',
      ),
    },
    unknownField(['webhook_id', 'organization_id', 'secret', 'status', 'created_at', 'created_by', 'disabled_at', 'disabled_reason']),
  ),
  v.title('WebhookCreate'),
)

const WebhookSchema = v.pipe(
  v.object({
    webhook_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    url: v.string(),
    event_types: v.array(v.string()),
    description: v.string(),
    status: v.pipe(v.picklist(['active', 'disabled']), v.description('disabled: every attempt failed for 5 days; create a new endpoint to resume.')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    created_by: v.string(),
    disabled_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    disabled_reason: v.nullable(v.string()),
  }),
  v.title('Webhook'),
)

const NewWebhookSchema = v.pipe(
  v.object({ ...WebhookSchema.entries, secret: v.pipe(v.string(), v.description('The signing secret (whsec_…): shown this once.')) }),
  v.title('NewWebhook'),
)

const WebhookListSchema = v.pipe(v.object({ webhooks: v.array(WebhookSchema), next_cursor: v.nullable(v.string()) }), v.title('WebhookList'))

const DeliverySchema = v.pipe(
  v.object({
    delivery_id: v.pipe(v.string(), v.uuid()),
    webhook_id: v.pipe(v.string(), v.uuid()),
    event_id: v.pipe(v.nullable(v.number()), v.description('The audit event delivered; null for decision.denied.')),
    decision_id: v.pipe(v.nullable(v.string()), v.description('For decision.denied: the decision.')),
    message_id: v.pipe(v.string(), v.description('The webhook-id header: the same for every attempt and replay of one event.')),
    type: v.string(),
    status: v.pipe(v.picklist(['pending', 'delivered', 'failed']), v.description('failed: every attempt of the schedule failed.')),
    attempts: v.number(),
    last_status_code: v.nullable(v.number()),
    last_error: v.nullable(v.string()),
    next_attempt_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    last_attempt_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    delivered_at: v.nullable(v.pipe(v.string(), v.isoTimestamp())),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    replay_of: v.nullable(v.string()),
  }),
  v.title('WebhookDelivery'),
)

const DeliveryListSchema = v.pipe(v.object({ deliveries: v.array(DeliverySchema), next_cursor: v.nullable(v.string()) }), v.title('WebhookDeliveryList'))

const PAGE_SIZE = PageSize(100, 50)
const ListQuerySchema = v.object({ limit: v.optional(PAGE_SIZE), cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))) })

const createBody = bodyDoc(WebhookCreateSchema, ['application/json'], true)

const iso = (date: Date | null) => (date ? date.toISOString() : null)

export function webhookToJson(row: WebhookRow): v.InferOutput<typeof WebhookSchema> {
  return {
    webhook_id: row.webhook_id,
    organization_id: row.organization_id,
    url: row.url,
    event_types: row.event_types,
    description: row.description,
    status: row.status,
    created_at: row.created_at.toISOString(),
    created_by: row.created_by,
    disabled_at: iso(row.disabled_at),
    disabled_reason: row.disabled_reason,
  }
}

export function deliveryToJson(row: DeliveryRow): v.InferOutput<typeof DeliverySchema> {
  return {
    delivery_id: row.delivery_id,
    webhook_id: row.webhook_id,
    event_id: row.event_id,
    decision_id: row.decision_id,
    message_id: row.message_id,
    type: row.type,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_error: row.last_error,
    next_attempt_at: iso(row.next_attempt_at),
    last_attempt_at: iso(row.last_attempt_at),
    delivered_at: iso(row.delivered_at),
    created_at: row.created_at.toISOString(),
    replay_of: row.replay_of,
  }
}

/** Who made a change, as the audit log names them. */
function actorOf(principal: Principal): Actor {
  return principal.kind === 'session' || !principal.keyId ? { type: 'user', id: principal.userId } : { type: 'key', id: principal.keyId }
}

/** A new signing secret: whsec_ and the base64 of 32 random bytes (the Standard Webhooks form). */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

async function targetWebhook(request: IRequest, ctx: RequestContext, principal: Principal): Promise<WebhookRow> {
  const id = pathId(request, 'webhook_id')
  const webhook = id ? await findWebhook(ctx.deps.db, principal.organizationId, id) : null
  if (!webhook) throw new HttpError(404, WEBHOOK_NOT_FOUND)
  return webhook
}

const WebhookCursorSchema = v.strictTuple([CursorTimestamp, CursorUuid])
const DeliveryCursorSchema = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,15}$/, CURSOR_INVALID), v.transform(Number))])

export function webhookRoutes(guard: Guard): Route[] {
  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, createBody)
    const refused = outboundUrlProblem(new URL(input.url), 'url', { allowPrivate: ctx.config.webhookAllowPrivate, setting: 'WEBHOOK_ALLOW_PRIVATE' })
    if (refused) throw new HttpError(400, refused)
    const secret = newSecret()
    const webhook = await createWebhook(
      ctx.deps.db,
      {
        organizationId: principal.organizationId,
        url: input.url,
        eventTypes: [...new Set(input.event_types)],
        description: input.description,
        secret,
        createdBy: creatorString(principal.userId, principal.keyId),
      },
      { actor: actorOf(principal), requestId: ctx.requestId, now: new Date(ctx.now) },
    )
    return created({ ...webhookToJson(webhook), secret }, `${ctx.config.productApiUrl}/webhooks/${webhook.webhook_id}`)
  }

  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = parseQuery(ListQuerySchema, request)
    const limit = query.limit ?? 50
    const after = query.cursor ? decodeCursor(query.cursor, WebhookCursorSchema) : null
    const rows = await listWebhooks(ctx.deps.db, principal.organizationId, after ? { createdAt: after[0], webhookId: after[1] } : null, limit + 1)
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return json(200, { webhooks: page.map(webhookToJson), next_cursor: rows.length > limit && last ? encodeCursor([last.created_at.toISOString(), last.webhook_id]) : null })
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, webhookToJson(await targetWebhook(request, ctx, principal)))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'webhook_id')
    const deleted = id ? await deleteWebhook(ctx.deps.db, principal.organizationId, id, { actor: actorOf(principal), requestId: ctx.requestId, now: new Date(ctx.now) }) : false
    if (!deleted) throw new HttpError(404, WEBHOOK_NOT_FOUND)
    return noContent()
  }

  async function deliveries(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const webhook = await targetWebhook(request, ctx, principal)
    const query = parseQuery(ListQuerySchema, request)
    const limit = query.limit ?? 50
    const before = query.cursor ? decodeCursor(query.cursor, DeliveryCursorSchema)[0] : null
    const rows = await listDeliveries(ctx.deps.db, webhook.webhook_id, before, limit + 1)
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return json(200, { deliveries: page.map(deliveryToJson), next_cursor: rows.length > limit && last ? encodeCursor([String(last.seq)]) : null })
  }

  async function targetDelivery(request: IRequest, ctx: RequestContext, principal: Principal): Promise<{ webhook: WebhookRow; delivery: DeliveryRow }> {
    const webhook = await targetWebhook(request, ctx, principal)
    const id = pathId(request, 'delivery_id')
    const delivery = id ? await findDelivery(ctx.deps.db, webhook.webhook_id, id) : null
    if (!delivery) throw new HttpError(404, DELIVERY_NOT_FOUND)
    return { webhook, delivery }
  }

  async function readDelivery(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, deliveryToJson((await targetDelivery(request, ctx, principal)).delivery))
  }

  async function replay(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const { webhook, delivery } = await targetDelivery(request, ctx, principal)
    if (webhook.status !== 'active') throw new HttpError(409, 'The webhook is disabled; create a new one to receive events again')
    const queued = await replayDelivery(ctx.deps.db, delivery, new Date(ctx.now))
    return created(deliveryToJson(queued), `${ctx.config.productApiUrl}/webhooks/${webhook.webhook_id}/deliveries/${queued.delivery_id}`)
  }

  return [
    { method: 'GET', path: '/webhooks', handler: guard.protect('webhooks:manage', list), doc: listDoc },
    { method: 'POST', path: '/webhooks', handler: guard.protect('webhooks:manage', create), doc: createDoc },
    { method: 'GET', path: '/webhooks/:webhook_id', handler: guard.protect('webhooks:manage', read), doc: readDoc },
    { method: 'DELETE', path: '/webhooks/:webhook_id', handler: guard.protect('webhooks:manage', remove), doc: deleteDoc },
    { method: 'GET', path: '/webhooks/:webhook_id/deliveries', handler: guard.protect('webhooks:manage', deliveries), doc: deliveriesDoc },
    { method: 'GET', path: '/webhooks/:webhook_id/deliveries/:delivery_id', handler: guard.protect('webhooks:manage', readDelivery), doc: readDeliveryDoc },
    { method: 'POST', path: '/webhooks/:webhook_id/deliveries/:delivery_id/replay', handler: guard.protect('webhooks:manage', replay), doc: replayDoc },
  ]
}

const TAGS = ['Webhooks']
const SCOPES = ['webhooks:manage'] as const
const NOT_FOUND = { 404: 'No such webhook in the caller\'s organization ("Webhook not found").' }
const DELIVERY_NOT_FOUND_DOC = { 404: 'No such webhook in the caller\'s organization, or no such delivery of it.' }

const listDoc: OperationDoc = {
  operationId: 'listWebhooks',
  summary: "List the organization's webhook endpoints",
  description: 'Newest first. Secrets are never returned.',
  tags: TAGS,
  scopes: [...SCOPES],
  query: ListQuerySchema,
  responses: { 200: { description: 'A page of endpoints.', schema: WebhookListSchema }, ...protectedErrors() },
}

const createDoc: OperationDoc = {
  operationId: 'createWebhook',
  summary: 'Create a webhook endpoint',
  description:
    'Events of the listed types, from transactions that begin after this one, are POSTed to the URL, signed with the Standard Webhooks scheme (webhook-id, webhook-timestamp, webhook-signature). The secret is in the response this once. Private, loopback and other internal addresses are refused unless WEBHOOK_ALLOW_PRIVATE=true.',
  tags: TAGS,
  scopes: [...SCOPES],
  body: createBody,
  responses: {
    201: { description: 'Created; secret holds the signing secret.', schema: NewWebhookSchema, headers: { Location: 'URL of the new endpoint.' } },
    ...protectedErrors({ 413: 'Body larger than the limit.', 415: 'Content-Type other than application/json.' }),
  },
}

const readDoc: OperationDoc = {
  operationId: 'getWebhook',
  summary: 'Fetch one webhook endpoint (without its secret)',
  tags: TAGS,
  scopes: [...SCOPES],
  responses: { 200: { description: 'The endpoint.', schema: WebhookSchema }, ...protectedErrors(NOT_FOUND) },
}

const deleteDoc: OperationDoc = {
  operationId: 'deleteWebhook',
  summary: 'Delete a webhook endpoint and its delivery log',
  tags: TAGS,
  scopes: [...SCOPES],
  responses: { 204: { description: 'Deleted.' }, ...protectedErrors(NOT_FOUND) },
}

const deliveriesDoc: OperationDoc = {
  operationId: 'listWebhookDeliveries',
  summary: "An endpoint's delivery log",
  description: 'Newest first: each event queued for the endpoint, its attempts, the last status code or error, the next attempt and when it was delivered.',
  tags: TAGS,
  scopes: [...SCOPES],
  query: ListQuerySchema,
  responses: { 200: { description: 'A page of deliveries.', schema: DeliveryListSchema }, ...protectedErrors(NOT_FOUND) },
}

const readDeliveryDoc: OperationDoc = {
  operationId: 'getWebhookDelivery',
  summary: 'One delivery of an endpoint',
  tags: TAGS,
  scopes: [...SCOPES],
  responses: { 200: { description: 'The delivery.', schema: DeliverySchema }, ...protectedErrors(DELIVERY_NOT_FOUND_DOC) },
}

const replayDoc: OperationDoc = {
  operationId: 'replayWebhookDelivery',
  summary: 'Send a delivered or failed event to the endpoint again',
  description: 'Queues the same event (same body, same webhook-id) behind what is already queued for the endpoint.',
  tags: TAGS,
  scopes: [...SCOPES],
  responses: {
    201: { description: 'Queued; the new delivery.', schema: DeliverySchema, headers: { Location: 'URL of the new delivery.' } },
    ...protectedErrors({ ...DELIVERY_NOT_FOUND_DOC, 409: 'The endpoint is disabled.' }),
  },
}
