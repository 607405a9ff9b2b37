// Authorization for the product API: the docs/api.md role table as scopes, the guard every
// protected route runs through, and the error shapes and body helpers the resources share.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { AuditBy } from '../storage/audit.ts'
import { CapReachedError } from '../storage/caps.ts'
import { HashingBusyError } from '../auth/passwords.ts'
import { ROLES } from '../domain/roles.ts'
import { ROLE_SCOPES, type Scope } from '../domain/scopes.ts'
import { SECRET_PATTERN } from '../auth/secrets.ts'
import type { Credentials, Principal } from '../services/credentials.ts'
import { auditOf } from '../services/decision-answers.ts'
import { HttpError } from '../http/errors.ts'
import { setHeaders, type Reply } from '../http/reply.ts'
import type { RequestContext } from './deps.ts'
import { rateLimitHeaders, type RateLimiter } from '../services/ratelimit.ts'
import type { ResponseDoc } from '../http/pipeline.ts'

export const RoleSchema = v.pipe(v.picklist(ROLES, 'Field role must be one of owner, admin, manager, member, viewer'), v.description('Role within the organization.'))

/** The product error body: {status: reason phrase, error: message}. */
export const ProductErrorSchema = v.pipe(
  v.object({
    status: v.pipe(v.string(), v.description('HTTP reason phrase, such as "Unauthorized" or "Bad Request".')),
    error: v.pipe(v.string(), v.description('Human-readable message, such as "Authentication required".')),
  }),
  v.title('ProductError'),
)

/**
 * Who the audit log records as making a change through this request: the agent of an agent key,
 * the signed-in user of a session, else the API key (a key's token included).
 */
export function auditBy(ctx: Pick<RequestContext, 'requestId'>, principal: Principal): AuditBy {
  return auditOf(principal, ctx.requestId)
}

export type ProtectedHandler = (request: IRequest, ctx: RequestContext, principal: Principal) => Promise<Reply>

/**
 * docs/api.md: credentials travel only in the Authorization header. One found in the URL is
 * refused (it is already in proxy and browser logs; the client must learn) and never logged.
 */
export function refuseCredentialsInUrl(request: Request): void {
  const query = request.url.indexOf('?')
  if (query < 0) return
  const search = request.url.slice(query + 1)
  let decoded = search
  let readable = true
  // Only an escaped query can hide a secret from the pattern below.
  if (search.includes('%') || search.includes('+')) {
    try {
      decoded = decodeURIComponent(search.replaceAll('+', ' '))
    } catch {
      readable = false
    }
  }
  // Every secret and every credential parameter name holds one of these texts: a query without
  // any has nothing to refuse (one scan of the query instead of one per text, on every protected request).
  if (readable && !CREDENTIAL_HINT.test(decoded)) return
  // The query is parsed only when a credential parameter could be in it: a name decodes to a part
  // of the decoded query, so a query holding none of the names has none of the parameters.
  const named = !readable || CREDENTIAL_PARAMETERS.some((name) => decoded.includes(name))
  if (SECRET_PATTERN.test(decoded) || (named && hasCredentialParameter(new URLSearchParams(search)))) {
    throw new HttpError(400, 'Credentials must be sent in the Authorization header, never in the URL')
  }
}

function hasCredentialParameter(parameters: URLSearchParams): boolean {
  return CREDENTIAL_PARAMETERS.some((name) => parameters.has(name))
}

const CREDENTIAL_PARAMETERS = ['access_token', 'refresh_token', 'api_key', 'client_secret']
/** The parameter names above, and the `stw_` that starts every secret (SECRET_PATTERN), in any case. */
const CREDENTIAL_HINT = new RegExp([...CREDENTIAL_PARAMETERS, 'stw_'].join('|'), 'i')

/** docs/api.md: plain HTTP from a non-loopback peer is refused unless TLS ends at a trusted proxy. */
export function requireSecureTransport(ctx: RequestContext): void {
  if (!ctx.secure && !ctx.config.allowInsecureHttp) {
    throw new HttpError(403, 'HTTPS is required: plain HTTP is accepted only from loopback, or through a trusted proxy (TRUST_PROXY) that received HTTPS')
  }
}

export interface Guard {
  /**
   * `agentKeys`: whether a key bound to an agent may use the route at all (only decisions, its
   * own decisions and its own capabilities); every other route answers 403 for such a key.
   */
  protect(scope: Scope, handler: ProtectedHandler, options?: { agentKeys?: boolean }): (request: IRequest, ctx: RequestContext) => Reply | HttpError | Promise<Reply | HttpError>
}

export const AGENT_KEY_REFUSED = 'This key is bound to an agent: it may only ask decisions for its agent and read its own decisions and capabilities'

type NamedLimiter = RateLimiter & { readonly name: string }

/**
 * Every protected route: credentials from the header only, secure transport, a valid credential,
 * the per-credential rate limit and then the per-organization one (so a flood of keys shares one
 * budget), and the scope of the credential's role.
 */
export function createGuard(credentials: Credentials, limiter: NamedLimiter, orgLimiter: NamedLimiter | null = null): Guard {
  return {
    protect(scope, handler, options = {}) {
      /** The checks that need the principal, then the handler. */
      const admit = (principal: Principal | HttpError, request: IRequest, ctx: RequestContext): HttpError | Promise<Reply> => {
        // Refusals are returned, not thrown (docs/architecture.md): the pipeline answers them.
        if (principal instanceof HttpError) return principal
        const decision = limiter.take(principal.subject, ctx.now)
        const headers = rateLimitHeaders(limiter.name, limiter.rule, decision)
        if (!decision.allowed) return new HttpError(429, 'Too many requests for this credential; retry later', { headers })
        if (orgLimiter) {
          const shared = orgLimiter.take(principal.organizationId, ctx.now)
          if (!shared.allowed) {
            return new HttpError(429, "Too many requests for this organization's credentials together; retry later", {
              headers: rateLimitHeaders(orgLimiter.name, orgLimiter.rule, shared),
            })
          }
        }
        if (principal.agentId !== null && !options.agentKeys) return new HttpError(403, AGENT_KEY_REFUSED, { headers })
        if (!ROLE_SCOPES[principal.role].includes(scope)) {
          return new HttpError(403, `This credential's role (${principal.role}) lacks the ${scope} permission`, { headers })
        }
        return handler(request, ctx, principal).then((answer) => {
          setHeaders(answer, headers)
          return answer
        })
      }
      // Not an async function: a refusal made before any I/O (no credential, a malformed one, a
      // rate limit on a cached principal) is answered without a promise (docs/architecture.md).
      // What it throws, the route wrapper (http/pipeline.ts) answers as it answers a rejection.
      return (request, ctx) => {
        refuseCredentialsInUrl(request)
        requireSecureTransport(ctx)
        const principal = credentials.authenticate(request.headers.get('authorization'), ctx.now)
        return principal instanceof Promise ? principal.then<Reply | HttpError>((found) => admit(found, request, ctx)) : admit(principal, request, ctx)
      }
    },
  }
}

const RETRY = { 'Retry-After': 'Seconds to wait before retrying.' }
const RATE = { RateLimit: 'Remaining requests and seconds to reset (draft-ietf-httpapi-ratelimit-headers).', 'RateLimit-Policy': 'Quota and window.' }

/** The error responses every protected product route can give. */
export function protectedErrors(extra: Record<number, string> = {}): Record<number, ResponseDoc> {
  const docs: Record<number, ResponseDoc> = {
    400: { description: 'Malformed request, a missing or invalid parameter, or a credential sent in the URL.', schema: ProductErrorSchema },
    401: { description: 'Missing, malformed, unknown, expired or revoked bearer token. No WWW-Authenticate header is sent; clients read the protected-resource metadata instead.', schema: ProductErrorSchema },
    403: { description: "The credential's role lacks the permission, or plain HTTP from a non-loopback client.", schema: ProductErrorSchema },
    429: { description: 'Too many requests for this credential, or for all credentials of its organization together (API_ORG_RATE_LIMIT).', schema: ProductErrorSchema, headers: { ...RETRY, ...RATE } },
    503: { description: 'Database unavailable; retry later.', schema: ProductErrorSchema, headers: RETRY },
  }
  for (const [status, description] of Object.entries(extra)) docs[Number(status)] = { description, schema: ProductErrorSchema }
  return docs
}

/** Runs a capped creation; a reached cap (storage/caps.ts) becomes 409 with the cap's message. */
export async function withinCap<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof CapReachedError) throw new HttpError(409, error.message)
    throw error
  }
}

/**
 * The answer to a password hash the hasher refused (auth/passwords.ts): `share` when this client
 * or account already has its share running or waiting (a 429), `overload` when every share is in
 * use (a 503). Any other error is returned as it is, to be thrown again.
 */
export function hashingBusyError(error: unknown, answers: { readonly share: HttpError; readonly overload: HttpError }): unknown {
  if (!(error instanceof HashingBusyError)) return error
  return error.reason === 'share' ? answers.share : answers.overload
}
