// The database health check: one round trip, bounded by its own deadline.
import { CompiledQuery, type Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'

/**
 * Compiled once, not built by the query builder on each check: under load the check runs
 * thousands of times a second (docs/architecture.md).
 */
const SELECT_1 = CompiledQuery.raw('select 1')

/** True when the database answers `select 1` within `timeoutMs` (even when the pool is exhausted). */
export async function databaseAnswers(db: Kysely<Database>, timeoutMs: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))
  try {
    return await Promise.race([db.executeQuery(SELECT_1).then(() => true, () => false), timeout])
  } finally {
    clearTimeout(timer)
  }
}
