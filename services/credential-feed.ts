// Cross-process news of credential changes: servers sharing one PostgreSQL LISTEN on this
// channel and drop cached lookups of the id (a key, a session family, a user or an agent) they
// hear. Sent by the credential service and by the operator commands (cli/provision.ts).
import type { Kysely } from 'kysely'
import { notify, startNotificationFeed, type NotificationFeed } from '../database/notifications.ts'
import type { Database } from '../database/schema.ts'
import type { Logger } from '../log.ts'

/** Payloads are UUIDs, unique across schemas and databases. */
export const CREDENTIALS_CHANNEL = 'steward_credentials'

export async function notifyCredentialChange(db: Kysely<Database>, id: string): Promise<void> {
  await notify(db, CREDENTIALS_CHANNEL, id)
}

/**
 * LISTENs for credential changes made by other processes. On loss the cache is flushed and stays
 * off until the subscription is back, so no entry can outlive a revoke that happened while we
 * were deaf.
 */
export function startRevocationFeed(url: string, logger: Logger, onRevoked: (id: string) => void, onLoss: () => void): NotificationFeed {
  return startNotificationFeed(url, CREDENTIALS_CHANNEL, logger, {
    onMessage: onRevoked,
    onLoss,
    lossMessage: 'revocation feed lost; credential cache off until it is back',
  })
}
