// Members of the organization (Admins and Owners manage members; only Owners manage Owners).
// GET /members, PATCH/DELETE /members/{user_id}. An organization always keeps at least one Owner.
// Nobody is added here: people join by invitation (routes/invitations.ts), so an Admin can never
// attach an account that exists elsewhere, nor learn whether an email has one.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Role } from '../database/schema.ts'
import { changeMembership, findMember, listMembers, type Member } from '../storage/users.ts'
import { auditBy, protectedErrors, RoleSchema, type Guard } from './access.ts'
import { noContent } from '../http/reply.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { pathId } from './input.ts'
import type { Credentials, Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { RequestContext, Route } from './deps.ts'
import type { OperationDoc } from '../http/pipeline.ts'

const MEMBER_NOT_FOUND = 'Member not found'

export const MemberSchema = v.pipe(
  v.object({
    user_id: v.pipe(v.string(), v.uuid()),
    email: v.string(),
    role: RoleSchema,
    created_at: v.pipe(v.string(), v.isoTimestamp(), v.description('When the user joined the organization.')),
  }),
  v.title('Member'),
)

const MemberListSchema = v.pipe(v.object({ members: v.array(MemberSchema) }), v.title('MemberList'))

const MemberUpdateSchema = v.pipe(v.strictObject({ role: RoleSchema }, unknownField(['user_id', 'email', 'created_at', 'organization_id'])), v.title('MemberUpdate'))

const updateBody = bodyDoc(MemberUpdateSchema, ['application/json'], true)

function memberToJson(member: Member): v.InferOutput<typeof MemberSchema> {
  return { user_id: member.user_id, email: member.email, role: member.role, created_at: member.created_at.toISOString() }
}

/** Only Owners grant, change or remove the Owner role. */
function assertMayManage(principal: Principal, ...roles: Role[]): void {
  if (principal.role !== 'owner' && roles.includes('owner')) throw new HttpError(403, 'Only Owners manage Owners')
}

async function targetMember(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Member> {
  const id = pathId(request, 'user_id')
  const member = id ? await findMember(ctx.deps.db, principal.organizationId, id) : null
  if (!member) throw new HttpError(404, MEMBER_NOT_FOUND)
  return member
}

const LAST_OWNER = 'The organization must keep at least one Owner'

export function memberRoutes(guard: Guard, credentials: Credentials): Route[] {
  async function list(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, { members: (await listMembers(ctx.deps.db, principal.organizationId)).map(memberToJson) })
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const member = await targetMember(request, ctx, principal)
    const { role } = await readInput(request, ctx, updateBody)
    assertMayManage(principal, member.role, role)
    const outcome = await changeMembership(ctx.deps.db, principal.organizationId, member.user_id, role, new Date(ctx.now), auditBy(ctx, principal))
    if (outcome === 'missing') throw new HttpError(404, MEMBER_NOT_FOUND)
    if (outcome === 'last-owner') throw new HttpError(409, LAST_OWNER)
    // The user's sessions, and the keys they created (capped at their role), change on the next request.
    await credentials.userChanged(member.user_id)
    return json(200, memberToJson({ ...member, role }))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const member = await targetMember(request, ctx, principal)
    assertMayManage(principal, member.role)
    const outcome = await changeMembership(ctx.deps.db, principal.organizationId, member.user_id, null, new Date(ctx.now), auditBy(ctx, principal))
    if (outcome === 'missing') throw new HttpError(404, MEMBER_NOT_FOUND)
    if (outcome === 'last-owner') throw new HttpError(409, LAST_OWNER)
    // The user's sessions in this organization, and the keys they created, stop on the next request.
    await credentials.userChanged(member.user_id)
    return noContent()
  }

  return [
    { method: 'GET', path: '/members', handler: guard.protect('members:manage', list), doc: listDoc },
    { method: 'PATCH', path: '/members/:user_id', handler: guard.protect('members:manage', update), doc: updateDoc },
    { method: 'DELETE', path: '/members/:user_id', handler: guard.protect('members:manage', remove), doc: removeDoc },
  ]
}

const TAGS = ['Members']
const OWNERS = { 403: 'The role lacks members:manage, or an Admin touched the Owner role ("Only Owners manage Owners").' }

const listDoc: OperationDoc = {
  operationId: 'listMembers',
  summary: "List the organization's members",
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 200: { description: 'The members.', schema: MemberListSchema }, ...protectedErrors() },
}

const updateDoc: OperationDoc = {
  operationId: 'updateMember',
  summary: "Change a member's role",
  description: "The member's sessions take the new role on their next request; API keys they created act with at most the new role.",
  tags: TAGS,
  scopes: ['members:manage'],
  body: updateBody,
  responses: {
    200: { description: 'The member with the new role.', schema: MemberSchema },
    ...protectedErrors({ ...OWNERS, 404: 'No such member ("Member not found").', 409: 'The last Owner cannot be demoted.' }),
  },
}

const removeDoc: OperationDoc = {
  operationId: 'removeMember',
  summary: 'Remove a member from the organization',
  description: "The member's sessions in this organization, and the API keys they created, stop on their next request.",
  tags: TAGS,
  scopes: ['members:manage'],
  responses: { 204: { description: 'Removed.' }, ...protectedErrors({ ...OWNERS, 404: 'No such member ("Member not found").', 409: 'The last Owner cannot be removed.' }) },
}
