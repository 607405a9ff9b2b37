// Autovacuum's job, for the embedded database. PGlite runs PostgreSQL as a single-user backend,
// which has no autovacuum worker, so on a PGlite data directory nothing would ever:
// - ANALYZE: the planner would plan with default estimates forever. It then read a page of the
//   audit sealer (the next 100 decisions of an organization) by sorting every decision of the
//   range instead of walking the index: 190 µs per row read against 40 after an ANALYZE, on
//   10,000 decisions (docs/architecture.md, Start and close).
// - VACUUM: dead rows (every update of rate-limit counters, key last-use, agents' last_seen_at...)
//   would only be reclaimed by page pruning, and transaction ids would never be frozen. A
//   single-user backend does not stop at the wraparound limit as a server does; after about two
//   billion transactions old rows would seem to come from the future and vanish from queries.
//
// So a server on PGlite runs this: ANALYZE of every table of its schema 30 s after start and then
// every hour, VACUUM of every table (the system catalogs too) 5 minutes after start and then once
// a day (a server restarted every night still vacuums). One table per statement
// with a turn of the event loop between them: on PGlite every statement holds the only connection,
// and requests get it between two tables. On PostgreSQL its own autovacuum does all of it.
import { sql, type Kysely } from 'kysely'
import { errorCode } from '../log.ts'
import type { Database } from '../database/schema.ts'
import { turn } from '../database/turn.ts'

export interface HousekeepingOptions {
  onError(error: unknown, table: string): void
  /** First ANALYZE after start (30 s: out of the way of the first requests). */
  firstDelayMs?: number
  /** First VACUUM after start. */
  firstVacuumDelayMs?: number
  analyzeEveryMs?: number
  vacuumEveryMs?: number
}

export interface Housekeeping {
  /** Runs one pass now (after the one under way, if any); resolves with the tables it went through. */
  run(kind: 'analyze' | 'vacuum'): Promise<string[]>
  stop(): void
  /** Settles when the pass under way (if any) has finished. */
  readonly done: Promise<unknown>
}

/** The tables a pass goes through: the schema's own (leaf partitions, not their parents), and for VACUUM the catalogs. */
async function tablesOf(db: Kysely<Database>, kind: 'analyze' | 'vacuum'): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    select format('%I.%I', n.nspname, c.relname) as name
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'm')
      and (n.nspname = current_schema() or (${kind === 'vacuum'} and n.nspname = 'pg_catalog'))
    order by n.nspname, c.relname`.execute(db)
  return rows.map((row) => row.name)
}

export function startHousekeeping(db: Kysely<Database>, options: HousekeepingOptions): Housekeeping {
  const { onError, firstDelayMs = 30_000, firstVacuumDelayMs = 300_000, analyzeEveryMs = 3_600_000, vacuumEveryMs = 86_400_000 } = options
  let stopped = false
  async function pass(kind: 'analyze' | 'vacuum'): Promise<string[]> {
    const visited: string[] = []
    let tables: string[]
    try {
      tables = await tablesOf(db, kind)
    } catch (error) {
      onError(error, '*')
      return visited
    }
    for (const table of tables) {
      if (stopped) break
      try {
        // VACUUM cannot run inside a transaction block: each is a statement of its own.
        await sql.raw(`${kind} ${table}`).execute(db)
        visited.push(table)
      } catch (error) {
        // A table dropped meanwhile (an old decision partition) is not worth a warning.
        if (errorCode(error) !== '42P01') onError(error, table)
      }
      await turn()
    }
    return visited
  }
  // One pass at a time, in order.
  let done: Promise<unknown> = Promise.resolve()
  const run = (kind: 'analyze' | 'vacuum') => {
    const next = done.then(() => pass(kind))
    done = next
    return next
  }
  // Each kind: a first pass after `firstMs`, then one every `everyMs`. Unref'd: they never keep a process alive.
  const timers: ReturnType<typeof setInterval>[] = []
  const schedule = (kind: 'analyze' | 'vacuum', firstMs: number, everyMs: number) => {
    const first = setTimeout(() => {
      void run(kind)
      const every = setInterval(() => void run(kind), everyMs)
      every.unref?.()
      timers.push(every)
    }, firstMs)
    first.unref?.()
    timers.push(first)
  }
  schedule('analyze', firstDelayMs, analyzeEveryMs)
  schedule('vacuum', firstVacuumDelayMs, vacuumEveryMs)
  return {
    run,
    stop() {
      stopped = true
      // One list for both kinds of timer: clearInterval clears a timeout too (one pool of timer ids).
      for (const timer of timers.splice(0)) clearInterval(timer)
    },
    get done() {
      return done
    },
  }
}
