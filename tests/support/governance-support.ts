// Shared setup for the agent and decision tests: policies written straight to the database (with
// the ruleset revision bumped in the same transaction, as every policy change must), and a
// decision helper.
import { sql, type Kysely } from 'kysely'
import { bumpRulesetRevision } from '../../storage/ruleset.ts'
import type { Database } from '../../database/schema.ts'
import { jsonOf, type ProductApp } from './product-support.ts'

export interface PolicySpec {
  name?: string
  effect: 'allow' | 'deny' | 'require_approval'
  agents?: string[]
  actions: string[]
  resources?: string[]
  condition?: string | null
  mode?: 'enforce' | 'monitor'
  enabled?: boolean
}

/** Inserts a policy (version 1) and bumps the revision in one transaction; returns its id and the revision. */
export async function insertPolicy(db: Kysely<Database>, organizationId: string, spec: PolicySpec, at: Date): Promise<{ policy_id: string; revision: number }> {
  const policyId = crypto.randomUUID()
  return db.transaction().execute(async (trx) => {
    await sql`insert into policies (policy_id, organization_id, name, description, effect, agents, actions, resources, legacy_conditions, condition, mode, enabled, version, created_at, updated_at, created_by)
      values (${policyId}, ${organizationId}, ${spec.name ?? spec.effect + ' ' + spec.actions.join(',')}, '', ${spec.effect}, ${JSON.stringify(spec.agents ?? ['*'])}::jsonb,
        ${JSON.stringify(spec.actions)}::jsonb, ${JSON.stringify(spec.resources ?? ['*'])}::jsonb, null, ${spec.condition ?? null}, ${spec.mode ?? 'enforce'}, ${spec.enabled ?? true}, 1, ${at}, ${at}, 'operator')`.execute(trx)
    const revision = await bumpRulesetRevision(trx, organizationId)
    return { policy_id: policyId, revision }
  })
}

/** Disables every policy of the organization (and bumps the revision). */
export async function disableAllPolicies(db: Kysely<Database>, organizationId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx.updateTable('policies').set({ enabled: false }).where('organization_id', '=', organizationId).execute()
    await bumpRulesetRevision(trx, organizationId)
  })
}

export async function decide(app: ProductApp, token: string, body: unknown): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await app.call('POST', '/decisions', { token, json: body })
  return { status: res.status, body: await jsonOf(res), headers: res.headers }
}

export async function countRows(db: Kysely<Database>, table: 'decisions' | 'agents' | 'decision_idempotency', organizationId: string): Promise<number> {
  const row = await db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', organizationId).executeTakeFirstOrThrow()
  return Number(row.n)
}
