// Spam defence of the lead lists through the product API: GET and PATCH
// /leads/lists/{list}/spam (honeypot, CAPTCHA, retention), GET /leads/spam (what was kept apart)
// and POST /leads/spam/{id}/restore (a spam row becomes a lead). Read and restored as the leads are
// read (Owners and Admins of the organization that holds them); the settings change by Owners only.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { SpamListName } from '../database/lead-spam-schema.ts'
import type { Principal } from '../services/credentials.ts'
import { CAPTCHA_PROVIDERS } from '../services/captcha.ts'
import { changeSpamSettings, tokenFieldOf, verifyUrlOf, type LeadSpam } from '../services/lead-spam.ts'
import { listSpamPage, readSpamSettings, restoreSpam, SPAM_LISTS, type SpamRow, type SpamSettingsRow } from '../storage/lead-spam.ts'
import { protectedErrors, auditBy, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { CURSOR_INVALID, decodeCursor, encodeCursor, PageSize, parseValue } from './input.ts'
import { assertHoldsLeads } from './lead-lists.ts'

export const ONLY_OWNERS_SPAM = "Only Owners change the lead lists' spam settings"
const UNKNOWN_LIST = 'Unknown list: demo-requests or newsletter'
const SPAM_NOT_FOUND = 'Spam submission not found'
const ALREADY_ON_LIST = 'This email is already on the list; the spam submission was kept'
const NOTHING_TO_CHANGE = 'Request body names no field to change'
const PROVIDERS = ['turnstile', 'hcaptcha', 'recaptcha'] as const
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/
const MAX_URL = 2048
const MAX_SECRET = 1024

const VerifyUrl = v.pipe(
  v.string('Field captcha_verify_url must be a string or null'),
  v.maxLength(MAX_URL, `Field captcha_verify_url is longer than ${MAX_URL} characters`),
  v.check((text) => URL.canParse(text) && ['http:', 'https:'].includes(new URL(text).protocol), 'Field captcha_verify_url must be an absolute http(s) URL'),
  v.check((text) => !URL.canParse(text) || (!new URL(text).username && !new URL(text).password && !new URL(text).hash), 'Field captcha_verify_url must hold no user name, password or fragment'),
)

export const SpamSettingsUpdateSchema = v.pipe(
  v.strictObject(
    {
      honeypot_field: v.optional(
        v.pipe(
          v.nullable(v.pipe(v.string('Field honeypot_field must be a string or null'), v.regex(FIELD_NAME, 'Field honeypot_field must be a form field name: a letter or _, then letters, digits, _ . or -, at most 64'))),
          v.description('The hidden form field a person leaves empty and a bot fills: a submission with it non-empty is kept as spam and answered as a success. Null: no honeypot.'),
        ),
      ),
      captcha_provider: v.optional(
        v.pipe(
          v.nullable(v.picklist(PROVIDERS, 'Field captcha_provider must be turnstile, hcaptcha, recaptcha or null')),
          v.description('Verify a CAPTCHA token server-side before storing. The form posts the token in the provider\'s field: cf-turnstile-response, h-captcha-response or g-recaptcha-response. Null: no CAPTCHA.'),
        ),
      ),
      captcha_secret: v.optional(
        v.pipe(
          v.nullable(v.pipe(v.string('Field captcha_secret must be a string or null'), v.minLength(1, 'Field captcha_secret must not be empty'), v.maxLength(MAX_SECRET, `Field captcha_secret is longer than ${MAX_SECRET} characters`))),
          v.description('The provider\'s secret key. Write-only: sealed at rest (SECRETS_KEY or DATA_DIR/secrets.key), never shown again.'),
        ),
      ),
      captcha_verify_url: v.optional(
        v.pipe(v.nullable(VerifyUrl), v.description("Where tokens are verified; null: the provider's siteverify URL. https to a public address unless CAPTCHA_ALLOW_PRIVATE=true.")),
      ),
      captcha_fail_mode: v.optional(
        v.pipe(
          v.picklist(['closed', 'open'], 'Field captcha_fail_mode must be closed or open'),
          v.description('When the provider cannot be reached: closed (default) refuses the submission with 503; open keeps it as spam for review and answers as a success.'),
        ),
      ),
      retention_days: v.optional(
        v.pipe(
          v.nullable(v.pipe(v.number('Field retention_days must be a whole number from 1 to 3650 or null'), v.integer('Field retention_days must be a whole number from 1 to 3650 or null'), v.minValue(1, 'Field retention_days must be a whole number from 1 to 3650 or null'), v.maxValue(3650, 'Field retention_days must be a whole number from 1 to 3650 or null'))),
          v.description('Days spam of this list is kept before it is deleted; null: LEAD_SPAM_RETENTION_DAYS (30 by default).'),
        ),
      ),
    },
    unknownField(['list', 'captcha_secret_set', 'captcha_token_field', 'retention_days_effective', 'updated_at', 'updated_by']),
  ),
  v.title('LeadSpamSettingsUpdate'),
)
const updateBody = bodyDoc(SpamSettingsUpdateSchema, ['application/json', 'application/merge-patch+json'], true)

export const SpamSettingsSchema = v.pipe(
  v.object({
    list: v.picklist(SPAM_LISTS),
    honeypot_field: v.nullable(v.string()),
    captcha_provider: v.nullable(v.picklist(PROVIDERS)),
    captcha_secret_set: v.pipe(v.boolean(), v.description('Whether a secret is stored (it is never shown).')),
    captcha_token_field: v.pipe(v.nullable(v.string()), v.description('The form field the token is read from, set by the provider.')),
    captcha_verify_url: v.pipe(v.nullable(v.string()), v.description('The URL tokens are verified at (the provider\'s unless changed); null without a provider.')),
    captcha_fail_mode: v.picklist(['closed', 'open']),
    retention_days: v.pipe(v.nullable(v.number()), v.description('The list\'s own retention; null: the server default.')),
    retention_days_effective: v.pipe(v.number(), v.description('Days spam of this list is kept.')),
    updated_at: v.pipe(v.nullable(v.string()), v.description('When an Owner last changed them; null: the defaults (everything off).')),
  }),
  v.title('LeadSpamSettings'),
)

export const SpamEntrySchema = v.pipe(
  v.object({
    id: v.pipe(v.number(), v.integer()),
    list: v.picklist(SPAM_LISTS),
    email: v.string(),
    fields: v.pipe(v.record(v.string(), v.unknown()), v.description('The submission\'s fields, as a lead of the list would hold them.')),
    reason: v.pipe(v.picklist(['honeypot', 'captcha_unavailable']), v.description('honeypot: the hidden field was filled; captcha_unavailable: kept for review while the CAPTCHA provider was down (fail mode open).')),
    via: v.pipe(v.string(), v.description('The path posted to.')),
    received_at: v.string(),
    purge_after: v.pipe(v.string(), v.description('When the purge deletes it unless restored.')),
  }),
  v.title('LeadSpamEntry'),
)
const SpamPageSchema = v.pipe(v.object({ spam: v.array(SpamEntrySchema), next_cursor: v.nullable(v.string()) }), v.title('LeadSpamPage'))
const RestoredSchema = v.pipe(
  v.object({ restored: v.literal(true), list: v.picklist(SPAM_LISTS), lead_id: v.pipe(v.number(), v.integer(), v.description('The new lead\'s id in its list.')) }),
  v.title('LeadSpamRestored'),
)

const SpamQuerySchema = v.object({
  list: v.optional(v.pipe(v.picklist(SPAM_LISTS, 'list must be demo-requests or newsletter'), v.description('Only spam of this list.'))),
  limit: v.optional(PageSize(100, 50)),
  cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))),
})
const CursorId = v.strictTuple([v.pipe(v.string(), v.regex(/^[1-9]\d{0,15}$/), v.transform(Number))])

function settingsToJson(row: SpamSettingsRow, defaultDays: number): v.InferOutput<typeof SpamSettingsSchema> {
  return {
    list: row.list,
    honeypot_field: row.honeypot_field,
    captcha_provider: row.captcha_provider,
    captcha_secret_set: row.captcha_secret_sealed !== null,
    captcha_token_field: tokenFieldOf(row.captcha_provider),
    captcha_verify_url: verifyUrlOf(row),
    captcha_fail_mode: row.captcha_fail_mode,
    retention_days: row.retention_days,
    retention_days_effective: row.retention_days ?? defaultDays,
    updated_at: row.updated_at?.toISOString() ?? null,
  }
}

function listOf(request: IRequest): SpamListName {
  const list = decodeURIComponent(String(request.params?.list ?? ''))
  if (!(SPAM_LISTS as readonly string[]).includes(list)) throw new HttpError(404, UNKNOWN_LIST)
  return list as SpamListName
}

export function leadSpamRoutes(guard: Guard, spam: LeadSpam): Route[] {
  async function get(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    return json(200, settingsToJson(await readSpamSettings(ctx.deps.db, listOf(request)), ctx.config.leadSpamRetentionDays))
  }

  async function change(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const list = listOf(request)
    if (principal.role !== 'owner') throw new HttpError(403, ONLY_OWNERS_SPAM)
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, NOTHING_TO_CHANGE)
    const by = { ...auditBy(ctx, principal), organizationId: principal.organizationId, creator: principal.subject }
    const saved = await changeSpamSettings(ctx.deps.db, ctx.config, spam, list, changes, by, new Date(ctx.now))
    return json(200, settingsToJson(saved, ctx.config.leadSpamRetentionDays))
  }

  async function page(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const query = new URL(request.url).searchParams
    const list = query.get('list')
    const rawLimit = query.get('limit')
    const cursor = query.get('cursor')
    const found = await listSpamPage(ctx.deps.db, {
      list: list === null || list === '' ? null : parseValue(SpamQuerySchema.entries.list, list)!,
      limit: rawLimit === null ? 50 : parseValue(PageSize(100, 50), rawLimit),
      before: cursor === null || cursor === '' ? null : decodeCursor(cursor, CursorId)[0],
    })
    const retention = new Map<SpamListName, number>()
    for (const name of SPAM_LISTS) retention.set(name, (await readSpamSettings(ctx.deps.db, name)).retention_days ?? ctx.config.leadSpamRetentionDays)
    return json(200, { spam: found.rows.map((row) => spamToJson(row, retention.get(row.list)!)), next_cursor: found.nextBefore === null ? null : encodeCursor([String(found.nextBefore)]) })
  }

  async function restore(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    await assertHoldsLeads(ctx, principal)
    const raw = String(request.params?.id ?? '')
    if (!/^[1-9]\d{0,15}$/.test(raw)) throw new HttpError(404, SPAM_NOT_FOUND)
    // Recorded as lead.created exactly when a submission would be: with LEADS_ORGANIZATION_ID set, in that organization.
    const holder = ctx.config.leadsOrganizationId
    const outcome = await restoreSpam(ctx.deps.db, Number(raw), new Date(ctx.now), holder ? { organizationId: holder, requestId: ctx.requestId } : null)
    if (outcome.kind === 'missing') throw new HttpError(404, SPAM_NOT_FOUND)
    if (outcome.kind === 'duplicate') throw new HttpError(409, ALREADY_ON_LIST)
    return json(200, { restored: true, list: outcome.list, lead_id: outcome.leadId })
  }

  return [
    { method: 'GET', path: '/leads/lists/:list/spam', handler: guard.protect('members:manage', get), doc: getDoc },
    { method: 'PATCH', path: '/leads/lists/:list/spam', handler: guard.protect('members:manage', change), doc: changeDoc },
    { method: 'GET', path: '/leads/spam', handler: guard.protect('members:manage', page), doc: pageDoc },
    { method: 'POST', path: '/leads/spam/:id/restore', handler: guard.protect('members:manage', restore), doc: restoreDoc },
  ]
}

function spamToJson(row: SpamRow, retentionDays: number): v.InferOutput<typeof SpamEntrySchema> {
  return {
    id: row.id,
    list: row.list,
    email: row.email,
    fields: row.fields,
    reason: row.reason,
    via: row.via,
    received_at: row.received_at.toISOString(),
    purge_after: new Date(row.received_at.getTime() + retentionDays * 86_400_000).toISOString(),
  }
}

const TAGS = ['Leads']
const WHO = 'Only Owners and Admins of the organization that holds the leads (LEADS_ORGANIZATION_ID, by default the organization created first) may read them; any other credential gets 403.'
const forbidden = { 403: 'The credential is not an Owner or Admin of the organization that holds the leads, or its role lacks members:manage.' }
const tokenFields = Object.entries(CAPTCHA_PROVIDERS).map(([name, p]) => `${name}: ${p.tokenField}`).join(', ')

const getDoc: OperationDoc = {
  operationId: 'getLeadListSpam',
  summary: "A lead list's spam settings",
  description: `The list is demo-requests or newsletter. Everything is off until an Owner turns it on. ${WHO}`,
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 200: { description: 'The settings (the secret only as captcha_secret_set).', schema: SpamSettingsSchema }, ...protectedErrors({ ...forbidden, 404: UNKNOWN_LIST }) },
}

const changeDoc: OperationDoc = {
  operationId: 'updateLeadListSpam',
  summary: "Change a lead list's spam settings (Owners)",
  description:
    `Only the fields given change. With a CAPTCHA provider, the list's form must post the widget's token (${tokenFields}); a missing, invalid or reused token answers 400, and a provider that cannot be reached answers 503 (fail mode closed) or keeps the submission as spam (open). ` +
    'A honeypot hit is kept as spam and answered exactly as a stored lead. Neither applies until an Owner turns it on, so the published form answers are unchanged by default.',
  tags: TAGS,
  scopes: ['members:manage'],
  body: updateBody,
  responses: {
    200: { description: 'The settings as saved.', schema: SpamSettingsSchema },
    ...protectedErrors({
      400: 'A field of the wrong type or out of range, an unknown field, an empty change, a provider without a secret, a honeypot named like a form field, a verify URL refused by the SSRF guard (CAPTCHA_ALLOW_PRIVATE), or a secret on PostgreSQL without SECRETS_KEY.',
      403: 'Not an Owner of the organization that holds the leads.',
      404: UNKNOWN_LIST,
    }),
  },
}

const pageDoc: OperationDoc = {
  operationId: 'listLeadSpam',
  summary: 'The submissions kept apart as spam',
  description: `Newest first, a page at a time. Spam is never a lead: not in the lead lists, exports or webhooks, and no notification is sent. It is deleted after its list's retention. ${WHO}`,
  tags: TAGS,
  scopes: ['members:manage'],
  query: SpamQuerySchema,
  responses: {
    200: { description: 'A page of spam.', schema: SpamPageSchema },
    ...protectedErrors({ ...forbidden, 400: `A bad list or limit, or a cursor not from a previous page ("${CURSOR_INVALID}").` }),
  },
}

const restoreDoc: OperationDoc = {
  operationId: 'restoreLeadSpam',
  summary: 'Restore a spam submission as a lead',
  description: `The submission becomes a lead of its list (recorded as lead.created when a submission would be: with LEADS_ORGANIZATION_ID set) and leaves the spam. The duplicate rule holds: an email already on the list answers 409 and the spam stays. ${WHO}`,
  tags: TAGS,
  scopes: ['members:manage'],
  responses: {
    200: { description: 'Restored.', schema: RestoredSchema },
    ...protectedErrors({ ...forbidden, 404: SPAM_NOT_FOUND, 409: ALREADY_ON_LIST }),
  },
}
