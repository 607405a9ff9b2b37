// Rate limits counted across every process sharing one PostgreSQL database, with no database
// round trip on the request path: each process counts locally (services/ratelimit.ts) and, every
// `intervalMs`, adds its deltas to `rate_limit_counters` in one batched upsert whose RETURNING
// gives the global totals back; each window then decides on local + others' counts.
//
// Bounded overshoot: a process learns the others' counts for a key at its next sync, so with N
// processes the requests admitted in one window are at most
//   limit + (N − 1) × (requests one process admits for that key in one sync interval + round trip),
// and never more than N × limit (each process still stops at `limit` on its own count). A process
// learns a key's global count when it syncs its own requests on it, and at every sync once the key
// has used half its limit anywhere (hot keys are pushed to all processes), so a client switching
// to a fresh process past half its quota is refused at once.
// With the default 250 ms interval and a client spread over two processes, that is a few requests.
import { sql, type Kysely, type Selectable } from 'kysely'
import type { Logger } from '../log.ts'
import type { Database, RateLimitCounterTable } from '../database/schema.ts'

/**
 * The sharing contract between a process-local limiter (services/ratelimit.ts) and this store.
 * One key's counts not yet shared, drained by a sync. */
export interface PendingCount {
  readonly key: string
  /** Window start, ms since the epoch. */
  readonly start: number
  /** Requests counted here since the last drain. */
  readonly delta: number
  /** Everything counted here in this window, including `delta`. */
  readonly local: number
}

/** A limiter's side of the sharing: the sync drains deltas and merges back global totals. */
export interface SharedCounters {
  readonly name: string
  readonly windowMs: number
  /** Keys whose global count reaches this are pushed to every process, even ones not using them yet. */
  readonly hot: number
  drain(): PendingCount[]
  /** The global total the store reported after adding a drained delta. */
  merge(pending: PendingCount, global: number): void
  /** A drained delta could not be stored: count it again at the next drain. */
  restore(pending: PendingCount): void
  /** The global count of a hot key in the current window, whether or not this process saw it. */
  preload(key: string, start: number, global: number): void
}

export interface RateLimitSync {
  attach(counters: SharedCounters): void
}

const DEFAULT_SYNC_INTERVAL_MS = 250
/** Rows per upsert statement. */
const BATCH = 1000
/** Expired windows are deleted this often. */
const CLEANUP_EVERY_MS = 60_000

export interface RateLimitStore extends RateLimitSync {
  /** Starts the timer that shares counts every interval; nothing is shared before. */
  start(): void
  /** Shares every pending delta now (also run by the timer). */
  flush(): Promise<void>
  /** Stops the timer after a last flush. */
  close(): Promise<void>
}

export function createRateLimitStore(
  db: Kysely<Database>,
  options: { intervalMs?: number; logger?: Logger; clock?: () => number } = {},
): RateLimitStore {
  const intervalMs = options.intervalMs ?? DEFAULT_SYNC_INTERVAL_MS
  const clock = options.clock ?? Date.now
  const attached: SharedCounters[] = []
  let running: Promise<void> | null = null
  let lastCleanup = 0
  let failing = false
  let timer: ReturnType<typeof setInterval> | null = null

  async function share(counters: SharedCounters, pending: PendingCount[]): Promise<void> {
    for (let i = 0; i < pending.length; i += BATCH) {
      const batch = pending.slice(i, i + BATCH)
      try {
        const { rows } = await sql<Pick<Selectable<RateLimitCounterTable>, 'key' | 'window_start' | 'count'>>`
          insert into rate_limit_counters (limiter, key, window_start, count, expires_at)
          select ${counters.name}, k, s, c, s + ${counters.windowMs}::bigint
          from unnest(${batch.map((p) => p.key)}::text[], ${batch.map((p) => p.start)}::bigint[], ${batch.map((p) => p.delta)}::int[]) as t(k, s, c)
          on conflict (limiter, key, window_start) do update set count = rate_limit_counters.count + excluded.count
          returning key, window_start, count`.execute(db)
        const byKey = new Map<string, number>()
        for (const row of rows) byKey.set(`${row.key}\u0000${Number(row.window_start)}`, Number(row.count))
        for (const p of batch) {
          const global = byKey.get(`${p.key}\u0000${p.start}`)
          if (global !== undefined) counters.merge(p, global)
        }
        if (failing) options.logger?.log('info', 'rate-limit sync recovered')
        failing = false
      } catch (error) {
        for (const p of batch) counters.restore(p)
        if (!failing) options.logger?.log('warn', 'rate-limit sync failed; counting locally until it recovers', { code: (error as { code?: string }).code ?? null })
        failing = true
      }
    }
  }

  async function syncOnce(): Promise<void> {
    const now = clock()
    for (const counters of attached) {
      const pending = counters.drain()
      if (pending.length > 0) await share(counters, pending)
    }
    await learnHotKeys(now)
    if (now - lastCleanup >= CLEANUP_EVERY_MS) {
      lastCleanup = now
      await db.deleteFrom('rate_limit_counters').where('expires_at', '<', now - CLEANUP_EVERY_MS).execute().catch(() => {})
    }
  }

  /**
   * Keys past half their limit anywhere: every process learns them, used here yet or not. One
   * statement for every limiter of the store (each in its own current window), not one each: a
   * sync runs four times a second in every process, idle or not, and this is all an idle one sends.
   */
  async function learnHotKeys(now: number): Promise<void> {
    if (attached.length === 0) return
    const windows = attached.map((counters) => ({ counters, start: now - (now % counters.windowMs) }))
    try {
      const hot = await db
        .selectFrom('rate_limit_counters')
        .select(['limiter', 'key', 'window_start', 'count'])
        .where((eb) =>
          eb.or(windows.map(({ counters, start }) => eb.and([eb('limiter', '=', counters.name), eb('window_start', '=', start), eb('count', '>=', counters.hot)]))),
        )
        .limit(10_000 * windows.length)
        .execute()
      // Several limiters may share a name (and so its rows): each takes the rows of its own window.
      for (const row of hot) {
        const count = Number(row.count)
        for (const { counters, start } of windows) {
          if (counters.name === row.limiter && start === Number(row.window_start) && count >= counters.hot) counters.preload(row.key, start, count)
        }
      }
    } catch {
      // Counting goes on locally; the next sync tries again.
    }
  }

  const flush = (): Promise<void> => {
    // One sync at a time; a flush during a sync waits for it, then runs its own.
    const previous = running ?? Promise.resolve()
    const next = previous.then(syncOnce).finally(() => {
      if (running === next) running = null
    })
    running = next
    return next
  }

  return {
    attach(counters) {
      attached.push(counters)
    },
    start() {
      if (timer !== null) return
      timer = setInterval(() => {
        if (running === null) void flush()
      }, intervalMs)
      timer.unref?.()
    },
    flush,
    async close() {
      if (timer !== null) clearInterval(timer)
      timer = null
      await flush()
    },
  }
}
