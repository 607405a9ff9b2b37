// A whole policy set written at once (POST /policies/apply): archives, changes and creations in
// one transaction with one ruleset revision bump, each policy getting its version row and audit
// event as a single write does. Knows nothing of HTTP or of how the change was worked out.
import type { Kysely } from 'kysely'
import type { AuditBy } from './audit.ts'
import { CapReachedError, lockOrganization, type Cap } from './caps.ts'
import { insertPolicy, listPoliciesInForce, writeVersion, type Policy, type PolicyFields } from './policies.ts'
import { bumpRulesetRevision } from './ruleset.ts'
import type { Database } from '../database/schema.ts'

/** What to write: new policies, new content for policies in force, policies to archive. */
export interface SetChange {
  readonly create: readonly PolicyFields[]
  readonly change: readonly { readonly current: Policy; readonly fields: PolicyFields }[]
  readonly archive: readonly Policy[]
}

export type SetOutcome<C> =
  | { readonly kind: 'refused'; readonly reason: C }
  | { readonly kind: 'unchanged'; readonly inForce: Policy[] }
  | { readonly kind: 'applied'; readonly created: Policy[]; readonly changed: Policy[]; readonly archived: Policy[]; readonly inForce: Policy[]; readonly rulesetRevision: number }

/**
 * Locks the organization's set and asks `decide` what to write given the policies in force.
 * The rows in force are locked first and the organization's row second: the order every single
 * policy write takes (its row, then the revision on the organization's row), so a concurrent
 * PATCH waits or is waited for instead of deadlocking; the set is read again under both locks,
 * so no creation can slip in between the decision and the writes. `decide` answers a refusal
 * (nothing is written) or the change; a cap reached after the writes, or anything thrown, rolls
 * the whole set back.
 */
export async function writePolicySet<C>(
  db: Kysely<Database>,
  organizationId: string,
  decide: (inForce: Policy[]) => SetChange | { refused: C },
  actor: string,
  now: Date,
  by: AuditBy,
  cap: Cap,
): Promise<SetOutcome<C>> {
  return db.transaction().execute(async (trx) => {
    await listPoliciesInForce(trx, organizationId, true)
    await lockOrganization(trx, organizationId)
    const inForce = await listPoliciesInForce(trx, organizationId)
    const change = decide(inForce)
    if ('refused' in change) return { kind: 'refused', reason: change.refused }
    if (change.create.length + change.change.length + change.archive.length === 0) return { kind: 'unchanged', inForce }
    const archived: Policy[] = []
    for (const current of change.archive) archived.push(await writeVersion(trx, current, current, now, actor, now, { by, type: 'policy.archived' }))
    const changed: Policy[] = []
    for (const { current, fields } of change.change) changed.push(await writeVersion(trx, current, fields, null, actor, now, { by, type: 'policy.updated' }))
    const created: Policy[] = []
    for (const fields of change.create) created.push(await insertPolicy(trx, organizationId, fields, actor, now, by))
    const after = await listPoliciesInForce(trx, organizationId)
    // Only growth is refused: a set already over a lowered cap may still be changed or shrunk.
    if (change.create.length > 0 && after.length > Math.max(cap.limit, inForce.length)) throw new CapReachedError(cap.limit, cap.what, cap.setting)
    return { kind: 'applied', created, changed, archived, inForce: after, rulesetRevision: await bumpRulesetRevision(trx, organizationId) }
  })
}
