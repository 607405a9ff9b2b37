// The token endpoint (docs/api.md; RFC 6749 §3.2, §4.4, §5, §6): POST /auth/login and
// POST /auth/refresh. JSON for the console and scripts; the OAuth form for standard clients.
// Never the password grant in a form (RFC 9700 §2.4). Errors carry RFC 6749 §5.2 codes.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Config } from '../config.ts'
import { findActiveKeyByHash } from '../storage/keys.ts'
import { HashingBusyError, type HashOwner, type PasswordHasher } from '../storage/passwords.ts'
import type { Role } from '../storage/schema.ts'
import { hashSecret, sameHash, secretKind } from '../storage/secrets.ts'
import { rotateRefreshToken, startSession } from '../storage/tokens.ts'
import { findUserByEmail, listMembershipsOfUser, normalizeUserEmail, type Membership } from '../storage/users.ts'
import { refuseCredentialsInUrl, requireSecureTransport, RoleSchema } from './access.ts'
import { ROLE_SCOPES } from '../domain/scopes.ts'
import { UUID } from '../domain/uuid.ts'
import type { Credentials } from './credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import { mediaType, parseForm, parseJsonObject, readText } from '../http/body.ts'
import type { RequestContext } from './deps.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import type { Route } from './deps.ts'

/** RFC 6749 §5.1: token responses are never cached. */
const TOKEN_HEADERS = { 'Cache-Control': 'no-store', Pragma: 'no-cache' }
const BAD_LOGIN = 'Invalid email or password'
const BAD_KEY = 'Invalid API key'
const BAD_REFRESH = 'Refresh token is invalid, expired or already used'
/** docs/security.md: a spent refresh token presented again this soon is a client retry, not a theft. */
const REFRESH_RETRY_GRACE_SECONDS = 10

function tokenError(status: number, code: string, message: string, headers?: Record<string, string>): HttpError {
  return new HttpError(status, message, { code, headers })
}

export const TokenResponseSchema = v.pipe(
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
        v.array(v.object({ organization_id: v.pipe(v.string(), v.uuid()), role: RoleSchema })),
        v.description('A password sign-in without organization_id: every organization the user belongs to, the one signed in to first. Sign in again with one of these organization_id values to use another.'),
      ),
    ),
  }),
  v.title('TokenResponse'),
)

export const TokenErrorSchema = v.pipe(
  v.object({
    status: v.pipe(v.string(), v.description('HTTP reason phrase.')),
    error: v.pipe(v.string(), v.description('RFC 6749 §5.2 code: invalid_request, invalid_client, invalid_grant, unsupported_grant_type; or too_many_requests, temporarily_unavailable.')),
    error_description: v.pipe(v.string(), v.description('Human-readable message.')),
  }),
  v.title('TokenError'),
)

export const LoginRequestSchema = v.pipe(
  v.union([
    v.object({
      email: v.pipe(v.string(), v.maxLength(254), v.description('User email.')),
      password: v.pipe(v.string(), v.maxLength(1024)),
      organization_id: v.optional(v.pipe(v.string(), v.uuid(), v.description('The organization to sign in to; by default the one the user joined first.'))),
    }),
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

export const RefreshRequestSchema = v.pipe(
  v.object({
    refresh_token: v.pipe(v.string(), v.description('The current refresh token (stw_rt_…).')),
    grant_type: v.optional(v.pipe(v.literal('refresh_token'), v.description('Required in the form encoding.'))),
  }),
  v.title('RefreshRequest'),
)

/**
 * Failed attempts per key in fixed windows. An attempt takes its place before the credential is
 * checked and gives it back only if it did not fail: parallel guesses cannot all be evaluated
 * before the first failure is counted. Only failures stay counted, so busy clients are not throttled.
 */
class AttemptCounter {
  readonly #windows = new Map<string, { start: number; count: number }>()
  readonly #limit: number
  readonly #windowMs: number
  constructor(limit: number, windowSeconds: number) {
    this.#limit = limit
    this.#windowMs = windowSeconds * 1000
  }
  /** Takes a place for `key` in its current window, unless every place is taken. */
  reserve(key: string, now: number): Reservation {
    let window = this.#windows.get(key)
    if (!window || now - window.start >= this.#windowMs) {
      if (this.#windows.size >= 100_000) this.#windows.delete(this.#windows.keys().next().value!)
      window = { start: now, count: 0 }
      this.#windows.delete(key)
      this.#windows.set(key, window)
    }
    if (window.count >= this.#limit) return { taken: false, retryAfter: Math.max(1, Math.ceil((window.start + this.#windowMs - now) / 1000)) }
    window.count++
    const taken = window
    // A window that has ended since is forgotten anyway: giving back its place changes nothing.
    return { taken: true, release: () => void taken.count-- }
  }
}

type Reservation = { readonly taken: true; release(): void } | { readonly taken: false; readonly retryAfter: number }

/** Marks an attempt failed (its place stays taken) and returns the error to throw. */
type Fail = (error: HttpError) => HttpError

function throttled(retryAfter: number): HttpError {
  return tokenError(429, 'too_many_requests', 'Too many failed attempts; retry later', { 'Retry-After': String(retryAfter) })
}

interface Grant {
  accessToken: string
  refreshToken: string | null
  organizationId: string
  role: Role
  /** A password sign-in without a chosen organization: all of the user's memberships. */
  organizations?: readonly Membership[]
}

export function authRoutes(config: Config, credentials: Credentials, hasher: PasswordHasher): Route[] {
  const rule = config.loginRateLimit
  // Per (account, client) the configured rule; per client, room for a few mistyped accounts.
  const perAccount = new AttemptCounter(rule.limit, rule.windowSeconds)
  const perClient = new AttemptCounter(rule.limit * 5, rule.windowSeconds)

  /**
   * Runs one attempt at a credential for `account` from this client. Its places in both windows
   * are taken before `check` runs (429 when either is full) and given back unless `check` marks
   * the attempt failed: a success, or an error that evaluated nothing (database down, hashing busy).
   */
  async function attempt<T>(ctx: RequestContext, account: string, check: (fail: Fail) => Promise<T>): Promise<T> {
    const mine = perAccount.reserve(`${account}|${ctx.clientKey}`, ctx.now)
    if (!mine.taken) throw throttled(mine.retryAfter)
    const client = perClient.reserve(ctx.clientKey, ctx.now)
    if (!client.taken) {
      mine.release()
      throw throttled(client.retryAfter)
    }
    let failed = false
    try {
      return await check((error) => {
        failed = true
        return error
      })
    } finally {
      if (!failed) {
        mine.release()
        client.release()
      }
    }
  }

  function respond(grant: Grant): Reply {
    const body: Record<string, unknown> = {
      access_token: grant.accessToken,
      token_type: 'Bearer',
      expires_in: config.accessTokenTtlSeconds,
    }
    if (grant.refreshToken) body.refresh_token = grant.refreshToken
    body.organization_id = grant.organizationId
    body.role = grant.role
    body.scope = ROLE_SCOPES[grant.role].join(' ')
    if (grant.organizations) body.organizations = grant.organizations.map((m) => ({ organization_id: m.organization_id, role: m.role }))
    return json(200, body, TOKEN_HEADERS)
  }

  async function readBody(request: Request, ctx: RequestContext): Promise<{ form: boolean; params: Record<string, unknown> }> {
    const type = mediaType(request)
    const text = await readText(request, ctx.config.bodyLimitBytes, ctx.config.bodyTimeoutMs)
    if (type === 'application/x-www-form-urlencoded') return { form: true, params: parseForm(text) }
    if (type === 'application/json' || type.endsWith('+json')) return { form: false, params: parseJsonObject(text) }
    throw new HttpError(415, `Content-Type ${type || '(none)'} is not supported; send application/json or application/x-www-form-urlencoded`)
  }

  async function loginWithKey(ctx: RequestContext, secret: unknown, account: string): Promise<Grant> {
    return attempt(ctx, account, async (fail) => {
      if (typeof secret !== 'string' || secretKind(secret) !== 'key') throw fail(tokenError(401, 'invalid_client', BAD_KEY))
      const hash = hashSecret(secret)
      const key = await findActiveKeyByHash(ctx.deps.db, hash, new Date(ctx.now))
      if (!key || !sameHash(key.secret_hash, hash)) throw fail(tokenError(401, 'invalid_client', BAD_KEY))
      return keySession(ctx, key.id, key.organization_id, key.role)
    })
  }

  async function keySession(ctx: RequestContext, keyId: string, organizationId: string, role: Role): Promise<Grant> {
    const issued = await startSession(
      ctx.deps.db,
      { organizationId, userId: null, apiKeyId: keyId, role },
      // RFC 6749 §4.4.3: no refresh token for client credentials; the key can log in again.
      { accessSeconds: config.accessTokenTtlSeconds, refreshSeconds: null },
      new Date(ctx.now),
    )
    return { accessToken: issued.accessToken, refreshToken: null, organizationId, role }
  }

  async function loginWithPassword(ctx: RequestContext, params: Record<string, unknown>): Promise<Grant> {
    const { email, password, organization_id: organizationId } = params
    if (typeof email !== 'string' || typeof password !== 'string' || email.trim() === '' || password === '') {
      throw tokenError(400, 'invalid_request', 'email and password are required strings')
    }
    if (email.length > 254 || password.length > 1024) throw tokenError(400, 'invalid_request', 'email or password is too long')
    if (organizationId !== undefined && (typeof organizationId !== 'string' || !UUID.test(organizationId))) {
      throw tokenError(400, 'invalid_request', 'organization_id must be a UUID')
    }
    const normalized = normalizeUserEmail(email)
    return attempt(ctx, `user:${normalized}`, async (fail) => {
      const user = await findUserByEmail(ctx.deps.db, email)
      // The password is checked before anything about the account's organizations is looked at,
      // and every failure after it gets the answer a wrong password gets: before signing in,
      // nothing tells whether the email has an account or where it is a member.
      const valid = await verify(password, user?.password_hash ?? null, { client: ctx.clientKey, account: normalized })
      if (!user || !valid) throw fail(tokenError(400, 'invalid_grant', BAD_LOGIN))
      const memberships = await listMembershipsOfUser(ctx.deps.db, user.id)
      const chosen = organizationId === undefined ? memberships[0] : memberships.find((m) => m.organization_id === organizationId.toLowerCase())
      if (!chosen) throw fail(tokenError(400, 'invalid_grant', BAD_LOGIN))
      const issued = await startSession(
        ctx.deps.db,
        { organizationId: chosen.organization_id, userId: user.id, apiKeyId: null, role: chosen.role },
        { accessSeconds: config.accessTokenTtlSeconds, refreshSeconds: config.refreshTokenTtlSeconds },
        new Date(ctx.now),
        { maxPerUser: config.maxSessionsPerUser, refreshSeconds: config.refreshTokenTtlSeconds, accessSeconds: config.accessTokenTtlSeconds },
      )
      // Sessions ended to keep within MAX_SESSIONS_PER_USER stop on their next request.
      for (const familyId of issued.endedFamilies ?? []) await credentials.familyRevoked(familyId)
      const grant: Grant = { accessToken: issued.accessToken, refreshToken: issued.refreshToken, organizationId: chosen.organization_id, role: chosen.role }
      // Without a choice the user lands in the organization joined first and learns the others.
      if (organizationId === undefined) grant.organizations = memberships
      return grant
    })
  }

  /** A password check through the shared hasher; a client or account over its share is told to wait. */
  async function verify(password: string, stored: string | null, owner: HashOwner): Promise<boolean> {
    try {
      return await hasher.verify(password, stored, owner)
    } catch (error) {
      if (!(error instanceof HashingBusyError)) throw error
      if (error.reason === 'share') throw tokenError(429, 'too_many_requests', 'Too many sign-ins in progress from this client or for this account; retry shortly', { 'Retry-After': '1' })
      throw tokenError(503, 'temporarily_unavailable', 'Too many sign-ins in progress; retry shortly', { 'Retry-After': '1' })
    }
  }

  async function refreshGrant(ctx: RequestContext, token: unknown): Promise<Grant> {
    if (token === undefined) throw tokenError(400, 'invalid_request', 'refresh_token is required')
    // Refresh tokens are guessed per client, not per account: count failures against the client.
    return attempt(ctx, 'refresh', async (fail) => {
      if (typeof token !== 'string' || secretKind(token) !== 'rt') throw fail(tokenError(400, 'invalid_grant', BAD_REFRESH))
      const result = await rotateRefreshToken(
        ctx.deps.db,
        hashSecret(token),
        { accessSeconds: config.accessTokenTtlSeconds, refreshSeconds: config.refreshTokenTtlSeconds, retryGraceSeconds: REFRESH_RETRY_GRACE_SECONDS },
        new Date(ctx.now),
      )
      if (result.outcome === 'reused') {
        // RFC 9700 §4.14.2: a replayed refresh token means it leaked; end the whole session.
        await credentials.familyRevoked(result.familyId)
        ctx.deps.logger.log('warn', 'refresh token reused; session revoked', { requestId: ctx.requestId })
      }
      if (result.outcome !== 'rotated') throw fail(tokenError(400, 'invalid_grant', BAD_REFRESH))
      return { accessToken: result.tokens.accessToken, refreshToken: result.tokens.refreshToken, organizationId: result.organizationId, role: result.role }
    })
  }

  /** RFC 6749 §2.3.1: client_secret in the body or HTTP Basic, not both. */
  function clientSecret(request: Request, params: Record<string, unknown>): unknown {
    const header = request.headers.get('authorization')
    const basic = header ? /^basic +([A-Za-z0-9+/=]+) *$/i.exec(header) : null
    if (basic) {
      if (params.client_secret !== undefined) throw tokenError(400, 'invalid_request', 'Send the client secret in the body or in HTTP Basic, not both')
      let decoded: string
      try {
        decoded = atob(basic[1]!)
      } catch {
        throw tokenError(401, 'invalid_client', BAD_KEY)
      }
      const colon = decoded.indexOf(':')
      // RFC 6749 §2.3.1: both parts are form-urlencoded inside Basic.
      try {
        return decodeURIComponent((colon >= 0 ? decoded.slice(colon + 1) : decoded).replace(/\+/g, ' '))
      } catch {
        throw tokenError(401, 'invalid_client', BAD_KEY)
      }
    }
    if (header) throw tokenError(400, 'invalid_request', 'The token endpoint takes client credentials in the body or HTTP Basic only')
    return params.client_secret
  }

  async function byGrantType(request: Request, ctx: RequestContext, params: Record<string, unknown>): Promise<Grant> {
    const grantType = params.grant_type
    if (grantType === undefined || grantType === '') throw tokenError(400, 'invalid_request', 'grant_type is required')
    if (grantType === 'client_credentials') return loginWithKey(ctx, clientSecret(request, params), `client:${ctx.clientKey}`)
    if (grantType === 'refresh_token') return refreshGrant(ctx, params.refresh_token)
    if (grantType === 'password') throw tokenError(400, 'unsupported_grant_type', 'The password grant is not supported (RFC 9700); post JSON {"email","password"} instead')
    throw tokenError(400, 'unsupported_grant_type', 'grant_type must be client_credentials or refresh_token')
  }

  async function login(request: IRequest, ctx: RequestContext): Promise<Reply> {
    return tokenEndpoint(request, ctx, async () => {
      const { form, params } = await readBody(request, ctx)
      if (form || params.grant_type !== undefined) return respond(await byGrantType(request, ctx, params))
      if (params.api_key !== undefined) return respond(await loginWithKey(ctx, params.api_key, `key:${ctx.clientKey}`))
      if (params.email !== undefined || params.password !== undefined) return respond(await loginWithPassword(ctx, params))
      throw tokenError(400, 'invalid_request', 'Send {"email","password"}, {"api_key"} or an OAuth grant_type')
    })
  }

  async function refresh(request: IRequest, ctx: RequestContext): Promise<Reply> {
    return tokenEndpoint(request, ctx, async () => {
      const { form, params } = await readBody(request, ctx)
      if (form || params.grant_type !== undefined) {
        if (params.grant_type === undefined || params.grant_type === '') throw tokenError(400, 'invalid_request', 'grant_type is required')
        if (params.grant_type !== 'refresh_token') throw tokenError(400, 'unsupported_grant_type', 'This endpoint takes grant_type=refresh_token only')
      }
      return respond(await refreshGrant(ctx, params.refresh_token))
    })
  }

  return [
    { method: 'POST', path: '/auth/login', handler: login, doc: loginDoc },
    { method: 'POST', path: '/auth/refresh', handler: refresh, doc: refreshDoc },
  ]
}

/** Every error of the token endpoint carries an RFC 6749 §5.2-style code and no-store headers. */
async function tokenEndpoint(request: Request, ctx: RequestContext, grant: () => Promise<Reply>): Promise<Reply> {
  try {
    refuseCredentialsInUrl(request)
    requireSecureTransport(ctx)
    return await grant()
  } catch (error) {
    if (error instanceof HttpError && error.code === null) {
      throw new HttpError(error.status, error.message, { code: 'invalid_request', headers: { ...TOKEN_HEADERS, ...error.headers } })
    }
    if (error instanceof HttpError) throw new HttpError(error.status, error.message, { code: error.code!, headers: { ...TOKEN_HEADERS, ...error.headers } })
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
  body: { schema: LoginRequestSchema, mediaTypes: ['application/json', 'application/x-www-form-urlencoded'], required: true },
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
  body: { schema: RefreshRequestSchema, mediaTypes: ['application/json', 'application/x-www-form-urlencoded'], required: true },
  responses: {
    200: { description: 'A new access and refresh token.', schema: TokenResponseSchema, headers: NO_STORE },
    ...tokenErrors({}),
    429: { description: 'too_many_requests: too many failed refreshes from this client.', schema: TokenErrorSchema, headers: { 'Retry-After': 'Seconds to wait.' } },
  },
}
