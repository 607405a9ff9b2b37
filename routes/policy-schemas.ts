// What a client may write as a policy (docs/api.md): the bodies of POST /policies and
// PATCH /policies/{policy_id} and a replay's drafts, each field checked where it is parsed, the
// condition compiled by the engine. The answers' shapes are in routes/policy-json.ts.
import * as v from 'valibot'
import { compileCondition, MAX_CONDITION_BYTES } from '../engine/index.ts'
import { ROLES } from '../domain/roles.ts'
import { unknownField } from '../http/body.ts'
import { conditionProblem } from '../services/policies.ts'
import { jsonObject } from './input.ts'
import { LimitsSchema } from './limit-schemas.ts'

export const CONDITIONS_REPLACED = 'Field conditions was replaced by condition: a CEL expression (string) or null'
export const MAX_USE_WITHIN_SECONDS = 86_400

const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
// A condition may span lines (errors name line and column); other control characters are refused.
const NO_CONTROL_BUT_LINES = /^[^\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]*$/

const patternList = (name: string, description: string) =>
  v.pipe(
    v.array(
      v.pipe(
        v.string(`Field ${name} must hold strings`),
        v.trim(),
        v.nonEmpty(`Field ${name} must not hold empty strings`),
        v.maxLength(200, `Field ${name} holds a string longer than 200 characters`),
        v.check((text) => NO_CONTROL.test(text), `Field ${name} holds a control character`),
      ),
      `Field ${name} must be an array of strings`,
    ),
    v.minLength(1, `Field ${name} must hold at least one entry`),
    v.maxLength(100, `Field ${name} holds more than 100 entries`),
    v.description(`${description} Patterns: \`*\` matches any run of characters (none included); every other character is literal and case-sensitive.`),
  )

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length
}

/** A CEL expression, compiled when the policy is written: one that does not compile is a 400 naming line and column. */
const ConditionSchema = v.pipe(
  v.nullable(
    v.pipe(
      v.string('Field condition must be a string (a CEL expression) or null'),
      v.check((text) => text.trim() !== '', 'Field condition must not be empty; send null for no condition'),
      v.check((text) => utf8Length(text) <= MAX_CONDITION_BYTES, `Field condition is longer than ${MAX_CONDITION_BYTES} bytes`),
      v.check((text) => NO_CONTROL_BUT_LINES.test(text), 'Field condition holds a control character'),
      v.check((text) => compileCondition(text).ok, (issue) => conditionProblem(String(issue.input))),
      v.maxLength(MAX_CONDITION_BYTES),
    ),
  ),
  v.description(
    `A CEL expression that must hold for the policy to apply, or null (always applies). At most ${MAX_CONDITION_BYTES} bytes. ` +
      'Variables: agent {id, handle, labels}, action, resource, args, context, now (timestamp). See docs/api.md.',
  ),
)

const wholeNumber = (name: string, min: number, max: number, description: string) => {
  const message = `Field approval.${name} must be a whole number from ${min} to ${max}`
  return v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message), v.description(description))
}

const APPROVAL_NOT_AN_OBJECT = 'Field approval must be a JSON object or null'

/** The approval block of a require_approval policy; fields left out take their defaults. */
export const ApprovalSchema = v.pipe(
  jsonObject(
    v.strictObject(
      {
        approvers_required: v.optional(wholeNumber('approvers_required', 1, 5, 'Distinct people who must approve (default 1).')),
        approver_roles: v.optional(
          v.pipe(
            v.array(v.picklist(ROLES, 'Field approval.approver_roles must hold roles: owner, admin, manager, member, viewer'), 'Field approval.approver_roles must be an array of roles'),
            v.minLength(1, 'Field approval.approver_roles must name at least one role'),
            v.check((roles) => new Set(roles).size === roles.length, 'Field approval.approver_roles names a role twice'),
            v.description('Roles whose members may approve (default ["owner","admin","manager"]).'),
          ),
        ),
        timeout_seconds: v.optional(wholeNumber('timeout_seconds', 30, 604_800, 'Seconds approvers have to decide before the request expires as denied (default 900).')),
        use_within_seconds: v.optional(
          wholeNumber('use_within_seconds', 1, MAX_USE_WITHIN_SECONDS, 'Seconds the agent has to use a granted approval, from when it was granted (default 300).'),
        ),
      },
      unknownField([], { notAnObject: APPROVAL_NOT_AN_OBJECT }),
    ),
    APPROVAL_NOT_AN_OBJECT,
  ),
  v.description('Only for require_approval policies: who approves and how long approvals last. Fields left out take their defaults.'),
)

export const EffectSchema = v.pipe(v.picklist(['allow', 'deny', 'require_approval'], 'Field effect must be allow, deny or require_approval'), v.description('What happens to a matching agent action.'))
export const ModeSchema = v.pipe(v.picklist(['enforce', 'monitor'], 'Field mode must be enforce or monitor'), v.description('enforce applies the effect; monitor only records what would happen.'))

const fields = {
  name: v.pipe(
    v.string('Field name must be a string'),
    v.trim(),
    v.nonEmpty('Field name is required'),
    v.maxLength(200, 'Field name is longer than 200 characters'),
    v.check((text) => NO_CONTROL.test(text), 'Field name holds a control character'),
    v.description('Short human name of the policy.'),
  ),
  description: v.pipe(v.string('Field description must be a string'), v.maxLength(2000, 'Field description is longer than 2000 characters'), v.description('What the policy is for.')),
  effect: EffectSchema,
  agents: patternList('agents', 'Agent handles the policy governs, or "*" for all.'),
  actions: patternList('actions', 'Action patterns such as "email.send" or "payments.*".'),
  resources: patternList('resources', 'Resource patterns, or "*" for all.'),
  condition: ConditionSchema,
  approval: v.nullable(ApprovalSchema),
  mode: ModeSchema,
  enabled: v.pipe(v.boolean('Field enabled must be a boolean'), v.description('Disabled policies are kept but not applied.')),
  limits: LimitsSchema,
}

const OrganizationIdSchema = v.pipe(v.string('organization_id must be a string'), v.description('The organization the credential was issued for.'))

const createEntries = {
  name: fields.name,
  description: v.optional(fields.description, ''),
  effect: fields.effect,
  agents: v.optional(fields.agents, ['*']),
  actions: fields.actions,
  resources: v.optional(fields.resources, ['*']),
  condition: v.optional(fields.condition, null),
  approval: v.optional(fields.approval, null),
  mode: v.optional(fields.mode, 'enforce'),
  enabled: v.optional(fields.enabled, true),
  limits: v.optional(fields.limits, []),
}

const READ_ONLY = ['policy_id', 'version', 'archived', 'archived_at', 'created_at', 'updated_at', 'created_by', 'ruleset_revision']
/** The pre-governance `conditions` object is gone: say what replaced it rather than "Unknown field". */
const RETIRED = { conditions: CONDITIONS_REPLACED }

/** POST /policies body. Strict: a field the server owns is "read-only", any other unknown field is refused. */
export const PolicyCreateSchema = v.pipe(
  v.strictObject({ organization_id: v.optional(OrganizationIdSchema), ...createEntries }, unknownField(READ_ONLY, { retired: RETIRED })),
  v.title('PolicyCreate'),
)

const DRAFT_NOT_AN_OBJECT = 'A draft must be a JSON object'

/**
 * A draft policy for a replay: a POST /policies body, or, with policy_id, a new version of that
 * stored policy standing in for it.
 */
export const PolicyDraftSchema = v.pipe(
  jsonObject(
    v.strictObject(
      { policy_id: v.optional(v.pipe(v.string('Field policy_id must be a UUID'), v.uuid('Field policy_id must be a UUID'), v.description('A stored policy this draft replaces; omit for a new policy.'))), ...createEntries },
      unknownField(READ_ONLY.filter((field) => field !== 'policy_id'), { notAnObject: DRAFT_NOT_AN_OBJECT, retired: RETIRED }),
    ),
    DRAFT_NOT_AN_OBJECT,
  ),
  v.title('PolicyDraft'),
)

/** PATCH /policies/{policy_id} body: any subset of the writable fields; organization_id is read-only here. */
export const PolicyUpdateSchema = v.pipe(
  v.strictObject(
    {
      name: v.optional(fields.name),
      description: v.optional(fields.description),
      effect: v.optional(fields.effect),
      agents: v.optional(fields.agents),
      actions: v.optional(fields.actions),
      resources: v.optional(fields.resources),
      condition: v.optional(fields.condition),
      approval: v.optional(fields.approval),
      mode: v.optional(fields.mode),
      enabled: v.optional(fields.enabled),
      limits: v.optional(fields.limits),
    },
    unknownField([...READ_ONLY, 'organization_id'], { retired: RETIRED }),
  ),
  v.title('PolicyUpdate'),
)
