// PostgreSQL LISTEN/NOTIFY: a payload sent on a channel reaches every connection listening on it,
// so processes sharing one database hear of each other's changes. What a channel carries is its
// sender's business (services/credential-feed.ts, storage/approvals.ts).
import { sql, type Kysely, type Transaction } from 'kysely'
import type pg from 'pg'
import type { Logger } from '../log.ts'
import type { Database } from './schema.ts'

/** A channel name goes into LISTEN as an identifier: plain lower-case names only. */
const CHANNEL_NAME = /^[a-z_][a-z0-9_]*$/

/** Sends `payload` on `channel`; inside a transaction it is delivered on commit, and not at all on rollback. */
export async function notify(db: Kysely<Database> | Transaction<Database>, channel: string, payload: string): Promise<void> {
  await sql`select pg_notify(${channel}, ${payload})`.execute(db)
}

export interface NotificationFeed {
  /** True while the LISTEN is up: only then is nothing sent on the channel missed. */
  subscribed(): boolean
  close(): Promise<void>
}

export interface NotificationHandlers {
  /** Each payload heard on the channel. */
  onMessage(payload: string): void
  /** The connection was lost: whatever was sent meanwhile was missed. */
  onLoss(): void
  /** Logged as a warning on each loss (with its reason). */
  readonly lossMessage: string
}

const RECONNECT_MS = 1_000

/**
 * A dedicated connection LISTENing on one channel. On loss `onLoss` runs and it reconnects until
 * close(); a subscriber that keeps state learned from the channel drops it there.
 */
export function startNotificationFeed(url: string, channel: string, logger: Logger, handlers: NotificationHandlers): NotificationFeed {
  if (!CHANNEL_NAME.test(channel)) throw new Error(`not a channel name: ${channel}`)
  const { onMessage, onLoss, lossMessage } = handlers
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
      if (message.channel === channel && message.payload) onMessage(message.payload)
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
