// How a policy and its versions are answered (docs/api.md): the published schemas and the one
// representation of each, used by every route that answers a policy or a version.
import * as v from 'valibot'
import { approvalFor } from '../services/policies.ts'
import type { Policy, PolicyFields, PolicyVersion, PolicyWrite } from '../storage/policies.ts'
import { EffectSchema, ModeSchema } from './policy-schemas.ts'
import { LimitAnswerSchema } from './limit-schemas.ts'

const ApprovalAnswerSchema = v.pipe(
  v.nullable(
    v.object({
      approvers_required: v.number(),
      approver_roles: v.array(v.string()),
      timeout_seconds: v.number(),
      use_within_seconds: v.number(),
    }),
  ),
  v.description('The approval settings with every default filled in; null unless effect is require_approval.'),
)

const contentEntries = {
  name: v.string(),
  description: v.string(),
  effect: EffectSchema,
  agents: v.array(v.string()),
  actions: v.array(v.string()),
  resources: v.array(v.string()),
  condition: v.pipe(v.nullable(v.string()), v.description('CEL expression, or null.')),
  approval: ApprovalAnswerSchema,
  mode: ModeSchema,
  enabled: v.boolean(),
  limits: v.pipe(v.array(LimitAnswerSchema), v.description('Budgets counted while the policy applies (docs/budgets.md); [] for none.')),
}

const policyEntries = {
  policy_id: v.pipe(v.string(), v.uuid(), v.description('Identifier of the policy.')),
  organization_id: v.pipe(v.string(), v.uuid()),
  ...contentEntries,
  archived: v.pipe(v.boolean(), v.description('True once deleted: an archived policy never applies, and stays readable.')),
  archived_at: v.pipe(v.nullable(v.pipe(v.string(), v.isoTimestamp())), v.description('When it was archived, or null.')),
  version: v.pipe(v.number(), v.integer(), v.description('Starts at 1; each change, archive or rollback adds 1.')),
  created_at: v.pipe(v.string(), v.isoTimestamp()),
  updated_at: v.pipe(v.string(), v.isoTimestamp()),
  created_by: v.pipe(v.string(), v.description('"user:<uuid>", "key:<uuid>" or "operator".')),
}

export const PolicySchema = v.pipe(v.object(policyEntries), v.title('Policy'))

/** The answer of a write: the policy and the organization's ruleset revision after it. */
export const PolicyWriteSchema = v.pipe(
  v.object({ ...policyEntries, ruleset_revision: v.pipe(v.number(), v.integer(), v.description("The organization's ruleset revision after this change.")) }),
  v.title('PolicyWrite'),
)

export const PolicyVersionSchema = v.pipe(
  v.object({
    policy_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    version: v.pipe(v.number(), v.integer()),
    ...contentEntries,
    archived: v.boolean(),
    created_at: v.pipe(v.string(), v.isoTimestamp(), v.description('When this version was written.')),
    created_by: v.pipe(v.string(), v.description('Who wrote this version: "user:<uuid>", "key:<uuid>" or "operator".')),
  }),
  v.title('PolicyVersion'),
)

function contentToJson(content: PolicyFields): Pick<v.InferOutput<typeof PolicySchema>, keyof typeof contentEntries> {
  return {
    name: content.name,
    description: content.description,
    effect: content.effect,
    agents: content.agents,
    actions: content.actions,
    resources: content.resources,
    condition: content.condition,
    // Policies written before approval blocks existed have none stored: they get the defaults.
    approval: content.approval ?? approvalFor(content.effect, null),
    mode: content.mode,
    enabled: content.enabled,
    limits: (content.limits ?? []).map((limit) => ({ ...limit, amount: limit.amount ?? null, currency: limit.currency ?? null, window: { ...limit.window } as { type: string; tz?: string; seconds?: number } })),
  }
}

export function policyToJson(policy: Policy): v.InferOutput<typeof PolicySchema> {
  return {
    policy_id: policy.policy_id,
    organization_id: policy.organization_id,
    ...contentToJson(policy),
    archived: policy.archived_at !== null,
    archived_at: policy.archived_at?.toISOString() ?? null,
    version: policy.version,
    created_at: policy.created_at.toISOString(),
    updated_at: policy.updated_at.toISOString(),
    created_by: policy.created_by,
  }
}

export function writeToJson(write: PolicyWrite): v.InferOutput<typeof PolicyWriteSchema> {
  return { ...policyToJson(write.policy), ruleset_revision: write.rulesetRevision }
}

export function versionToJson(version: PolicyVersion): v.InferOutput<typeof PolicyVersionSchema> {
  return {
    policy_id: version.policy_id,
    organization_id: version.organization_id,
    version: version.version,
    ...contentToJson(version),
    archived: version.archived,
    created_at: version.created_at.toISOString(),
    created_by: version.created_by,
  }
}
