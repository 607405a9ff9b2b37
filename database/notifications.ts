// Cross-process news of credential changes: servers sharing one PostgreSQL LISTEN on this
// channel and drop cached lookups of the id (a key, a session family or a user) they hear.
import { sql, type Kysely } from 'kysely'
import type pg from 'pg'
import type { Logger } from '../log.ts'
import type { Database } from './schema.ts'

/** Payloads are UUIDs, unique across schemas and databases. */
const REVOCATION_CHANNEL = 'steward_credentials'

export async function notifyCredentialChange(db: Kysely<Database>, id: string): Promise<void> {
  await sql`select pg_notify(${REVOCATION_CHANNEL}, ${id})`.execute(db)
}

export interface RevocationFeed {
  /** True while the LISTEN is up: only then may a process cache positive lookups. */
  subscribed(): boolean
  close(): Promise<void>
}

const RECONNECT_MS = 1_000

/**
 * A dedicated connection LISTENing for revocations from other processes. On loss the cache is
 * flushed and stays off until the subscription is back, so no entry can outlive a revoke that
 * happened while we were deaf.
 */
export function startRevocationFeed(url: string, logger: Logger, onRevoked: (id: string) => void, onLoss: () => void): RevocationFeed {
  return startNotificationFeed(url, REVOCATION_CHANNEL, logger, onRevoked, onLoss, 'revocation feed lost; credential cache off until it is back')
}

/**
 * A dedicated connection LISTENing on one channel: `onMessage` gets each payload; `onLoss` runs
 * when the connection is lost (whatever was sent meanwhile was missed), and it reconnects.
 */
export function startNotificationFeed(url: string, channel: string, logger: Logger, onRevoked: (id: string) => void, onLoss: () => void, lossMessage: string): RevocationFeed {
  let client: pg.Client | null = null
  let subscribed = false
  let closed = false
  let timer: ReturnType<typeof setTimeout> | null = null

  const lost = (reason: string) => {
    if (!subscribed && client === null) return
    subscribed = false
    onLoss()
    const old = client
    client = null
    old?.removeAllListeners()
    old?.on('error', () => {})
    void old?.end().catch(() => {})
    if (!closed) {
      logger.log('warn', lossMessage, { reason })
      schedule()
    }
  }

  const schedule = () => {
    if (closed || timer) return
    timer = setTimeout(() => {
      timer = null
      void connect()
    }, RECONNECT_MS)
    timer.unref?.()
  }

  const connect = async () => {
    if (closed) return
    // Loaded here, not with the server: only PostgreSQL has a feed to listen to.
    const { default: pg } = await import('pg')
    if (closed) return
    const next = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000, keepAlive: true })
    client = next
    next.on('error', (error: Error & { code?: string }) => lost(error.code ?? 'error'))
    next.on('end', () => lost('end'))
    next.on('notification', (message) => {
      if (message.channel === channel && message.payload) onRevoked(message.payload)
    })
    try {
      await next.connect()
      await next.query(`LISTEN ${channel}`)
      if (closed || client !== next) {
        await next.end().catch(() => {})
        return
      }
      subscribed = true
    } catch (error) {
      if (client === next) lost((error as { code?: string }).code ?? 'connect failed')
      else schedule()
    }
  }

  void connect()
  return {
    subscribed: () => subscribed,
    async close() {
      closed = true
      subscribed = false
      if (timer) clearTimeout(timer)
      const old = client
      client = null
      if (old) {
        old.removeAllListeners()
        old.on('error', () => {})
        await old.end().catch(() => {})
      }
    },
  }
}
