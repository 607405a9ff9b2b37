// Invitations: the only way into an organization through the API. An Admin (Owners for the Owner
// role) invites an email and gets a one-time secret to pass on out of band; the invitee accepts
// with it. The invite answer is the same whether or not the email has an account anywhere (no
// lookup of accounts, no password hashing), so an Admin learns nothing about other organizations
// and cannot attach someone else's account: an existing account joins only with its own password.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Config } from '../config.ts'
import { acceptInvitation, createInvitation, findInvitationBySecret, findOpenInvitation, listOpenInvitations, recordAcceptFailure, revokeInvitation, type Invitation } from '../storage/invitations.ts'
import type { PasswordHasher } from '../auth/passwords.ts'
import type { Role } from '../database/schema.ts'
import { hashSecret, secretKind } from '../auth/secrets.ts'
import { auditBy, hashingBusyError, protectedErrors, ProductErrorSchema, refuseCredentialsInUrl, requireSecureTransport, RoleSchema, withinCap, type Guard } from './access.ts'
import { created, noContent } from '../http/reply.ts'
import { bodyDoc, readBody, readInput, unknownField, validateInput } from '../http/body.ts'
import { pathId } from './input.ts'
import { creatorOf, type Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import { MemberSchema } from './members.ts'
import { createRateLimiter, rateLimitHeaders } from '../services/ratelimit.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { isValidEmail, MAX_EMAIL_LENGTH } from '../domain/email.ts'

const INVITATION_NOT_FOUND = 'Invitation not found'
/** One answer for every refused accept: the token holder learns nothing about the account. */
export const INVITATION_REFUSED = 'This invitation is invalid, expired, revoked or already used, or the password does not match'

const PASSWORD = v.pipe(
  v.string('Field password must be a string'),
  v.minLength(12, 'Field password must have at least 12 characters'),
  v.maxLength(1024, 'Field password is longer than 1024 characters'),
)

const InvitationSchema = v.pipe(
  v.object({
    invitation_id: v.pipe(v.string(), v.uuid()),
    email: v.pipe(v.string(), v.description('As the inviter typed it.')),
    role: RoleSchema,
    invited_by: v.pipe(v.string(), v.description('"user:<uuid>" or "key:<uuid>".')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    expires_at: v.pipe(v.string(), v.isoTimestamp(), v.description('After this the secret no longer works (INVITATION_TTL).')),
  }),
  v.title('Invitation'),
)

const NewInvitationSchema = v.pipe(
  v.object({
    ...InvitationSchema.entries,
    token: v.pipe(v.string(), v.description('The one-time secret (stw_inv_…) to pass on to the invitee out of band: shown this once, stored only as a SHA-256 hash.')),
  }),
  v.title('NewInvitation'),
)

const InvitationListSchema = v.pipe(v.object({ invitations: v.array(InvitationSchema) }), v.title('InvitationList'))

const InvitationCreateSchema = v.pipe(
  v.strictObject(
    {
      email: v.pipe(v.string('Field email must be a string'), v.trim(), v.maxLength(MAX_EMAIL_LENGTH, 'Field email is too long'), v.check(isValidEmail, 'Field email must be an email address')),
      role: RoleSchema,
    },
    unknownField(['invitation_id', 'invited_by', 'created_at', 'expires_at', 'token', 'organization_id']),
  ),
  v.title('InvitationCreate'),
)

const InvitationAcceptSchema = v.pipe(
  v.strictObject(
    {
      token: v.pipe(v.string('Field token must be a string'), v.description('The invitation secret (stw_inv_…).')),
      password: v.pipe(
        PASSWORD,
        v.description("For an email without an account: the new account's password (at least 12 characters). For an existing account: its current password, which proves the invitee owns it; it is never changed here."),
      ),
    },
    unknownField(),
  ),
  v.title('InvitationAccept'),
)

const inviteBody = bodyDoc(InvitationCreateSchema, ['application/json'], true)
const acceptBody = bodyDoc(InvitationAcceptSchema, ['application/json'], true)

const AcceptedSchema = v.pipe(
  v.object({ organization_id: v.pipe(v.string(), v.uuid()), ...MemberSchema.entries }),
  v.title('AcceptedInvitation'),
)

function invitationToJson(invitation: Invitation): v.InferOutput<typeof InvitationSchema> {
  return {
    invitation_id: invitation.id,
    email: invitation.email,
    role: invitation.role,
    invited_by: invitation.invited_by,
    created_at: invitation.created_at.toISOString(),
    expires_at: invitation.expires_at.toISOString(),
  }
}

function assertMayManage(principal: Principal, role: Role): void {
  if (principal.role !== 'owner' && role === 'owner') throw new HttpError(403, 'Only Owners manage Owners')
}

function hashingBusy(status: 429 | 503): HttpError {
  return new HttpError(status, 'Too many password operations in progress; retry shortly', { headers: { 'Retry-After': '1' } })
}

export function invitationRoutes(config: Config, guard: Guard, passwords: PasswordHasher): Route[] {
  // Accepting is unauthenticated and may verify a password: bounded per client like sign-in.
  const acceptLimiter = createRateLimiter({ limit: config.loginRateLimit.limit * 5, windowSeconds: config.loginRateLimit.windowSeconds }, 'invitation-accept')

  async function invite(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const { params } = await readBody(request, ctx, { accept: ['json'] })
    if ('password' in params) throw new HttpError(400, 'Field password is not accepted: the invitee chooses it when accepting')
    const input = validateInput(inviteBody, params)
    assertMayManage(principal, input.role)
    const cap = { limit: ctx.config.maxMembersPerOrg, what: 'members and open invitations', setting: 'MAX_MEMBERS_PER_ORG' }
    const result = await withinCap(() =>
      createInvitation(
        ctx.deps.db,
        { organizationId: principal.organizationId, email: input.email, role: input.role, invitedBy: creatorOf(principal), ttlSeconds: ctx.config.invitationTtlSeconds },
        cap,
        new Date(ctx.now),
        auditBy(ctx, principal),
      ),
    )
    if (result.outcome === 'member') throw new HttpError(409, 'Already a member of this organization; change the role with PATCH /members/{user_id}')
    if (result.outcome === 'pending') throw new HttpError(409, 'An invitation for this email is already open; revoke it first to issue a new secret')
    return created({ ...invitationToJson(result.invitation), token: result.secret }, `${ctx.config.productApiUrl}/invitations/${result.invitation.id}`)
  }

  async function list(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, { invitations: (await listOpenInvitations(ctx.deps.db, principal.organizationId, new Date(ctx.now))).map(invitationToJson) })
  }

  async function revoke(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'invitation_id')
    const invitation = id ? await findOpenInvitation(ctx.deps.db, principal.organizationId, id, new Date(ctx.now)) : null
    if (!invitation) throw new HttpError(404, INVITATION_NOT_FOUND)
    assertMayManage(principal, invitation.role)
    if (!(await revokeInvitation(ctx.deps.db, principal.organizationId, invitation.id, new Date(ctx.now), auditBy(ctx, principal)))) throw new HttpError(404, INVITATION_NOT_FOUND)
    return noContent()
  }

  async function accept(request: IRequest, ctx: RequestContext): Promise<Reply> {
    refuseCredentialsInUrl(request)
    requireSecureTransport(ctx)
    const decision = acceptLimiter.take(ctx.clientKey, ctx.now)
    if (!decision.allowed) {
      throw new HttpError(429, 'Too many invitation attempts from this client; retry later', { headers: rateLimitHeaders(acceptLimiter.name, acceptLimiter.rule, decision) })
    }
    const input = await readInput(request, ctx, acceptBody)
    // A malformed or mistyped secret is refused before any database work.
    if (secretKind(input.token) !== 'inv') throw new HttpError(400, INVITATION_REFUSED)
    const now = new Date(ctx.now)
    const invitation = await findInvitationBySecret(ctx.deps.db, hashSecret(input.token), now)
    if (!invitation) throw new HttpError(400, INVITATION_REFUSED)
    let account: { userId: string } | { passwordHash: string }
    // This client's hashing share; guesses through one invitation are bounded by the invitation itself.
    const owner = { client: ctx.clientKey, account: null }
    try {
      if (invitation.account) {
        // An existing account joins only with its own password: holding the secret is not enough,
        // since the inviter saw it too.
        if (!(await passwords.verify(input.password, invitation.account.password_hash, owner))) {
          await recordAcceptFailure(ctx.deps.db, invitation.id, now)
          throw new HttpError(400, INVITATION_REFUSED)
        }
        account = { userId: invitation.account.id }
      } else {
        account = { passwordHash: await passwords.hash(input.password, owner) }
      }
    } catch (error) {
      throw hashingBusyError(error, { share: hashingBusy(429), overload: hashingBusy(503) })
    }
    const result = await acceptInvitation(ctx.deps.db, invitation, account, now, ctx.requestId)
    if (result.outcome !== 'accepted') throw new HttpError(400, INVITATION_REFUSED)
    const { member } = result
    return created(
      { organization_id: invitation.organization_id, user_id: member.user_id, email: member.email, role: member.role, created_at: member.created_at.toISOString() },
      `${ctx.config.productApiUrl}/members/${member.user_id}`,
    )
  }

  return [
    { method: 'POST', path: '/invitations/accept', handler: accept, doc: acceptDoc },
    { method: 'GET', path: '/invitations', handler: guard.protect('members:manage', list), doc: listDoc },
    { method: 'POST', path: '/invitations', handler: guard.protect('members:manage', invite), doc: inviteDoc },
    { method: 'DELETE', path: '/invitations/:invitation_id', handler: guard.protect('members:manage', revoke), doc: revokeDoc },
  ]
}

const TAGS = ['Members']
const OWNERS = { 403: 'The role lacks members:manage, or an Admin touched the Owner role ("Only Owners manage Owners").' }

const inviteDoc: OperationDoc = {
  operationId: 'createInvitation',
  summary: 'Invite someone to the organization',
  description:
    'Answers the same way whether or not the email has an account. The response holds the one-time secret (token) to pass on to the invitee out of band; the invitee joins with POST /invitations/accept. Until then the invitee is not a member. Only Owners invite Owners. Members plus open invitations are capped (MAX_MEMBERS_PER_ORG).',
  tags: TAGS,
  scopes: ['members:manage'],
  body: inviteBody,
  responses: {
    201: { description: 'Invited; token holds the secret, shown this once.', schema: NewInvitationSchema, headers: { Location: 'URL of the invitation.' } },
    ...protectedErrors({
      ...OWNERS,
      409: 'Already a member of this organization, an invitation for this email is already open, or the cap of members and invitations is reached.',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}

const listDoc: OperationDoc = {
  operationId: 'listInvitations',
  summary: "List the organization's open invitations",
  description: 'Only invitations not yet accepted, revoked or expired; only what the inviter typed. Secrets are never returned.',
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 200: { description: 'The open invitations, oldest first.', schema: InvitationListSchema }, ...protectedErrors() },
}

const revokeDoc: OperationDoc = {
  operationId: 'revokeInvitation',
  summary: 'Revoke an open invitation',
  description: 'Its secret stops working at once. Only Owners revoke invitations to the Owner role.',
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 204: { description: 'Revoked.' }, ...protectedErrors({ ...OWNERS, 404: 'No open invitation with this id ("Invitation not found").' }) },
}

const acceptDoc: OperationDoc = {
  operationId: 'acceptInvitation',
  summary: 'Accept an invitation (no bearer token)',
  description:
    'Spends the one-time secret and makes the membership; of concurrent accepts exactly one succeeds. An email without an account gets one with the given password; an existing account must give its own password, which is not changed. The caller then signs in with POST /auth/login. An invalid, expired, revoked or used secret, or a wrong password, gets one and the same 400; five wrong passwords revoke the invitation.',
  tags: TAGS,
  scopes: null,
  body: acceptBody,
  responses: {
    201: { description: 'Accepted: the new membership.', schema: AcceptedSchema, headers: { Location: 'URL of the membership.' } },
    400: { description: 'Malformed body, or the invitation cannot be accepted (one message for every reason).', schema: ProductErrorSchema },
    403: { description: 'Plain HTTP from a non-loopback client.', schema: ProductErrorSchema },
    413: { description: 'Body larger than the limit.', schema: ProductErrorSchema },
    415: { description: 'Content-Type other than application/json.', schema: ProductErrorSchema },
    429: { description: 'Too many attempts from this client, or too many password checks of this client or email in progress.', schema: ProductErrorSchema, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
    503: { description: 'Database unavailable, or too many password operations in progress; retry later.', schema: ProductErrorSchema, headers: { 'Retry-After': 'Seconds to wait before retrying.' } },
  },
}
