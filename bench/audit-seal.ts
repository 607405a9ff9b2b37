// Seal lag under load: decisions are written at RATE per second (direct multi-row inserts into the
// decisions table, not POST /decisions: this measures the sealer, not the API) plus one audit
// event per batch, for SECONDS, on PostgreSQL, while the background sealer of storage/audit-seal.ts
// runs every AUDIT_SEAL_INTERVAL_MS as a server's start() runs it. The seal lag of a batch is the
// time from its commit to the first moment a seal covering its transaction id is visible (polled
// every 10 ms). Goal: p99 at most 2 s.
//
//   node --import tsx bench/audit-seal.ts     (BENCH_DATABASE_URL or TEST_DATABASE_URL,
//                                              else postgres://postgres@127.0.0.1:5432/test)
// RATE (5000), SECONDS (20), BATCH (100 rows per insert), AUDIT_SEAL_INTERVAL_MS (500, the server default), ORGS (100 idle).
import os from 'node:os'
import { sql } from 'kysely'
import { startAuditSealer } from '../jobs/audit-seal.ts'
import { verifyChain } from '../services/audit-verify.ts'
import { insertDecisionBatch, openSealWorld } from './seal-world.ts'

const RATE = Number(process.env.RATE ?? 5000)
const SECONDS = Number(process.env.SECONDS ?? 20)
const BATCH = Number(process.env.BATCH ?? 100)
const INTERVAL = Number(process.env.AUDIT_SEAL_INTERVAL_MS ?? 500)
const ORGS = Number(process.env.ORGS ?? 100)
const world = await openSealWorld('steward_seal', 10, ORGS)
try {
  const db = world.db

  /** Batches committed: their transaction id and when the commit returned. */
  const committed: { xid: number; at: number }[] = []
  const insertBatch = async () => {
    const at = new Date()
    const xid = await db.transaction().execute(async (trx) => {
      await insertDecisionBatch(trx, world, BATCH, at)
      const { rows } = await sql<{ xid: string }>`select pg_current_xact_id()::text as xid`.execute(trx)
      return Number(rows[0]!.xid)
    })
    committed.push({ xid, at: Date.now() })
  }

  // Observe the newest seal's xid_to every 10 ms.
  const observed: { xidTo: number; at: number }[] = []
  let observing = true
  const observer = (async () => {
    let last = 0
    while (observing) {
      const row = await db.selectFrom('audit_seals').select('xid_to').where('organization_id', '=', world.organizationId).orderBy('seal_id', 'desc').limit(1).executeTakeFirst()
      const xidTo = row ? Number(row.xid_to) : 0
      if (xidTo > last) observed.push({ xidTo, at: Date.now() })
      last = xidTo
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()

  const sealer = startAuditSealer(db, Date.now, INTERVAL, (error) => console.error('sealing failed', error))
  const batchesPerSecond = RATE / BATCH
  const start = Date.now()
  const inFlight = new Set<Promise<void>>()
  for (let i = 0; i < SECONDS * batchesPerSecond; i++) {
    const due = start + (i * 1000) / batchesPerSecond
    const wait = due - Date.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    const p = insertBatch().finally(() => inFlight.delete(p))
    inFlight.add(p)
    if (inFlight.size >= 8) await Promise.race(inFlight)
  }
  await Promise.all(inFlight)
  const writeSeconds = (Date.now() - start) / 1000
  // Let the sealer catch up with the last batches.
  const lastXid = Math.max(...committed.map((c) => c.xid))
  while (!observed.some((o) => o.xidTo > lastXid) && Date.now() - start < (SECONDS + 30) * 1000) await new Promise((resolve) => setTimeout(resolve, 20))
  await sealer.stop()
  observing = false
  await observer

  const lags = committed.map((c) => {
    const seen = observed.find((o) => o.xidTo > c.xid)
    return seen ? seen.at - c.at : Number.POSITIVE_INFINITY
  })
  lags.sort((a, b) => a - b)
  const pct = (p: number) => lags[Math.min(lags.length - 1, Math.floor((p / 100) * lags.length))]!
  const seals = await db.selectFrom('audit_seals').select([db.fn.countAll<string>().as('n'), db.fn.max('decisions').as('max')]).where('organization_id', '=', world.organizationId).executeTakeFirstOrThrow()
  const verifyStart = Date.now()
  const verified = await verifyChain(db, world.organizationId)
  const verifyMs = Date.now() - verifyStart
  const rows = committed.length * BATCH
  console.log(`Node ${process.version}, ${os.cpus().length} CPUs (load average ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}), local PostgreSQL`)
  console.log(`${rows.toLocaleString('en-US')} decisions (direct ${BATCH}-row inserts, one audit event each) in ${writeSeconds.toFixed(1)} s = ${Math.round(rows / writeSeconds).toLocaleString('en-US')}/s; ${ORGS} idle organizations; sealer every ${INTERVAL} ms`)
  console.log(`seals: ${seals.n} (largest ${seals.max} decisions); seal lag from commit to covering seal: p50 ${pct(50)} ms, p99 ${pct(99)} ms, max ${lags[lags.length - 1]} ms (goal p99 ≤ 2000 ms)`)
  console.log(`verify: ${verified.ok ? 'ok' : `FAILED ${JSON.stringify(verified)}`}, ${verified.ok ? `${verified.decisions.toLocaleString('en-US')} decisions, ${verified.events.toLocaleString('en-US')} events` : ''} in ${verifyMs} ms`)
} finally {
  await world.close()
}
