// Cross-process news of credential changes: servers sharing one PostgreSQL LISTEN on this
// channel and drop cached lookups of the id (a key, a session family or a user) they hear.
import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.ts'

/** Payloads are UUIDs, unique across schemas and databases. */
export const REVOCATION_CHANNEL = 'steward_credentials'

export async function notifyCredentialChange(db: Kysely<Database>, id: string): Promise<void> {
  await sql`select pg_notify(${REVOCATION_CHANNEL}, ${id})`.execute(db)
}
