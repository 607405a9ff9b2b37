// The ruleset revision: a counter on the organization row, bumped in the same transaction as
// any change to its policies, its agents or its decision settings. A compiled policy set is
// cached under (organization, revision); a decision reads the current revision with the agent
// in its first query, so no process can decide with a set older than the last committed change.
import { sql, type Kysely, type Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'

/** Bumps and returns the organization's revision; call inside the transaction that makes the change. */
export async function bumpRulesetRevision(trx: Transaction<Database> | Kysely<Database>, organizationId: string): Promise<number> {
  const row = await trx
    .updateTable('organizations')
    .set({ ruleset_revision: sql<number>`ruleset_revision + 1` })
    .where('id', '=', organizationId)
    .returning('ruleset_revision')
    .executeTakeFirstOrThrow()
  return row.ruleset_revision
}
