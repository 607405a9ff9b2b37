// Per-organization caps (keys, policies, members and invitations, agents). Counting and inserting
// happen under a lock on the organization's row, so parallel creations cannot all pass a check
// made before any of them inserted. Knows nothing of HTTP: routes turn CapReachedError into 409.
import type { Kysely, Transaction } from 'kysely'
import type { Database } from '../database/schema.ts'

export class CapReachedError extends Error {
  override name = 'CapReachedError'
  constructor(
    readonly limit: number,
    readonly what: string,
    readonly setting: string,
  ) {
    super(`This organization has reached its limit of ${limit} ${what} (${setting})`)
  }
}

/** A cap to hold: the limit, what is counted (plural, for the message) and the setting's name. */
export interface Cap {
  readonly limit: number
  readonly what: string
  readonly setting: string
}

/**
 * Takes the organization's row lock until the transaction ends: every capped creation in the
 * organization goes through here, so count-then-insert is serialized per organization.
 * `select … for update` behaves the same on PostgreSQL and PGlite.
 */
export async function lockOrganization(trx: Transaction<Database> | Kysely<Database>, organizationId: string): Promise<boolean> {
  const row = await trx.selectFrom('organizations').select('id').where('id', '=', organizationId).forUpdate().executeTakeFirst()
  return row !== undefined
}

/** Throws CapReachedError when one more would exceed the cap. */
export function assertBelowCap(count: number, cap: Cap): void {
  if (count >= cap.limit) throw new CapReachedError(cap.limit, cap.what, cap.setting)
}
