// The caller's organization and its decision settings (docs/api.md): GET /organization for every
// member, PATCH /organization for Owners only. The organization is always the credential's.
// Every change bumps the ruleset revision, so decisions use the new settings from the next one on.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { findOrganizationSettings, updateOrganizationSettings, type OrganizationSettings } from '../storage/organization-settings.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import type { Principal } from '../services/credentials.ts'
import { HttpError } from '../http/errors.ts'
import { json, type Reply } from '../http/reply.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import type { RequestContext, Route } from './deps.ts'

export const ONLY_OWNERS = 'Only Owners change organization settings'
export const NOTHING_TO_CHANGE = 'Request body names no field to change'
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/

const DECISIONS = ['deny', 'require_approval', 'allow'] as const
const UNKNOWN_AGENTS = ['deny', 'evaluate'] as const

const settings = {
  name: v.pipe(
    v.string('Field name must be a string'),
    v.trim(),
    v.nonEmpty('Field name must not be empty'),
    v.maxLength(200, 'Field name is longer than 200 characters'),
    v.check((text) => NO_CONTROL.test(text), 'Field name holds a control character'),
    v.description("The organization's name."),
  ),
  default_decision: v.pipe(
    v.picklist(DECISIONS, 'Field default_decision must be deny, require_approval or allow'),
    v.description('The decision when no enforce-mode policy applies (default deny).'),
  ),
  unknown_agents: v.pipe(
    v.picklist(UNKNOWN_AGENTS, 'Field unknown_agents must be deny or evaluate'),
    v.description('What a decision for an agent handle nobody registered gets: deny, or evaluate it like an active agent (default deny).'),
  ),
  decision_retention_days: v.pipe(
    v.number('Field decision_retention_days must be a whole number from 1 to 3650'),
    v.integer('Field decision_retention_days must be a whole number from 1 to 3650'),
    v.minValue(1, 'Field decision_retention_days must be a whole number from 1 to 3650'),
    v.maxValue(3650, 'Field decision_retention_days must be a whole number from 1 to 3650'),
    v.description('Days logged decisions are kept (default 400).'),
  ),
  audit_retention_days: v.pipe(
    v.number('Field audit_retention_days must be a whole number from 1 to 3650'),
    v.integer('Field audit_retention_days must be a whole number from 1 to 3650'),
    v.minValue(1, 'Field audit_retention_days must be a whole number from 1 to 3650'),
    v.maxValue(3650, 'Field audit_retention_days must be a whole number from 1 to 3650'),
    v.description('Days audit events are kept (default 400); older ones may be pruned once an export has covered them (steward audit prune).'),
  ),
}

const READ_ONLY = ['organization_id', 'ruleset_revision', 'created_at', 'updated_at']

/** Strict: a field the server owns is "read-only", any other unknown field is refused. */
export const OrganizationUpdateSchema = v.pipe(
  v.strictObject(
    {
      name: v.optional(settings.name),
      default_decision: v.optional(settings.default_decision),
      unknown_agents: v.optional(settings.unknown_agents),
      decision_retention_days: v.optional(settings.decision_retention_days),
      audit_retention_days: v.optional(settings.audit_retention_days),
    },
    unknownField(READ_ONLY),
  ),
  v.title('OrganizationUpdate'),
)
const updateBody = bodyDoc(OrganizationUpdateSchema, ['application/json', 'application/merge-patch+json'], true)

export const OrganizationSchema = v.pipe(
  v.object({
    organization_id: v.pipe(v.string(), v.uuid()),
    name: v.string(),
    default_decision: settings.default_decision,
    unknown_agents: settings.unknown_agents,
    decision_retention_days: v.pipe(v.number(), v.integer()),
    audit_retention_days: v.pipe(v.number(), v.integer()),
    ruleset_revision: v.pipe(v.number(), v.integer(), v.description('Bumped by every change to the policies, agents or these settings.')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    updated_at: v.pipe(v.string(), v.isoTimestamp(), v.description('When the settings last changed (created_at until then).')),
  }),
  v.title('Organization'),
)

function organizationToJson(row: OrganizationSettings): v.InferOutput<typeof OrganizationSchema> {
  return {
    organization_id: row.id,
    name: row.name,
    default_decision: row.default_decision,
    unknown_agents: row.unknown_agents,
    decision_retention_days: row.decision_retention_days,
    audit_retention_days: row.audit_retention_days,
    ruleset_revision: row.ruleset_revision,
    created_at: row.created_at.toISOString(),
    updated_at: (row.updated_at ?? row.created_at).toISOString(),
  }
}

// The credential's organization exists while the credential works; a race with its deletion is a 404.
const GONE = 'Organization not found'

export function organizationRoutes(guard: Guard): Route[] {
  async function read(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const row = await findOrganizationSettings(ctx.deps.db, principal.organizationId)
    if (!row) throw new HttpError(404, GONE)
    return json(200, organizationToJson(row))
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    if (principal.role !== 'owner') throw new HttpError(403, ONLY_OWNERS)
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, NOTHING_TO_CHANGE)
    const row = await updateOrganizationSettings(ctx.deps.db, principal.organizationId, changes, new Date(ctx.now), auditBy(ctx, principal))
    if (!row) throw new HttpError(404, GONE)
    return json(200, organizationToJson(row))
  }

  return [
    // Every role reads the settings: they say how the organization's agents are decided.
    { method: 'GET', path: '/organization', handler: guard.protect('policies:read', read), doc: readDoc },
    // Guarded by the administrators' scope, then narrowed to Owners (the Admin role is refused too).
    { method: 'PATCH', path: '/organization', handler: guard.protect('members:manage', update), doc: updateDoc },
  ]
}

const TAGS = ['Organization']

const readDoc: OperationDoc = {
  operationId: 'getOrganization',
  summary: "The caller's organization and its decision settings",
  description: 'Any member (Viewer and above). The organization is always the credential\'s.',
  tags: TAGS,
  scopes: ['policies:read'],
  responses: {
    200: { description: 'The organization.', schema: OrganizationSchema },
    ...protectedErrors(),
  },
}

const updateDoc: OperationDoc = {
  operationId: 'updateOrganization',
  summary: "Change the organization's name or decision settings",
  description: 'Owners only: every other role, Admins included, gets 403. Unknown fields and an empty body are 400. Bumps ruleset_revision.',
  tags: TAGS,
  scopes: ['members:manage'],
  body: updateBody,
  responses: {
    200: { description: 'The changed organization.', schema: OrganizationSchema },
    ...protectedErrors({ 403: `The role is not Owner ("${ONLY_OWNERS}"), or plain HTTP from a non-loopback client.`, 413: 'Body larger than the limit.', 415: 'Content-Type other than JSON.' }),
  },
}
