// The lead lists' mail settings and the mail outbox, through the product API: GET /leads/lists,
// GET and PATCH /leads/lists/{list} (notification addresses, double opt-in, consent text and
// version, confirmation link lifetime) and GET /leads/outbox. Read as the leads are read (Owners
// and Admins of the organization that holds them); changed by its Owners only.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import { isValidEmail, MAX_EMAIL_LENGTH } from '../domain/email.ts'
import { LEAD_LIST_NAMES, MAX_CONFIRM_TTL_SECONDS, MAX_NOTIFY_ADDRESSES, MIN_CONFIRM_TTL_SECONDS, type LeadListName } from '../domain/lead-mail.ts'
import type { Principal } from '../services/credentials.ts'
import type { LeadMail } from '../services/lead-mail.ts'
import { listOutbox, type ListSettings, type OutboxEntry } from '../storage/lead-mail.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { CURSOR_INVALID, decodeCursor, encodeCursor, PageSize, parseValue } from './input.ts'
import { assertHoldsLeads } from './lead-lists.ts'

export const ONLY_OWNERS_LISTS = 'Only Owners change the lead lists\' settings'
export const UNKNOWN_LIST = 'Unknown list: demo-requests or newsletter'
const NOTHING_TO_CHANGE = 'Request body names no field to change'
const NO_CONTROL = /^[^\u0000-\u0008\u000b-\u001f\u007f]*$/

const Address = v.pipe(
  v.string('Field notify must be an array of email addresses'),
  v.trim(),
  v.maxLength(MAX_EMAIL_LENGTH, 'Field notify holds an invalid email address'),
  v.check(isValidEmail, 'Field notify holds an invalid email address'),
)

const fields = {
  notify: v.pipe(
    v.array(Address, 'Field notify must be an array of email addresses'),
    v.maxLength(MAX_NOTIFY_ADDRESSES, `Field notify holds more than ${MAX_NOTIFY_ADDRESSES} addresses`),
    v.description('Addresses emailed each new lead of the list (plain text, every field, Reply-To the requester). Empty: no notification.'),
  ),
  double_opt_in: v.pipe(v.boolean('Field double_opt_in must be true or false'), v.description('Newsletter only: a subscription stays pending until the subscriber follows the link in a confirmation mail. Needs SMTP settings.')),
  consent_text: v.pipe(
    v.nullable(v.pipe(v.string('Field consent_text must be a string or null'), v.maxLength(4000, 'Field consent_text is longer than 4000 characters'), v.check((t) => NO_CONTROL.test(t), 'Field consent_text holds a control character'))),
    v.description('What the subscriber consents to, quoted in the confirmation mail.'),
  ),
  consent_version: v.pipe(
    v.nullable(v.pipe(v.string('Field consent_version must be a string or null'), v.trim(), v.maxLength(100, 'Field consent_version is longer than 100 characters'), v.check((t) => NO_CONTROL.test(t), 'Field consent_version holds a control character'))),
    v.description('The version of the consent text, recorded with each subscription and its confirmation.'),
  ),
  confirm_ttl_seconds: v.pipe(
    v.number(`Field confirm_ttl_seconds must be a whole number from ${MIN_CONFIRM_TTL_SECONDS} to ${MAX_CONFIRM_TTL_SECONDS}`),
    v.integer(`Field confirm_ttl_seconds must be a whole number from ${MIN_CONFIRM_TTL_SECONDS} to ${MAX_CONFIRM_TTL_SECONDS}`),
    v.minValue(MIN_CONFIRM_TTL_SECONDS, `Field confirm_ttl_seconds must be a whole number from ${MIN_CONFIRM_TTL_SECONDS} to ${MAX_CONFIRM_TTL_SECONDS}`),
    v.maxValue(MAX_CONFIRM_TTL_SECONDS, `Field confirm_ttl_seconds must be a whole number from ${MIN_CONFIRM_TTL_SECONDS} to ${MAX_CONFIRM_TTL_SECONDS}`),
    v.description('How long a confirmation link works, and an unconfirmed subscription waits before it expires (default 172800: 48 hours).'),
  ),
}

export const LeadListSettingsUpdateSchema = v.pipe(
  v.strictObject(
    {
      notify: v.optional(fields.notify),
      double_opt_in: v.optional(fields.double_opt_in),
      consent_text: v.optional(fields.consent_text),
      consent_version: v.optional(fields.consent_version),
      confirm_ttl_seconds: v.optional(fields.confirm_ttl_seconds),
    },
    unknownField(['list', 'updated_at', 'updated_by']),
  ),
  v.title('LeadListSettingsUpdate'),
)
const updateBody = bodyDoc(LeadListSettingsUpdateSchema, ['application/json', 'application/merge-patch+json'], true)

export const LeadListSettingsSchema = v.pipe(
  v.object({
    list: v.picklist(LEAD_LIST_NAMES),
    notify: v.array(v.string()),
    double_opt_in: v.boolean(),
    consent_text: v.nullable(v.string()),
    consent_version: v.nullable(v.string()),
    confirm_ttl_seconds: v.pipe(v.number(), v.integer()),
    updated_at: v.pipe(v.nullable(v.string()), v.description('When an Owner last changed the settings; null: the defaults.')),
  }),
  v.title('LeadListSettings'),
)

const LeadListsSchema = v.pipe(
  v.object({
    smtp_configured: v.pipe(v.boolean(), v.description('Whether SMTP settings are given: without them no mail is sent or queued.')),
    lists: v.array(LeadListSettingsSchema),
  }),
  v.title('LeadLists'),
)

const OUTBOX_STATUSES = ['pending', 'sent', 'failed', 'cancelled'] as const
const OutboxQuerySchema = v.object({
  status: v.optional(v.pipe(v.picklist(OUTBOX_STATUSES, 'status must be pending, sent, failed or cancelled'), v.description('Only mails in this state.'))),
  limit: v.optional(PageSize(100, 50)),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})

const LeadMailSchema = v.pipe(
  v.object({
    id: v.pipe(v.number(), v.integer()),
    kind: v.pipe(v.picklist(['notification', 'confirmation']), v.description('notification: to the list\'s addresses; confirmation: to a newsletter subscriber.')),
    list: v.picklist(LEAD_LIST_NAMES),
    recipients: v.array(v.string()),
    subject: v.string(),
    status: v.picklist(OUTBOX_STATUSES),
    attempts: v.pipe(v.number(), v.integer()),
    created_at: v.string(),
    next_attempt_at: v.pipe(v.nullable(v.string()), v.description('When a pending mail is tried next; null otherwise.')),
    sent_at: v.nullable(v.string()),
    last_error: v.nullable(v.string()),
    log: v.pipe(v.array(v.object({ attempt: v.number(), at: v.string(), ok: v.boolean(), detail: v.pipe(v.string(), v.description('The SMTP server\'s answer or the error, addresses masked.')) })), v.description('Every attempt, oldest first.')),
  }),
  v.title('LeadMail'),
)
const LeadOutboxSchema = v.pipe(v.object({ mails: v.array(LeadMailSchema), next_cursor: v.nullable(v.string()) }), v.title('LeadOutbox'))

const CursorId = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,15}$/), v.transform(Number))])

function settingsToJson(settings: ListSettings): v.InferOutput<typeof LeadListSettingsSchema> {
  const { list, notify, double_opt_in, consent_text, consent_version, confirm_ttl_seconds } = settings
  return { list, notify, double_opt_in, consent_text, consent_version, confirm_ttl_seconds, updated_at: settings.updated_at?.toISOString() ?? null }
}

function mailToJson(mail: OutboxEntry): Record<string, unknown> {
  return {
    ...mail,
    created_at: mail.created_at.toISOString(),
    next_attempt_at: mail.next_attempt_at?.toISOString() ?? null,
    sent_at: mail.sent_at?.toISOString() ?? null,
    log: mail.log.map((entry) => ({ ...entry, at: entry.at.toISOString() })),
  }
}

function listOf(request: IRequest): LeadListName {
  const list = decodeURIComponent(String(request.params?.list ?? ''))
  if (!(LEAD_LIST_NAMES as readonly string[]).includes(list)) throw new HttpError(404, UNKNOWN_LIST)
  return list as LeadListName
}

export function leadSettingsRoutes(guard: Guard, mail: LeadMail): Route[] {
  async function all(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const lists = await Promise.all(LEAD_LIST_NAMES.map((list) => mail.settings(list)))
    return json(200, { smtp_configured: mail.configured, lists: lists.map(settingsToJson) })
  }

  async function one(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    return json(200, settingsToJson(await mail.settings(listOf(request))))
  }

  async function change(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const list = listOf(request)
    if (principal.role !== 'owner') throw new HttpError(403, ONLY_OWNERS_LISTS)
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, NOTHING_TO_CHANGE)
    const saved = await mail.changeSettings(list, changes, new Date(ctx.now), { ...auditBy(ctx, principal), organizationId: principal.organizationId, creator: principal.subject })
    return json(200, settingsToJson(saved))
  }

  async function outbox(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const query = new URL(request.url).searchParams
    const status = query.get('status')
    const rawLimit = query.get('limit')
    const cursor = query.get('cursor')
    const found = await listOutbox(ctx.deps.db, {
      status: status === null || status === '' ? null : parseValue(OutboxQuerySchema.entries.status, status)!,
      limit: rawLimit === null ? 50 : parseValue(PageSize(100, 50), rawLimit),
      before: cursor === null || cursor === '' ? null : decodeCursor(cursor, CursorId)[0],
    })
    return json(200, { mails: found.mails.map(mailToJson), next_cursor: found.nextBefore === null ? null : encodeCursor([String(found.nextBefore)]) })
  }

  return [
    { method: 'GET', path: '/leads/lists', handler: guard.protect('members:manage', all), doc: listsDoc },
    { method: 'GET', path: '/leads/lists/:list', handler: guard.protect('members:manage', one), doc: oneDoc },
    { method: 'PATCH', path: '/leads/lists/:list', handler: guard.protect('members:manage', change), doc: changeDoc },
    { method: 'GET', path: '/leads/outbox', handler: guard.protect('members:manage', outbox), doc: outboxDoc },
  ]
}

const TAGS = ['Leads']
const WHO = 'Only Owners and Admins of the organization that holds the leads (LEADS_ORGANIZATION_ID, by default the organization created first) may read them; any other credential gets 403.'
const forbidden = { 403: 'The credential is not an Owner or Admin of the organization that holds the leads, or its role lacks members:manage.' }

const listsDoc: OperationDoc = {
  operationId: 'listLeadLists',
  summary: 'The lead lists and their mail settings',
  description: WHO,
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 200: { description: 'Both lists, and whether SMTP is configured.', schema: LeadListsSchema }, ...protectedErrors(forbidden) },
}

const oneDoc: OperationDoc = {
  operationId: 'getLeadList',
  summary: "A lead list's mail settings",
  description: `The list is demo-requests or newsletter. ${WHO}`,
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 200: { description: 'The settings (the defaults until an Owner changes them).', schema: LeadListSettingsSchema }, ...protectedErrors({ ...forbidden, 404: UNKNOWN_LIST }) },
}

const changeDoc: OperationDoc = {
  operationId: 'updateLeadList',
  summary: "Change a lead list's mail settings (Owners)",
  description: 'Only the fields given change. Double opt-in applies to the newsletter only and needs SMTP settings and a secrets key; it governs signups from then on.',
  tags: TAGS,
  scopes: ['members:manage'],
  body: updateBody,
  responses: {
    200: { description: 'The settings as saved.', schema: LeadListSettingsSchema },
    ...protectedErrors({
      400: 'A field of the wrong type or out of range, an unknown field, an empty change, or double_opt_in on demo-requests.',
      403: 'Not an Owner of the organization that holds the leads.',
      404: UNKNOWN_LIST,
      409: 'Double opt-in asked for without SMTP settings or without a secrets key.',
    }),
  },
}

const outboxDoc: OperationDoc = {
  operationId: 'listLeadMail',
  summary: 'The lead-mail outbox: every mail queued, its state and its attempts',
  description: `Newest first. A failed attempt is retried after 30 s, doubling up to 6 hours, 10 attempts in all. ${WHO}`,
  tags: TAGS,
  scopes: ['members:manage'],
  query: OutboxQuerySchema,
  responses: {
    200: { description: 'A page of mails.', schema: LeadOutboxSchema },
    ...protectedErrors({ ...forbidden, 400: `A bad status or limit, or a cursor not from a previous page ("${CURSOR_INVALID}").` }),
  },
}
