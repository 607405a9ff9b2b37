// Policies: rules governing what an organization's agents may do, and their immutable versions.
// Every query is scoped by the organization, so one tenant can never read or change another's
// rows. Every write (create, change, archive, rollback) happens in one transaction that also
// records the new version and bumps the organization's ruleset revision. Knows nothing of HTTP.
import { sql, type Insertable, type Kysely, type Selectable, type Transaction } from 'kysely'
import type { AuditEventType } from '../domain/audit.ts'
import type { LimitInput } from '../engine/index.ts'
import { eventBy, executeWithEvents, type AuditBy, type AuditEventInput } from './audit.ts'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import { bumpRulesetRevision } from './ruleset.ts'
import type { Database, PolicyTable, PolicyVersionTable } from '../database/schema.ts'

type PolicyRow = Selectable<PolicyTable>
type VersionRow = Selectable<PolicyVersionTable>

export type Effect = PolicyRow['effect']
export type Mode = PolicyRow['mode']

/** The approval block of a require_approval policy, every field filled in. */
export interface Approval {
  approvers_required: number
  approver_roles: string[]
  timeout_seconds: number
  use_within_seconds: number
}

const FIELD_NAMES = ['name', 'description', 'effect', 'agents', 'actions', 'resources', 'condition', 'approval', 'mode', 'enabled', 'limits'] as const
type FieldName = (typeof FIELD_NAMES)[number]

/**
 * What a client may set on a policy (the approval already normalized: null unless
 * require_approval), its JSON columns typed as columnsOf writes them.
 */
export type PolicyFields = Omit<Pick<PolicyRow, FieldName>, 'agents' | 'actions' | 'resources' | 'approval' | 'limits'> & {
  agents: string[]
  actions: string[]
  resources: string[]
  approval: Approval | null
  /** Budgets (docs/budgets.md); [] for none. */
  limits?: LimitInput[]
}

/** A stored policy: the client's fields and those the server owns (not the legacy conditions). */
export type Policy = PolicyFields & Pick<PolicyRow, 'policy_id' | 'organization_id' | 'version' | 'archived_at' | 'created_at' | 'updated_at' | 'created_by'>

/** One immutable version: the policy's content as one write left it, and who wrote it when. */
export type PolicyVersion = PolicyFields & Pick<VersionRow, 'policy_id' | 'organization_id' | 'version' | 'archived' | 'created_at' | 'created_by'>

/** A committed write: the policy as it now stands and the organization's new ruleset revision. */
export interface PolicyWrite {
  policy: Policy
  rulesetRevision: number
}

/** Position after which the next page starts (keyset pagination on created_at, policy_id). */
export interface PolicyCursor {
  createdAt: Date
  policyId: string
}

type Db = Kysely<Database> | Transaction<Database>

function fieldsOf(row: Omit<Pick<VersionRow, FieldName>, 'limits'> & { limits?: unknown }): PolicyFields {
  return {
    name: row.name,
    description: row.description,
    effect: row.effect,
    agents: row.agents as string[],
    actions: row.actions as string[],
    resources: row.resources as string[],
    condition: row.condition,
    approval: row.approval as Approval | null,
    mode: row.mode,
    enabled: row.enabled,
    limits: ((typeof row.limits === 'string' ? JSON.parse(row.limits) : row.limits) ?? []) as LimitInput[],
  }
}

function toPolicy(row: PolicyRow): Policy {
  return {
    policy_id: row.policy_id,
    organization_id: row.organization_id,
    ...fieldsOf(row),
    version: row.version,
    archived_at: row.archived_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
    created_by: row.created_by,
  }
}

function toVersion(row: VersionRow): PolicyVersion {
  return {
    policy_id: row.policy_id,
    organization_id: row.organization_id,
    ...fieldsOf(row),
    version: row.version,
    archived: row.archived,
    created_at: row.created_at,
    created_by: row.created_by,
  }
}

// jsonb parameters travel as JSON text: pg would otherwise send a JS array as a PostgreSQL array.
function columnsOf(fields: PolicyFields): Pick<Insertable<PolicyTable>, FieldName> {
  return {
    name: fields.name,
    description: fields.description,
    effect: fields.effect,
    agents: JSON.stringify(fields.agents),
    actions: JSON.stringify(fields.actions),
    resources: JSON.stringify(fields.resources),
    condition: fields.condition,
    approval: fields.approval === null ? null : JSON.stringify(fields.approval),
    mode: fields.mode,
    enabled: fields.enabled,
    limits: JSON.stringify(fields.limits ?? []),
  }
}

/**
 * Records the policy row as it now stands as its version `policy.version`, written by `actor`,
 * with the policy's audit event in the same statement.
 */
async function recordVersion(trx: Transaction<Database>, policy: Policy, actor: string, now: Date, event: AuditEventInput): Promise<void> {
  const query = trx
    .insertInto('policy_versions')
    .values({
      ...columnsOf(policy),
      policy_id: policy.policy_id,
      organization_id: policy.organization_id,
      version: policy.version,
      archived: policy.archived_at !== null,
      created_at: now,
      created_by: actor,
    })
    .returning('version')
  await executeWithEvents(trx, query.compile(), [event, ...limitEvents(policy, event)])
}

/** limit.changed beside the policy's event when its limits are written or changed (docs/budgets.md). */
function limitEvents(policy: Policy, event: AuditEventInput): AuditEventInput[] {
  const changed = event.data?.changed as string[] | undefined
  const touched = changed ? changed.includes('limits') : (policy.limits ?? []).length > 0
  if (!touched) return []
  const data = { policy_id: policy.policy_id, version: policy.version, name: policy.name, archived: policy.archived_at !== null, limits: policy.limits ?? [] }
  return [{ ...event, type: 'limit.changed', data }]
}

/** The policy's audit event: what it now is, and (for a change) which fields differ from before. */
function policyEvent(by: AuditBy, type: AuditEventType, policy: Policy, before: Policy | null, extra: Record<string, unknown>, now: Date): AuditEventInput {
  const data: Record<string, unknown> = { policy_id: policy.policy_id, version: policy.version, name: policy.name, effect: policy.effect, mode: policy.mode, enabled: policy.enabled, ...extra }
  if (before) data.changed = FIELD_NAMES.filter((field) => JSON.stringify(before[field]) !== JSON.stringify(policy[field]))
  return eventBy(by, policy.organization_id, type, { type: 'policy', id: policy.policy_id }, data, now)
}

async function assertRoomFor(trx: Transaction<Database>, organizationId: string, cap: Cap | null): Promise<void> {
  if (cap === null) return
  await lockOrganization(trx, organizationId)
  const row = await trx
    .selectFrom('policies')
    .select((eb) => eb.fn.countAll<string>().as('n'))
    .where('organization_id', '=', organizationId)
    .where('archived_at', 'is', null)
    .executeTakeFirstOrThrow()
  assertBelowCap(Number(row.n), cap)
}

/**
 * Creates a policy at version 1. With a cap, the organization is locked while its policies in
 * force (archived ones do not count) are counted, so parallel creations cannot overshoot it.
 */
export async function createPolicy(
  db: Kysely<Database>,
  organizationId: string,
  fields: PolicyFields,
  createdBy: string,
  now: Date,
  by: AuditBy,
  cap: Cap | null = null,
): Promise<PolicyWrite> {
  return db.transaction().execute(async (trx) => {
    await assertRoomFor(trx, organizationId, cap)
    const policy = await insertPolicy(trx, organizationId, fields, createdBy, now, by)
    return { policy, rulesetRevision: await bumpRulesetRevision(trx, organizationId) }
  })
}

/**
 * Inserts a policy at version 1 with its version row and audit event, inside the caller's
 * transaction; the caller bumps the ruleset revision (once for a whole set: storage/policy-sets.ts).
 */
export async function insertPolicy(trx: Transaction<Database>, organizationId: string, fields: PolicyFields, createdBy: string, now: Date, by: AuditBy): Promise<Policy> {
  const row = await trx
    .insertInto('policies')
    .values({
      ...columnsOf(fields),
      policy_id: crypto.randomUUID(),
      organization_id: organizationId,
      version: 1,
      created_at: now,
      updated_at: now,
      created_by: createdBy,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  const policy = toPolicy(row)
  await recordVersion(trx, policy, createdBy, now, policyEvent(by, 'policy.created', policy, null, {}, now))
  return policy
}

/** A page of the organization's policies in force (or, with `archived`, of its archived ones), oldest first. */
export async function listPolicies(
  db: Kysely<Database>,
  organizationId: string,
  page: { after: PolicyCursor | null; limit: number; archived?: boolean },
): Promise<Policy[]> {
  const after = page.after
  const afterCursor = after
    ? sql` and ("created_at" > ${after.createdAt} or ("created_at" = ${after.createdAt} and "policy_id" > ${after.policyId}))`
    : sql``
  const archived = page.archived ? sql` and "archived_at" is not null` : sql` and "archived_at" is null`
  const { rows } = await sql<PolicyRow>`select * from "policies" where "organization_id" = ${organizationId}${archived}${afterCursor} order by "created_at", "policy_id" limit ${page.limit}`.execute(db)
  return rows.map(toPolicy)
}

/**
 * Every policy of the organization that is not archived (at most the policy cap), oldest first;
 * with `lock`, their rows stay locked until the transaction ends (always in this order, so two
 * lockers of one set take turns instead of deadlocking).
 */
export async function listPoliciesInForce(db: Db, organizationId: string, lock = false): Promise<Policy[]> {
  const query = db
    .selectFrom('policies')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('archived_at', 'is', null)
    .orderBy('created_at')
    .orderBy('policy_id')
  const rows = await (lock ? query.forUpdate() : query).execute()
  return rows.map(toPolicy)
}

/** A policy of the organization, archived or not; null when it has none with that id. */
export async function findPolicy(db: Db, organizationId: string, policyId: string): Promise<Policy | null> {
  const row = await db.selectFrom('policies').selectAll().where('organization_id', '=', organizationId).where('policy_id', '=', policyId).executeTakeFirst()
  return row ? toPolicy(row) : null
}

/** Locks the policy's row until the transaction ends: writes to one policy take turns. */
async function lockPolicy(trx: Transaction<Database>, organizationId: string, policyId: string): Promise<Policy | null> {
  const row = await trx
    .selectFrom('policies')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('policy_id', '=', policyId)
    .forUpdate()
    .executeTakeFirst()
  return row ? toPolicy(row) : null
}

/** Writes the next version of a locked policy: new content, archived or not, one more version. */
async function writeNextVersion(
  trx: Transaction<Database>,
  current: Policy,
  fields: PolicyFields,
  archivedAt: Date | null,
  actor: string,
  now: Date,
  event: { by: AuditBy; type: AuditEventType; extra?: Record<string, unknown> },
): Promise<PolicyWrite> {
  const policy = await writeVersion(trx, current, fields, archivedAt, actor, now, event)
  return { policy, rulesetRevision: await bumpRulesetRevision(trx, current.organization_id) }
}

/** `writeNextVersion` without the revision bump, for a caller that bumps once for many writes. */
export async function writeVersion(
  trx: Transaction<Database>,
  current: Policy,
  fields: PolicyFields,
  archivedAt: Date | null,
  actor: string,
  now: Date,
  event: { by: AuditBy; type: AuditEventType; extra?: Record<string, unknown> },
): Promise<Policy> {
  const row = await trx
    .updateTable('policies')
    .set({ ...columnsOf(fields), archived_at: archivedAt, updated_at: now, version: current.version + 1 })
    .where('organization_id', '=', current.organization_id)
    .where('policy_id', '=', current.policy_id)
    .returningAll()
    .executeTakeFirstOrThrow()
  const policy = toPolicy(row)
  await recordVersion(trx, policy, actor, now, policyEvent(event.by, event.type, policy, event.type === 'policy.archived' ? null : current, event.extra ?? {}, now))
  return policy
}

export type UpdateOutcome = PolicyWrite | 'missing' | 'archived'

/**
 * Changes a policy: `change` gets the current content under the row lock and returns the new
 * content (it may throw to refuse, which rolls everything back). Concurrent changes of one policy
 * take turns, so their versions are consecutive. An archived policy is not changed.
 */
export async function updatePolicy(
  db: Kysely<Database>,
  organizationId: string,
  policyId: string,
  change: (current: Policy) => PolicyFields,
  actor: string,
  now: Date,
  by: AuditBy,
): Promise<UpdateOutcome> {
  return db.transaction().execute(async (trx) => {
    const current = await lockPolicy(trx, organizationId, policyId)
    if (!current) return 'missing'
    if (current.archived_at !== null) return 'archived'
    return writeNextVersion(trx, current, change(current), null, actor, now, { by, type: 'policy.updated' })
  })
}

export type ArchiveOutcome = PolicyWrite | 'missing' | 'already-archived'

/** Archives a policy: it stops applying; it and its versions stay readable. */
export async function archivePolicy(db: Kysely<Database>, organizationId: string, policyId: string, actor: string, now: Date, by: AuditBy): Promise<ArchiveOutcome> {
  return db.transaction().execute(async (trx) => {
    const current = await lockPolicy(trx, organizationId, policyId)
    if (!current) return 'missing'
    if (current.archived_at !== null) return 'already-archived'
    return writeNextVersion(trx, current, current, now, actor, now, { by, type: 'policy.archived' })
  })
}

export type RollbackOutcome = PolicyWrite | 'missing' | 'no-version'

/**
 * Writes a new version whose content (archived or not included) equals version `version`. Bringing
 * an archived policy back into force counts against the cap like a creation.
 */
export async function rollbackPolicy(
  db: Kysely<Database>,
  organizationId: string,
  policyId: string,
  version: number,
  actor: string,
  now: Date,
  by: AuditBy,
  cap: Cap | null = null,
): Promise<RollbackOutcome> {
  return db.transaction().execute(async (trx) => {
    const current = await lockPolicy(trx, organizationId, policyId)
    if (!current) return 'missing'
    const target = await findPolicyVersion(trx, organizationId, policyId, version)
    if (!target) return 'no-version'
    if (current.archived_at !== null && !target.archived) await assertRoomFor(trx, organizationId, cap)
    const archivedAt = target.archived ? (current.archived_at ?? now) : null
    return writeNextVersion(trx, current, fieldsOf(target), archivedAt, actor, now, {
      by,
      type: 'policy.rolled_back',
      extra: { from_version: current.version, to_content_of_version: version, archived: archivedAt !== null },
    })
  })
}

/** Versions of a policy, newest first, those below `before` when given. */
export async function listPolicyVersions(
  db: Kysely<Database>,
  organizationId: string,
  policyId: string,
  page: { before: number | null; limit: number },
): Promise<PolicyVersion[]> {
  let query = db
    .selectFrom('policy_versions')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('policy_id', '=', policyId)
  if (page.before !== null) query = query.where('version', '<', page.before)
  const rows = await query.orderBy('version', 'desc').limit(page.limit).execute()
  return rows.map(toVersion)
}

export async function findPolicyVersion(db: Db, organizationId: string, policyId: string, version: number): Promise<PolicyVersion | null> {
  const row = await db
    .selectFrom('policy_versions')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('policy_id', '=', policyId)
    .where('version', '=', version)
    .executeTakeFirst()
  return row ? toVersion(row) : null
}
