// The public lead-capture surface (docs/api.md): POST /demo-request,
// POST /newsletter and its legacy alias POST /waitlist. No credentials; posted to by browsers.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Config } from '../config.ts'
import { isValidEmail, MAX_EMAIL_LENGTH } from '../domain/email.ts'
import { bodyDoc, readInputOrRefusal } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { BodyDoc, OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import { insertDemoRequestUnlessRegistered, insertSubscriptionUnlessRegistered, type LeadAudit } from '../storage/leads.ts'
import { countDuplicateLead } from '../storage/report-leads.ts'
import type { Deps, RequestContext, Route, Surface } from './deps.ts'
import { createRateLimiter, rateLimitHeaders, type RateLimitDecision, type RateLimiter } from '../services/ratelimit.ts'
import type { LeadMail } from '../services/lead-mail.ts'
import type { LeadSpam } from '../services/lead-spam.ts'
import type { SpamListName } from '../database/lead-spam-schema.ts'

const MISSING_FIELDS = 'Missing required fields'
const INVALID_EMAIL = 'Invalid email'

/** Longest accepted values, in characters. Longer input is refused, never truncated. */
export const FIELD_LIMITS = Object.freeze({
  first_name: 200,
  last_name: 200,
  company: 200,
  linkedin: 2048,
  phone: 64,
  source: 200,
  analytics_distinct_id: 200,
})

// C0 and C1 controls: \s alone misses U+0080–U+009F (NEL and friends).
const requiredText = (name: keyof typeof FIELD_LIMITS) =>
  v.pipe(
    v.string(`Field ${name} must be a string`),
    v.trim(),
    v.nonEmpty(MISSING_FIELDS),
    v.maxLength(FIELD_LIMITS[name], `Field ${name} is longer than ${FIELD_LIMITS[name]} characters`),
  )

const optionalText = (name: keyof typeof FIELD_LIMITS, description: string) =>
  v.optional(
    v.pipe(
      v.string(`Field ${name} must be a string`),
      v.trim(),
      v.maxLength(FIELD_LIMITS[name], `Field ${name} is longer than ${FIELD_LIMITS[name]} characters`),
      v.description(description),
    ),
  )

const email = (emptyMessage: string) =>
  v.pipe(
    v.string(INVALID_EMAIL),
    v.trim(),
    v.nonEmpty(emptyMessage),
    v.maxLength(MAX_EMAIL_LENGTH, INVALID_EMAIL),
    v.check(isValidEmail, INVALID_EMAIL),
    v.description('Work email address (format email).'),
    v.metadata({ format: 'email' }),
  )

const attribution = {
  source: optionalText('source', 'Attribution source of the submission.'),
  analytics_distinct_id: optionalText('analytics_distinct_id', 'Analytics-session identifier linking the submission to an analytics session.'),
}

/** docs/api.md DemoRequest. Unknown fields are dropped, never an error. */
export const DemoRequestSchema = v.pipe(
  v.object(
    {
      first_name: v.pipe(requiredText('first_name'), v.description("Requester's first name.")),
      last_name: v.pipe(requiredText('last_name'), v.description("Requester's last name.")),
      email: email(MISSING_FIELDS),
      company: v.pipe(requiredText('company'), v.description('Company name.')),
      linkedin: v.pipe(requiredText('linkedin'), v.description('Professional-profile URL; stored, never fetched.')),
      phone: optionalText('phone', 'Phone number.'),
      ...attribution,
    },
    MISSING_FIELDS,
  ),
  v.title('DemoRequest'),
)

/** docs/api.md NewsletterRequest. */
export const NewsletterRequestSchema = v.pipe(
  v.object({ email: email(INVALID_EMAIL), ...attribution }, INVALID_EMAIL),
  v.title('NewsletterRequest'),
)

const SuccessResponseSchema = v.pipe(
  v.object({ message: v.pipe(v.string(), v.description('"OK" for a new submission; "Already registered" when the email already exists.')) }),
  v.title('SuccessResponse'),
)

const ErrorSchema = v.pipe(
  v.object({ error: v.pipe(v.string(), v.description('Human-readable message, e.g. "Invalid email" or "Missing required fields".')) }),
  v.title('Error'),
)

/**
 * JSON, or text/plain holding JSON (a browser posts that without a CORS preflight). A missing
 * required field wins over a bad email (docs/api.md), which wins over any other problem; null
 * counts as absent.
 */
const leadBody = <S extends v.GenericSchema>(schema: S) =>
  bodyDoc(schema, ['application/json', 'text/plain'], true, { precedence: [MISSING_FIELDS, INVALID_EMAIL], nullIsAbsent: true })

const demoBody = leadBody(DemoRequestSchema)
const newsletterBody = leadBody(NewsletterRequestSchema)

const OK = Object.freeze({ message: 'OK' })
const ALREADY = Object.freeze({ message: 'Already registered' })

function emptyToNull(value: string | undefined): string | null {
  return value === undefined || value === '' ? null : value
}

/** Services the forms hand a lead to; without them a lead is only stored. */
export interface LeadHooks {
  /** Stores the lead with the mail it causes (notification, confirmation): services/lead-mail.ts. */
  readonly mail?: LeadMail
  /** Screens a valid submission for spam before it is stored: services/lead-spam.ts. */
  readonly spam?: LeadSpam
}

/** The same checks with unknown fields kept: the spam screen reads a honeypot and a CAPTCHA token the published schema drops. */
function keepingUnknown<S extends v.GenericSchema>(doc: BodyDoc<S>): BodyDoc<S> {
  const object = (doc.schema as unknown as { pipe: [v.ObjectSchema<v.ObjectEntries, string>] }).pipe[0]
  return { ...doc, schema: v.looseObject(object.entries, object.message) as unknown as S }
}

export function createLeadSurface(config: Config, deps: Pick<Deps, 'rateLimits'> = {}, hooks: LeadHooks = {}): Surface {
  // Shared across processes when the deps carry a rate-limit store (several servers, one PostgreSQL).
  const limiter: RateLimiter = createRateLimiter(config.leadRateLimit, 'leads', deps.rateLimits ?? null)

  /** With LEADS_ORGANIZATION_ID set, a stored lead is a lead.created event of that organization. */
  function leadAudit(ctx: RequestContext): LeadAudit | null {
    const organizationId = ctx.config.leadsOrganizationId
    return organizationId ? { organizationId: organizationId.toLowerCase(), requestId: ctx.requestId } : null
  }

  // Per-client throttle (OWASP API6): refuses a flood before reading its body. A flood of
  // submissions (429) and of bad bodies (400, 413, 415) is the load these public routes expect:
  // their refusals are returned, not thrown (docs/architecture.md).
  // The RateLimit headers go on the 429 and on a stored submission's 200 or 409; a refused body
  // (400, 413, 415) carries none, so they are written only once the answer is one of those.
  function throttle(ctx: RequestContext): RateLimitDecision | HttpError {
    const decision = limiter.take(`lead:${ctx.clientKey}`, ctx.now)
    if (decision.allowed) return decision
    return new HttpError(429, 'Too many submissions from this client; retry later', { headers: rateLimitHeaders('leads', limiter.rule, decision) })
  }

  /**
   * A lead form: the per-client limit, the body as `doc` publishes it, then `store`, which says
   * whether the lead was new (200) or its email already registered (409). Not an async function:
   * a 429 needs no waiting and is answered at once (docs/architecture.md).
   */
  function leadForm<S extends v.GenericSchema>(doc: BodyDoc<S>, store: (lead: v.InferOutput<S>, ctx: RequestContext) => Promise<boolean>, form: { list: SpamListName; via: string }) {
    const spam = hooks.spam
    const reader = spam ? keepingUnknown(doc) : doc
    return (request: IRequest, ctx: RequestContext): HttpError | Promise<Reply | HttpError> => {
      const decision = throttle(ctx)
      if (decision instanceof HttpError) return decision
      return readInputOrRefusal(request, ctx, reader).then((lead) => {
        if (lead instanceof HttpError) return lead
        const answer = (stored: boolean) => json(stored ? 200 : 409, stored ? OK : ALREADY, rateLimitHeaders('leads', limiter.rule, decision))
        // A duplicate refused is counted for the leads report; the counter never costs the answer.
        const saved = () =>
          store(lead, ctx).then((stored) => (stored ? answer(true) : countDuplicateLead(ctx.deps.db, form.list, new Date(ctx.now)).catch(() => undefined).then(() => answer(false))))
        if (!spam) return saved()
        // Spam answers exactly as a stored lead would: 200, or 409 when the email is registered.
        return spam.screen(ctx.deps.db, form.list, form.via, lead as Record<string, unknown>, new Date(ctx.now), ctx.clientAddress).then((screened) =>
          screened instanceof HttpError ? screened : screened.kind === 'spam' ? answer(!screened.registered) : saved(),
        )
      })
    }
  }

  const createDemoRequest = leadForm(demoBody, (lead, ctx) => {
    const request = {
      email: lead.email,
      first_name: lead.first_name,
      last_name: lead.last_name,
      company: lead.company,
      linkedin: lead.linkedin,
      phone: emptyToNull(lead.phone),
      source: emptyToNull(lead.source),
      analytics_distinct_id: emptyToNull(lead.analytics_distinct_id),
    }
    return hooks.mail
      ? hooks.mail.storeDemoRequest(request, new Date(ctx.now), leadAudit(ctx))
      : insertDemoRequestUnlessRegistered(ctx.deps.db, request, new Date(ctx.now), leadAudit(ctx))
  }, { list: 'demo-requests', via: '/demo-request' })

  const subscribe = (via: string) =>
    leadForm(newsletterBody, (lead, ctx) => {
      const subscription = { email: lead.email, source: emptyToNull(lead.source), analytics_distinct_id: emptyToNull(lead.analytics_distinct_id), via }
      return hooks.mail
        ? hooks.mail.storeSubscription(subscription, new Date(ctx.now), leadAudit(ctx), ctx.clientAddress)
        : insertSubscriptionUnlessRegistered(ctx.deps.db, subscription, new Date(ctx.now), leadAudit(ctx))
    }, { list: 'newsletter', via })

  const routes: Route[] = [
    { method: 'POST', path: '/demo-request', handler: createDemoRequest, doc: leadDoc('createDemoRequest', 'Request a product demo', demoBody) },
    { method: 'POST', path: '/newsletter', handler: subscribe('/newsletter'), doc: leadDoc('subscribeNewsletter', 'Subscribe an email address to the newsletter', newsletterBody) },
    {
      method: 'POST',
      path: '/waitlist',
      handler: subscribe('/waitlist'),
      doc: {
        ...leadDoc('joinWaitlist', 'Join the waitlist (deprecated alias of POST /newsletter; same list)', newsletterBody),
        deprecated: true,
      },
    },
  ]

  return {
    name: 'leads',
    routes,
    errorBody: (_status, error) => ({ error: error.message }),
  }
}

const LEAD_ERRORS = {
  413: { description: 'Body larger than the limit (16 KiB by default).', schema: ErrorSchema },
  415: { description: 'Content-Type other than application/json or text/plain.', schema: ErrorSchema },
  429: { description: 'Too many submissions from this client.', schema: ErrorSchema, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
  503: { description: 'Database unavailable; retry later.', schema: ErrorSchema, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
} as const

function leadDoc(operationId: string, summary: string, body: BodyDoc): OperationDoc {
  return {
    operationId,
    summary,
    tags: ['Lead capture'],
    scopes: null,
    headers: { 'Service-Api-Version': 'Optional API version (semantic version such as 1.0.0 or alias such as v1; default v1). Informational.' },
    body,
    responses: {
      200: { description: 'Stored: a new submission.', schema: SuccessResponseSchema },
      400: { description: 'Missing or malformed fields: "Missing required fields" or "Invalid email".', schema: ErrorSchema },
      409: { description: 'The email is already registered on this list; treated as success ("Already registered").', schema: SuccessResponseSchema },
      ...LEAD_ERRORS,
    },
  }
}
