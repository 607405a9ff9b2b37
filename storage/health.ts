// The database health check: one round trip, bounded by its own deadline.
import { sql, type Kysely } from 'kysely'
import type { Database } from './schema.ts'

/** True when the database answers `select 1` within `timeoutMs` (even when the pool is exhausted). */
export async function databaseAnswers(db: Kysely<Database>, timeoutMs: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))
  try {
    return await Promise.race([sql`select 1`.execute(db).then(() => true, () => false), timeout])
  } finally {
    clearTimeout(timer)
  }
}
