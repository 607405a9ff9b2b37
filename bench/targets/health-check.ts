// Benchmark baseline, not product code: Steward's GET /health work without Steward, for the bare
// fetch function (bare-fetch.ts), so that it waits for the database exactly as Steward does:
// - one `select 1` against the configured database, bounded by the same 2 s deadline as
//   storage/health.ts;
// - the same coalescing as routes/health.ts: the check under way, and the one queued behind it
//   that every request arriving meanwhile shares; never a cached answer;
// - the same body: {"status":"ok","database":"ok","time":…} or the 503 with Retry-After.
// DATABASE_URL: postgres://… (a pg pool from database/connect.ts), memory:// (in-memory PGlite), or
// unset (no database: every check passes at once).

const CHECK_TIMEOUT_MS = 2000

export interface HealthCheck {
  /** True when the database answered; requests that arrive while a check runs share the next one. */
  check(): Promise<boolean>
  close(): Promise<void>
}

/** The answer Steward gives for a check's outcome: status, body and its extra headers. */
export function healthAnswer(ok: boolean): { status: number; body: string; headers: Record<string, string> } {
  if (ok) return { status: 200, body: JSON.stringify({ status: 'ok', database: 'ok', time: new Date().toISOString() }), headers: { 'cache-control': 'no-store' } }
  return {
    status: 503,
    body: JSON.stringify({ status: 'Service Unavailable', error: 'Database unavailable' }),
    headers: { 'retry-after': '5', 'cache-control': 'no-store' },
  }
}

async function openProbe(url: string | undefined): Promise<{ probe: () => Promise<unknown>; close: () => Promise<void> } | null> {
  if (!url) return null
  if (url === 'memory://' || url === 'memory:') {
    const { PGlite } = await import('@electric-sql/pglite')
    const db = new PGlite()
    await db.waitReady
    return { probe: () => db.query('select 1'), close: () => db.close() }
  }
  const { createPostgresPool } = await import('../../database/connect.ts')
  const { silentLogger } = await import('../../log.ts')
  const pool = await createPostgresPool(url, silentLogger, 10)
  return { probe: () => pool.query('select 1'), close: () => pool.end() }
}

export async function openHealthCheck(url: string | undefined): Promise<HealthCheck> {
  const database = await openProbe(url)
  if (database === null) return { check: () => Promise.resolve(true), close: () => Promise.resolve() }
  const probe = database.probe

  /** The probe bounded by the same deadline as storage/health.ts. */
  const answers = (): Promise<boolean> => {
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), CHECK_TIMEOUT_MS)))
    return Promise.race([probe().then(() => true, () => false), timeout]).finally(() => clearTimeout(timer))
  }
  let running: Promise<boolean> | null = null
  let next: Promise<boolean> | null = null
  const start = (): Promise<boolean> => {
    const check = answers()
    running = check
    void check.then(() => {
      if (running === check) running = null
    })
    return check
  }
  return {
    check() {
      if (running === null) return start()
      next ??= running.then(() => {
        next = null
        return start()
      })
      return next
    },
    close: database.close,
  }
}
