// Frozen in time: never import application code here.
// An index in the order the sealer (and the verifier) read decisions: one organization's rows of a
// transaction-id range by (xid, decision_id), a page at a time. With only (organization_id, xid)
// every page sorted all the range's rows first. Made on the partitioned parent, so every partition,
// present and future, gets its own. It supersedes decisions_xid (its leading columns).
import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index decisions_seal_order on decisions (organization_id, xid, decision_id)`.execute(db)
  await sql`drop index decisions_xid`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index decisions_xid on decisions (organization_id, xid)`.execute(db)
  await sql`drop index decisions_seal_order`.execute(db)
}
