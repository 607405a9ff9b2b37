// One person's data in lead capture, through the product API (Owners of the organization that
// holds the leads): POST /leads/people/export, POST /leads/people/erase, and
// POST /leads/people/erasures ("was this address erased?"). The email travels in the body,
// never in a URL (URLs end up in logs).
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { MAX_EMAIL_LENGTH } from '../domain/email.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { Principal } from '../services/credentials.ts'
import { erasePersonData, erasuresOf, exportPerson } from '../services/lead-people.ts'
import type { Secrets } from '../services/secrets.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { assertHoldsLeads } from './lead-lists.ts'

export const ONLY_OWNERS_PEOPLE = "Only Owners export or erase a person's lead data"

export const PersonRequestSchema = v.pipe(
  v.strictObject(
    {
      email: v.pipe(
        v.string('Field email must be a string'),
        v.trim(),
        v.nonEmpty('Field email is required'),
        v.maxLength(MAX_EMAIL_LENGTH, `Field email is longer than ${MAX_EMAIL_LENGTH} characters`),
        v.description('The person\'s email address; matched trimmed and case-insensitively.'),
      ),
    },
    unknownField(),
  ),
  v.title('LeadPersonRequest'),
)
const personBody = bodyDoc(PersonRequestSchema, ['application/json'], true)

const PersonExportSchema = v.pipe(
  v.object({
    email: v.pipe(v.string(), v.description('The address as matched: trimmed, lower case.')),
    exported_at: v.string(),
    records: v.pipe(v.record(v.string(), v.array(v.record(v.string(), v.unknown()))), v.description('Every row held about the person, by table: demo_requests, newsletter_subscriptions, lead_subscriptions (consents), lead_mail_outbox and lead_mail_attempts (notification and confirmation mails), lead_spam. Tables without a row are left out.')),
  }),
  v.title('LeadPersonExport'),
)
const PersonErasedSchema = v.pipe(
  v.object({
    erased: v.literal(true),
    deleted: v.pipe(v.record(v.string(), v.number()), v.description('Rows deleted, by table (empty when nothing was held).')),
  }),
  v.title('LeadPersonErased'),
)
const PersonErasuresSchema = v.pipe(
  v.object({ erasures: v.array(v.object({ event_id: v.number(), occurred_at: v.string() })) }),
  v.title('LeadPersonErasures'),
)

export function leadPeopleRoutes(guard: Guard, secrets: Secrets): Route[] {
  async function owner(request: IRequest, ctx: RequestContext, principal: Principal): Promise<string> {
    await assertHoldsLeads(ctx, principal)
    if (principal.role !== 'owner') throw new HttpError(403, ONLY_OWNERS_PEOPLE)
    return (await readInput(request, ctx, personBody)).email
  }

  async function exported(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const email = await owner(request, ctx, principal)
    return json(200, await exportPerson(ctx.deps.db, secrets, email, auditBy(ctx, principal), principal.organizationId, new Date(ctx.now)))
  }

  async function erase(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const email = await owner(request, ctx, principal)
    const deleted = await erasePersonData(ctx.deps.db, secrets, email, auditBy(ctx, principal), principal.organizationId, new Date(ctx.now))
    return json(200, { erased: true, deleted })
  }

  async function erasures(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const email = await owner(request, ctx, principal)
    const found = await erasuresOf(ctx.deps.db, secrets, email, principal.organizationId)
    return json(200, { erasures: found.map((row) => ({ event_id: row.event_id, occurred_at: row.occurred_at.toISOString() })) })
  }

  return [
    { method: 'POST', path: '/leads/people/export', handler: guard.protect('members:manage', exported), doc: doc('exportLeadPerson', "Export everything lead capture holds about one email (Owners)", 'Every row about the address: demo requests, newsletter subscriptions, consent records, notification and confirmation mails with their attempt log, and spam. Recorded as lead.exported, naming the person only by a keyed hash of the email.', PersonExportSchema, 'The records.') },
    { method: 'POST', path: '/leads/people/erase', handler: guard.protect('members:manage', erase), doc: doc('eraseLeadPerson', 'Erase everything lead capture holds about one email (Owners)', 'Deletes every row export would return, in one transaction, and records lead.erased naming the person only by a keyed hash of the email (HMAC-SHA256 under a key derived from the secrets key), so the audit log holds nothing of the erased data and its seals still verify. Erasing an address nothing is held about answers 200 with nothing deleted.', PersonErasedSchema, 'Erased.') },
    { method: 'POST', path: '/leads/people/erasures', handler: guard.protect('members:manage', erasures), doc: doc('listLeadPersonErasures', 'When an email was erased (Owners)', 'Answers "was this address erased?" for someone who knows it, from the keyed hash in the lead.erased events. Empty when never erased, or on PostgreSQL without SECRETS_KEY (no key to hash with).', PersonErasuresSchema, 'The erasures, oldest first.') },
  ]
}

function doc(operationId: string, summary: string, description: string, schema: v.GenericSchema, ok: string): OperationDoc {
  return {
    operationId,
    summary,
    description: `${description} The email travels in the body, never in the URL.`,
    tags: ['Leads'],
    scopes: ['members:manage'],
    body: personBody,
    responses: {
      200: { description: ok, schema },
      ...protectedErrors({ 400: 'A missing, empty or over-long email, or an unknown field.', 403: 'Not an Owner of the organization that holds the leads.' }),
    },
  }
}
