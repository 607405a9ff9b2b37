// Policies: rules governing what an organization's agents may do. Every query is scoped by the
// organization, so one tenant can never read or change another's rows. Knows nothing of HTTP.
import { sql, type Kysely } from 'kysely'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import type { Database } from './schema.ts'

export type Effect = 'allow' | 'deny' | 'require_approval'
export type Mode = 'enforce' | 'monitor'

/** What a client may set on a policy. */
export interface PolicyFields {
  name: string
  description: string
  effect: Effect
  agents: string[]
  actions: string[]
  resources: string[]
  conditions: Record<string, unknown> | null
  mode: Mode
  enabled: boolean
}

/** A stored policy: the client's fields and those the server owns. */
export interface Policy extends PolicyFields {
  policy_id: string
  organization_id: string
  version: number
  created_at: Date
  updated_at: Date
  created_by: string
}

/** Position after which the next page starts (keyset pagination on created_at, policy_id). */
export interface PolicyCursor {
  createdAt: Date
  policyId: string
}

function toPolicy(row: Record<string, unknown>): Policy {
  return {
    policy_id: row.policy_id as string,
    organization_id: row.organization_id as string,
    name: row.name as string,
    description: row.description as string,
    effect: row.effect as Effect,
    agents: row.agents as string[],
    actions: row.actions as string[],
    resources: row.resources as string[],
    conditions: (row.legacy_conditions as Record<string, unknown> | null) ?? null,
    mode: row.mode as Mode,
    enabled: row.enabled as boolean,
    version: Number(row.version),
    created_at: new Date(row.created_at as Date),
    updated_at: new Date(row.updated_at as Date),
    created_by: row.created_by as string,
  }
}

// jsonb parameters travel as JSON text: pg would otherwise send a JS array as a PostgreSQL array.
function jsonColumns(fields: Partial<PolicyFields>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...fields }
  for (const name of ['agents', 'actions', 'resources'] as const) if (fields[name] !== undefined) out[name] = JSON.stringify(fields[name])
  if (fields.conditions !== undefined) {
    delete out.conditions
    out.legacy_conditions = fields.conditions === null ? null : JSON.stringify(fields.conditions)
  }
  return out
}

/**
 * Creates a policy. With a cap, the organization is locked while its policies are counted, so
 * parallel creations cannot overshoot it.
 */
export async function createPolicy(
  db: Kysely<Database>,
  organizationId: string,
  fields: PolicyFields,
  createdBy: string,
  now: Date,
  cap: Cap | null = null,
): Promise<Policy> {
  if (cap === null) return insertPolicy(db, organizationId, fields, createdBy, now)
  return db.transaction().execute(async (trx) => {
    await lockOrganization(trx, organizationId)
    const row = await trx
      .selectFrom('policies')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('organization_id', '=', organizationId)
      .executeTakeFirstOrThrow()
    assertBelowCap(Number(row.n), cap)
    return insertPolicy(trx, organizationId, fields, createdBy, now)
  })
}

async function insertPolicy(db: Kysely<Database>, organizationId: string, fields: PolicyFields, createdBy: string, now: Date): Promise<Policy> {
  const row = await db
    .insertInto('policies')
    .values({
      ...(jsonColumns(fields) as Omit<Database['policies'], 'policy_id'> & Record<string, never>),
      policy_id: crypto.randomUUID(),
      organization_id: organizationId,
      version: 1,
      created_at: now,
      updated_at: now,
      created_by: createdBy,
    } as never)
    .returningAll()
    .executeTakeFirstOrThrow()
  return toPolicy(row)
}

export async function listPolicies(
  db: Kysely<Database>,
  organizationId: string,
  page: { after: PolicyCursor | null; limit: number },
): Promise<Policy[]> {
  const after = page.after
  const afterCursor = after
    ? sql` and ("created_at" > ${after.createdAt} or ("created_at" = ${after.createdAt} and "policy_id" > ${after.policyId}))`
    : sql``
  const { rows } = await sql<Record<string, unknown>>`select * from "policies" where "organization_id" = ${organizationId}${afterCursor} order by "created_at", "policy_id" limit ${page.limit}`.execute(db)
  return rows.map(toPolicy)
}

export async function findPolicy(db: Kysely<Database>, organizationId: string, policyId: string): Promise<Policy | null> {
  const row = await db.selectFrom('policies').selectAll().where('organization_id', '=', organizationId).where('policy_id', '=', policyId).executeTakeFirst()
  return row ? toPolicy(row) : null
}

/** Applies the changed fields and bumps the version. Null when not in the organization. */
export async function updatePolicy(
  db: Kysely<Database>,
  organizationId: string,
  policyId: string,
  changes: Partial<PolicyFields>,
  now: Date,
): Promise<Policy | null> {
  const row = await db
    .updateTable('policies')
    .set((eb) => ({ ...(jsonColumns(changes) as Record<string, never>), updated_at: now, version: eb('version', '+', 1) }))
    .where('organization_id', '=', organizationId)
    .where('policy_id', '=', policyId)
    .returningAll()
    .executeTakeFirst()
  return row ? toPolicy(row) : null
}

export async function deletePolicy(db: Kysely<Database>, organizationId: string, policyId: string): Promise<boolean> {
  const result = await db.deleteFrom('policies').where('organization_id', '=', organizationId).where('policy_id', '=', policyId).executeTakeFirst()
  return Number(result.numDeletedRows) > 0
}
