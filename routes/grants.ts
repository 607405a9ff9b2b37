// The grants of the token endpoint (routes/auth.ts): an API key, a user's password, a refresh
// token. Each checks its credential inside one throttled attempt (services/attempts.ts) and returns
// the session it starts; errors carry RFC 6749 §5.2 codes.
import * as v from 'valibot'
import type { Role } from '../domain/roles.ts'
import { MAX_EMAIL_LENGTH, normalizeEmail } from '../domain/email.ts'
import { parseWith } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import { findActiveKeyByHash } from '../storage/keys.ts'
import type { PasswordHasher } from '../auth/passwords.ts'
import { hashSecret, sameHash, secretKind } from '../auth/secrets.ts'
import { rotateRefreshToken, startSession } from '../storage/tokens.ts'
import { eventBy, type AuditBy } from '../storage/audit.ts'
import { findUserByEmail, listMembershipsOfUser, recordLoginFailure, type NamedMembership } from '../storage/users.ts'
import { hashingBusyError } from './access.ts'
import { createAttempts } from '../services/attempts.ts'
import type { Credentials } from '../services/credentials.ts'
import type { RequestContext } from './deps.ts'

/** RFC 6749 §5.1: token responses, errors included, are never cached. */
export const TOKEN_HEADERS = Object.freeze({ 'Cache-Control': 'no-store', Pragma: 'no-cache' })
const BAD_LOGIN = 'Invalid email or password'
const BAD_KEY = 'Invalid API key'
const BAD_REFRESH = 'Refresh token is invalid, expired or already used'
/** docs/security.md: a spent refresh token presented again this soon is a client retry, not a theft. */
const REFRESH_RETRY_GRACE_SECONDS = 10

export function tokenError(status: number, code: string, message: string, headers: Record<string, string> = {}): HttpError {
  return new HttpError(status, message, { code, headers: { ...TOKEN_HEADERS, ...headers } })
}

const CREDENTIALS_REQUIRED = 'email and password are required strings'
const TOO_LONG = 'email or password is too long'
const ORGANIZATION_UUID = 'organization_id must be a UUID'

/** JSON {"email","password","organization_id"?}: a user signs in (one member of LoginRequestSchema). */
export const PasswordLoginSchema = v.object(
  {
    email: v.pipe(
      v.string(CREDENTIALS_REQUIRED),
      v.check((email) => email.trim() !== '', CREDENTIALS_REQUIRED),
      v.maxLength(MAX_EMAIL_LENGTH, TOO_LONG),
      v.description('User email.'),
    ),
    password: v.pipe(v.string(CREDENTIALS_REQUIRED), v.nonEmpty(CREDENTIALS_REQUIRED), v.maxLength(1024, TOO_LONG)),
    organization_id: v.optional(
      v.pipe(v.string(ORGANIZATION_UUID), v.uuid(ORGANIZATION_UUID), v.description('The organization to sign in to; by default the one the user joined first.')),
    ),
  },
  CREDENTIALS_REQUIRED,
)

/** A missing or mistyped field wins over a too-long one, which wins over a bad organization_id. */
const PASSWORD_PRECEDENCE = [CREDENTIALS_REQUIRED, TOO_LONG, ORGANIZATION_UUID]

export interface Grant {
  accessToken: string
  refreshToken: string | null
  organizationId: string
  role: Role
  /** A password sign-in without a chosen organization: all of the user's memberships. */
  organizations?: readonly NamedMembership[]
}

export interface Grants {
  withKey(ctx: RequestContext, secret: unknown, account: string): Promise<Grant>
  withPassword(ctx: RequestContext, params: Record<string, unknown>): Promise<Grant>
  withRefreshToken(ctx: RequestContext, token: unknown): Promise<Grant>
}

function throttled(retryAfter: number): HttpError {
  return tokenError(429, 'too_many_requests', 'Too many failed attempts; retry later', { 'Retry-After': String(retryAfter) })
}

export function createGrants(credentials: Credentials, hasher: PasswordHasher, loginRateLimit: RequestContext['config']['loginRateLimit']): Grants {
  const attempt = createAttempts(loginRateLimit, throttled)

  async function withKey(ctx: RequestContext, secret: unknown, account: string): Promise<Grant> {
    return attempt(ctx, account, async (fail) => {
      if (typeof secret !== 'string' || secretKind(secret) !== 'key') throw fail(tokenError(401, 'invalid_client', BAD_KEY))
      const hash = hashSecret(secret)
      const key = await findActiveKeyByHash(ctx.deps.db, hash, new Date(ctx.now))
      if (!key || !sameHash(key.secret_hash, hash)) throw fail(tokenError(401, 'invalid_client', BAD_KEY))
      const { accessToken } = await startSession(
        ctx.deps.db,
        { organizationId: key.organization_id, userId: null, apiKeyId: key.id, role: key.role },
        // RFC 6749 §4.4.3: no refresh token for client credentials; the key can log in again.
        { accessSeconds: ctx.config.accessTokenTtlSeconds, refreshSeconds: null },
        new Date(ctx.now),
      )
      return { accessToken, refreshToken: null, organizationId: key.organization_id, role: key.role }
    })
  }

  async function withPassword(ctx: RequestContext, params: Record<string, unknown>): Promise<Grant> {
    const { email, password, organization_id: organizationId } = parseWith(PasswordLoginSchema, params, PASSWORD_PRECEDENCE)
    const normalized = normalizeEmail(email)
    return attempt(ctx, `user:${normalized}`, async (fail) => {
      const user = await findUserByEmail(ctx.deps.db, email)
      // The password is checked before anything about the account's organizations is looked at,
      // and every failure after it gets the answer a wrong password gets: before signing in,
      // nothing tells whether the email has an account or where it is a member.
      const valid = await verify(password, user?.password_hash ?? null, ctx.clientKey, normalized)
      // The account signed in to is the actor of its login events, failed ones included (the
      // claimed account): a failure is recorded in each organization it belongs to, never with
      // the password; an unknown email has no organization and records nothing.
      const by: AuditBy | null = user ? { actor: { type: 'user', id: user.id }, requestId: ctx.requestId } : null
      if (!user || !valid) {
        if (user && by) await recordLoginFailure(ctx.deps.db, user.id, 'password', ctx.clientAddress, by, new Date(ctx.now))
        throw fail(tokenError(400, 'invalid_grant', BAD_LOGIN))
      }
      const memberships = await listMembershipsOfUser(ctx.deps.db, user.id)
      const chosen = organizationId === undefined ? memberships[0] : memberships.find((m) => m.organization_id === organizationId.toLowerCase())
      if (!chosen) {
        await recordLoginFailure(ctx.deps.db, user.id, 'organization', ctx.clientAddress, by!, new Date(ctx.now))
        throw fail(tokenError(400, 'invalid_grant', BAD_LOGIN))
      }
      const { accessSeconds, refreshSeconds } = sessionSeconds(ctx)
      const issued = await startSession(
        ctx.deps.db,
        { organizationId: chosen.organization_id, userId: user.id, apiKeyId: null, role: chosen.role },
        { accessSeconds, refreshSeconds },
        new Date(ctx.now),
        { maxPerUser: ctx.config.maxSessionsPerUser, refreshSeconds, accessSeconds },
        [eventBy(by!, chosen.organization_id, 'login.succeeded', { type: 'user', id: user.id }, { user_id: user.id, method: 'password', role: chosen.role, client_address: ctx.clientAddress }, new Date(ctx.now))],
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
  async function verify(password: string, stored: string | null, client: string, account: string): Promise<boolean> {
    try {
      return await hasher.verify(password, stored, { client, account })
    } catch (error) {
      throw hashingBusyError(error, {
        share: tokenError(429, 'too_many_requests', 'Too many sign-ins in progress from this client or for this account; retry shortly', { 'Retry-After': '1' }),
        overload: tokenError(503, 'temporarily_unavailable', 'Too many sign-ins in progress; retry shortly', { 'Retry-After': '1' }),
      })
    }
  }

  async function withRefreshToken(ctx: RequestContext, token: unknown): Promise<Grant> {
    if (token === undefined) throw tokenError(400, 'invalid_request', 'refresh_token is required')
    // Refresh tokens are guessed per client, not per account: count failures against the client.
    return attempt(ctx, 'refresh', async (fail) => {
      if (typeof token !== 'string' || secretKind(token) !== 'rt') throw fail(tokenError(400, 'invalid_grant', BAD_REFRESH))
      const result = await rotateRefreshToken(ctx.deps.db, hashSecret(token), { ...sessionSeconds(ctx), retryGraceSeconds: REFRESH_RETRY_GRACE_SECONDS }, new Date(ctx.now))
      if (result.outcome === 'reused') {
        // RFC 9700 §4.14.2: a replayed refresh token means it leaked; end the whole session.
        await credentials.familyRevoked(result.familyId)
        ctx.deps.logger.log('warn', 'refresh token reused; session revoked', { requestId: ctx.requestId })
      }
      if (result.outcome !== 'rotated') throw fail(tokenError(400, 'invalid_grant', BAD_REFRESH))
      return { accessToken: result.tokens.accessToken, refreshToken: result.tokens.refreshToken, organizationId: result.organizationId, role: result.role }
    })
  }

  return { withKey, withPassword, withRefreshToken }
}

function sessionSeconds(ctx: RequestContext): { accessSeconds: number; refreshSeconds: number } {
  return { accessSeconds: ctx.config.accessTokenTtlSeconds, refreshSeconds: ctx.config.refreshTokenTtlSeconds }
}

/** RFC 6749 §2.3.1: client_secret in the body or HTTP Basic, not both. */
export function clientSecret(request: Request, params: Record<string, unknown>): unknown {
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
