// The token endpoint (docs/api.md; RFC 6749 §3.2, §4.4, §5, §6): POST /auth/login and
// POST /auth/refresh. JSON for the console and scripts; the OAuth form for standard clients.
// Never the password grant in a form (RFC 9700 §2.4). Errors carry RFC 6749 §5.2 codes.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { ROLE_SCOPES } from '../domain/scopes.ts'
import { bodyDoc, readBody } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { BodyMediaType, OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { PasswordHasher } from '../auth/passwords.ts'
import { refuseCredentialsInUrl, requireSecureTransport, RoleSchema } from './access.ts'
import type { Credentials } from '../services/credentials.ts'
import type { RequestContext, Route } from './deps.ts'
import { clientSecret, createGrants, PasswordLoginSchema, TOKEN_HEADERS, tokenError, type Grant, type Grants } from './grants.ts'

const TOKEN_MEDIA_TYPES: readonly BodyMediaType[] = ['application/json', 'application/x-www-form-urlencoded']

const TokenResponseSchema = v.pipe(
  v.object({
    access_token: v.pipe(v.string(), v.description('Opaque bearer token (stw_at_…).')),
    token_type: v.pipe(v.literal('Bearer'), v.description('Always "Bearer" (RFC 6750).')),
    expires_in: v.pipe(v.number(), v.integer(), v.description('Seconds until the access token expires (900 by default).')),
    refresh_token: v.optional(v.pipe(v.string(), v.description('Rotating refresh token (stw_rt_…); user sessions only. Spent on use.'))),
    organization_id: v.pipe(v.string(), v.uuid()),
    role: RoleSchema,
    scope: v.pipe(v.string(), v.description('Space-separated scopes the role grants.')),
    organizations: v.optional(
      v.pipe(
        v.array(v.object({ organization_id: v.pipe(v.string(), v.uuid()), name: v.pipe(v.string(), v.description("The organization's name (two may share one: tell them apart by id).")), role: RoleSchema })),
        v.description('A password sign-in without organization_id: every organization the user belongs to, the one signed in to first. Sign in again with one of these organization_id values to use another.'),
      ),
    ),
  }),
  v.title('TokenResponse'),
)

const TokenErrorSchema = v.pipe(
  v.object({
    status: v.pipe(v.string(), v.description('HTTP reason phrase.')),
    error: v.pipe(v.string(), v.description('RFC 6749 §5.2 code: invalid_request, invalid_client, invalid_grant, unsupported_grant_type; or too_many_requests, temporarily_unavailable.')),
    error_description: v.pipe(v.string(), v.description('Human-readable message.')),
  }),
  v.title('TokenError'),
)

/** What the login handler accepts: it picks the member by the fields sent and validates with it. */
export const LoginRequestSchema = v.pipe(
  v.union([
    PasswordLoginSchema,
    v.object({ api_key: v.pipe(v.string(), v.description('An organization API key (stw_key_…).')) }),
    v.object({
      grant_type: v.pipe(v.picklist(['client_credentials', 'refresh_token']), v.description('OAuth grant (RFC 6749 §4.4, §6).')),
      client_id: v.optional(v.pipe(v.string(), v.description('Ignored: the key identifies itself.'))),
      client_secret: v.optional(v.pipe(v.string(), v.description('The API key, for client_credentials (or send it as HTTP Basic password).'))),
      refresh_token: v.optional(v.pipe(v.string(), v.description('For grant_type=refresh_token.'))),
      scope: v.optional(v.pipe(v.string(), v.description('Ignored: the key role decides the scopes.'))),
    }),
  ]),
  v.title('LoginRequest'),
)

const RefreshRequestSchema = v.pipe(
  v.object({
    refresh_token: v.pipe(v.string(), v.description('The current refresh token (stw_rt_…).')),
    grant_type: v.optional(v.pipe(v.literal('refresh_token'), v.description('Required in the form encoding.'))),
  }),
  v.title('RefreshRequest'),
)

function respond(ctx: RequestContext, grant: Grant): Reply {
  const body: Record<string, unknown> = {
    access_token: grant.accessToken,
    token_type: 'Bearer',
    expires_in: ctx.config.accessTokenTtlSeconds,
  }
  if (grant.refreshToken) body.refresh_token = grant.refreshToken
  body.organization_id = grant.organizationId
  body.role = grant.role
  body.scope = ROLE_SCOPES[grant.role].join(' ')
  if (grant.organizations) body.organizations = grant.organizations.map((m) => ({ organization_id: m.organization_id, name: m.name, role: m.role }))
  return json(200, body, TOKEN_HEADERS)
}

function readTokenBody(request: Request, ctx: RequestContext) {
  return readBody(request, ctx, { accept: ['json', 'form'] })
}

/** An OAuth form (or JSON with grant_type) at /auth/login: client credentials or a refresh token. */
function byGrantType(grants: Grants, request: Request, ctx: RequestContext, params: Record<string, unknown>): Promise<Grant> {
  const grantType = params.grant_type
  if (grantType === undefined || grantType === '') throw tokenError(400, 'invalid_request', 'grant_type is required')
  if (grantType === 'client_credentials') return grants.withKey(ctx, clientSecret(request, params), `client:${ctx.clientKey}`)
  if (grantType === 'refresh_token') return grants.withRefreshToken(ctx, params.refresh_token)
  if (grantType === 'password') throw tokenError(400, 'unsupported_grant_type', 'The password grant is not supported (RFC 9700); post JSON {"email","password"} instead')
  throw tokenError(400, 'unsupported_grant_type', 'grant_type must be client_credentials or refresh_token')
}

export function authRoutes(loginRateLimit: RequestContext['config']['loginRateLimit'], credentials: Credentials, hasher: PasswordHasher): Route[] {
  const grants = createGrants(credentials, hasher, loginRateLimit)

  async function login(request: IRequest, ctx: RequestContext): Promise<Reply> {
    return tokenEndpoint(request, ctx, async () => {
      const { form, params } = await readTokenBody(request, ctx)
      if (form || params.grant_type !== undefined) return respond(ctx, await byGrantType(grants, request, ctx, params))
      if (params.api_key !== undefined) return respond(ctx, await grants.withKey(ctx, params.api_key, `key:${ctx.clientKey}`))
      if (params.email !== undefined || params.password !== undefined) return respond(ctx, await grants.withPassword(ctx, params))
      throw tokenError(400, 'invalid_request', 'Send {"email","password"}, {"api_key"} or an OAuth grant_type')
    })
  }

  async function refresh(request: IRequest, ctx: RequestContext): Promise<Reply> {
    return tokenEndpoint(request, ctx, async () => {
      const { form, params } = await readTokenBody(request, ctx)
      if (form || params.grant_type !== undefined) {
        if (params.grant_type === undefined || params.grant_type === '') throw tokenError(400, 'invalid_request', 'grant_type is required')
        if (params.grant_type !== 'refresh_token') throw tokenError(400, 'unsupported_grant_type', 'This endpoint takes grant_type=refresh_token only')
      }
      return respond(ctx, await grants.withRefreshToken(ctx, params.refresh_token))
    })
  }

  return [
    { method: 'POST', path: '/auth/login', handler: login, doc: loginDoc },
    { method: 'POST', path: '/auth/refresh', handler: refresh, doc: refreshDoc },
  ]
}

/**
 * Every error of the token endpoint carries an RFC 6749 §5.2-style code and no-store headers.
 * Grant errors have both already (grants.ts tokenError); the others (transport, body reading,
 * validation) become invalid_request here, once.
 */
async function tokenEndpoint(request: Request, ctx: RequestContext, grant: () => Promise<Reply>): Promise<Reply> {
  try {
    refuseCredentialsInUrl(request)
    requireSecureTransport(ctx)
    return await grant()
  } catch (error) {
    if (error instanceof HttpError && error.code === null) throw tokenError(error.status, 'invalid_request', error.message, error.headers)
    throw error
  }
}

const TAGS = ['Authentication']
const NO_STORE = { 'Cache-Control': 'no-store (RFC 6749 §5.1).', Pragma: 'no-cache.' }

function tokenErrors(extra: Record<number, string>): OperationDoc['responses'] {
  const docs: Record<number, { description: string; schema: typeof TokenErrorSchema; headers?: Record<string, string> }> = {
    400: { description: 'invalid_request, invalid_grant or unsupported_grant_type; also a credential sent in the URL.', schema: TokenErrorSchema },
    403: { description: 'Plain HTTP from a non-loopback client (invalid_request).', schema: TokenErrorSchema },
    413: { description: 'Body larger than the limit.', schema: TokenErrorSchema },
    415: { description: 'Content-Type other than JSON or application/x-www-form-urlencoded.', schema: TokenErrorSchema },
    503: { description: 'Database or password hashing unavailable; retry later.', schema: TokenErrorSchema, headers: { 'Retry-After': 'Seconds to wait.' } },
  }
  for (const [status, description] of Object.entries(extra)) docs[Number(status)] = { description, schema: TokenErrorSchema }
  return docs
}

const loginDoc: OperationDoc = {
  operationId: 'login',
  summary: 'Exchange credentials for a bearer token (the token endpoint)',
  description:
    'JSON {"email","password","organization_id"?} starts a user session (access and refresh token) in the organization named, or else in the one the user joined first, and then also lists the user\'s organizations. Naming an organization the user is not a member of fails like a wrong password. JSON {"api_key"}, or the form grant_type=client_credentials with the key as client_secret (body or HTTP Basic), returns a short-lived token acting as the key. The form grant_type=refresh_token is also accepted here. The password grant is not offered.',
  tags: TAGS,
  scopes: null,
  body: bodyDoc(LoginRequestSchema, TOKEN_MEDIA_TYPES, true),
  responses: {
    200: { description: 'A bearer token.', schema: TokenResponseSchema, headers: NO_STORE },
    ...tokenErrors({
      401: 'invalid_client: unknown, revoked or expired API key.',
    }),
    429: {
      description: 'too_many_requests: too many failed attempts from this client or for this account, or too many sign-ins of theirs already being checked.',
      schema: TokenErrorSchema,
      headers: { 'Retry-After': 'Seconds to wait.' },
    },
  },
}

const refreshDoc: OperationDoc = {
  operationId: 'refreshToken',
  summary: 'Exchange a refresh token for a new token pair',
  description:
    'The refresh token is spent. Presented again within 10 seconds (a client retry) it yields a fresh pair in the same session; later, it revokes the whole session (RFC 9700 §4.14.2). Repeated failures from one client → 429.',
  tags: TAGS,
  scopes: null,
  body: bodyDoc(RefreshRequestSchema, TOKEN_MEDIA_TYPES, true),
  responses: {
    200: { description: 'A new access and refresh token.', schema: TokenResponseSchema, headers: NO_STORE },
    ...tokenErrors({}),
    429: { description: 'too_many_requests: too many failed refreshes from this client.', schema: TokenErrorSchema, headers: { 'Retry-After': 'Seconds to wait.' } },
  },
}
