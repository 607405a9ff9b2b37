// Policies as use cases: a policy document (a parsed POST /policies body, a PATCH, a replay's
// draft) turned into the fields storage keeps, with the approval block normalized the one way,
// and the writes that build a new version from it. Knows nothing of HTTP but its refusals.
import type { Kysely } from 'kysely'
import { compileCondition, normalizeApproval, type ApprovalSettings } from '../engine/index.ts'
import { ROLES } from '../domain/roles.ts'
import type { AuditBy } from '../storage/audit.ts'
import type { Cap } from '../storage/caps.ts'
import { createPolicy, updatePolicy, type Approval, type Effect, type Policy, type PolicyFields, type PolicyWrite, type UpdateOutcome } from '../storage/policies.ts'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import type { Principal } from './credentials.ts'

export const POLICY_NOT_FOUND = 'Policy not found'
export const APPROVAL_ONLY_FOR_REQUIRE_APPROVAL = 'Field approval is only for require_approval policies'

/** An approval block as a client sends it: fields left out take their defaults. */
export type ApprovalDocument = Partial<ApprovalSettings>

/** A policy as a client writes it (already checked field by field): the approval not yet normalized. */
export interface PolicyDocument extends Omit<PolicyFields, 'approval'> {
  approval: ApprovalDocument | null
}

/** The fields a PATCH names; those left out keep their current value. */
export type PolicyChanges = Partial<PolicyDocument>

const WRITABLE = ['name', 'description', 'effect', 'agents', 'actions', 'resources', 'condition', 'approval', 'mode', 'enabled', 'limits'] as const

/** Why a condition does not compile, with its line and column, as a client's 400 says it. */
export function conditionProblem(text: string): string {
  const compiled = compileCondition(text)
  if (compiled.ok) return 'Field condition does not compile'
  const { line, column, message } = compiled.error
  return `Field condition does not compile (line ${line}, column ${column}): ${message}`
}

/** The stored approval block: every default filled in for require_approval, null for other effects. */
export function approvalFor(effect: Effect, given: ApprovalDocument | null | undefined): Approval | null {
  if (effect !== 'require_approval') return null
  const filled = normalizeApproval(given ?? null)
  return {
    approvers_required: filled.approvers_required,
    approver_roles: ROLES.filter((role) => filled.approver_roles.includes(role)),
    timeout_seconds: filled.timeout_seconds,
    use_within_seconds: filled.use_within_seconds,
  }
}

/** The stored fields of a policy document; `where` prefixes the message of a refusal. */
export function fieldsFromInput(input: PolicyDocument, where = ''): PolicyFields {
  if (input.approval !== null && input.effect !== 'require_approval') throw new HttpError(400, `${where}${APPROVAL_ONLY_FOR_REQUIRE_APPROVAL}`)
  return {
    name: input.name,
    description: input.description,
    effect: input.effect,
    agents: input.agents,
    actions: input.actions,
    resources: input.resources,
    condition: input.condition,
    approval: approvalFor(input.effect, input.approval),
    mode: input.mode,
    enabled: input.enabled,
    limits: input.limits ?? [],
  }
}

/** The new content of a PATCH: the given fields over the current ones, the approval block following the effect. */
export function mergeChanges(current: Policy, changes: PolicyChanges): PolicyFields {
  const next: PolicyFields = { ...current }
  for (const key of WRITABLE) if (key in changes && key !== 'approval') (next as unknown as Record<string, unknown>)[key] = changes[key]
  const given = 'approval' in changes ? (changes.approval ?? null) : undefined
  if (given !== undefined && given !== null && next.effect !== 'require_approval') throw new HttpError(400, APPROVAL_ONLY_FOR_REQUIRE_APPROVAL)
  next.approval = given !== undefined ? approvalFor(next.effect, given) : next.effect === 'require_approval' ? (current.approval ?? approvalFor(next.effect, null)) : null
  return next
}

/** Who a version records as its writer: "user:<uuid>" or "key:<uuid>". */
export function actorOf(principal: Principal): string {
  return principal.userId ? `user:${principal.userId}` : `key:${principal.keyId}`
}

/** Creates a policy from a document: version 1, within the organization's cap of policies. */
export async function createPolicyFrom(db: Kysely<Database>, organizationId: string, document: PolicyDocument, actor: string, now: Date, by: AuditBy, cap: Cap): Promise<PolicyWrite> {
  return createPolicy(db, organizationId, fieldsFromInput(document), actor, now, by, cap)
}

/** Changes the named fields of a policy in force, recording the next version. */
export function changePolicy(db: Kysely<Database>, organizationId: string, policyId: string, changes: PolicyChanges, actor: string, now: Date, by: AuditBy): Promise<UpdateOutcome> {
  return updatePolicy(db, organizationId, policyId, (current) => mergeChanges(current, changes), actor, now, by)
}
