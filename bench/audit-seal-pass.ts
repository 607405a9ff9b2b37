// Where one sealing pass spends its time: ROWS decisions (100-row transactions, one audit event
// each) are written for one organization, then the median of REPEAT runs is taken of: reading and
// hashing them all (digestRange, what a seal spends), the canonical JSON of the rows alone, the
// SHA-256 work over that JSON alone, and a pass with nothing new (sealAll over ORGS + 1
// organizations). The reads cost about the first figure less the next two.
//
//   node --import tsx bench/audit-seal-pass.ts   (BENCH_DATABASE_URL or TEST_DATABASE_URL)
// ROWS (5000), REPEAT (5), ORGS (100).
import os from 'node:os'
import { createHash } from 'node:crypto'
import { sql } from 'kysely'
import { canonicalRow, decisionSealJson } from '../engine/seal.ts'
import { digestRange, organizationsToSeal, sealAll } from '../storage/audit-seal.ts'
import { insertDecisionBatch, openSealWorld } from './seal-world.ts'

const ROWS = Number(process.env.ROWS ?? 5000)
const REPEAT = Number(process.env.REPEAT ?? 5)
const ORGS = Number(process.env.ORGS ?? 100)
const world = await openSealWorld('steward_sealpass', 4, ORGS)
const db = world.db
const org = { id: world.organizationId }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const time = async (fn: () => Promise<unknown>) => {
  const runs: number[] = []
  for (let i = 0; i < REPEAT; i++) {
    const start = performance.now()
    await fn()
    runs.push(performance.now() - start)
  }
  return median(runs)
}
try {
  for (let i = 0; i < ROWS / 100; i++) await db.transaction().execute((trx) => insertDecisionBatch(trx, world, 100, new Date()))
  await sql`analyze`.execute(db)
  const to = Number((await sql<{ x: string }>`select pg_snapshot_xmin(pg_current_snapshot())::text as x`.execute(db)).rows[0]!.x)

  // The rows as the sealer reads them (one read, outside the timings below).
  const rows: Record<string, unknown>[] = []
  await db
    .transaction()
    .execute(async (trx) => {
      const { rows: raw } = await sql<Parameters<typeof decisionSealJson>[0]>`select decision_id::text as decision_id, organization_id::text as organization_id,
        agent_id::text as agent_id, agent_handle, action, resource, args, context, args_sha256, decision, policy_decision,
        reasons, monitor, errors, approval_id::text as approval_id, ruleset_revision, requested_by,
        to_char(evaluated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as evaluated_at, xid
      from decisions where organization_id = ${org.id} and xid < ${to} order by xid, decision_id`.execute(trx)
      for (const row of raw) rows.push(decisionSealJson(row))
    })

  const digest = () => digestRange(db, org.id, 0, to)
  const canonical = async () => {
    for (const row of rows) canonicalRow(row)
  }
  const texts = rows.map((row) => canonicalRow(row))
  const hashing = async () => {
    const ordered = createHash('sha256')
    let sum = 0n
    for (const text of texts) {
      ordered.update(text)
      sum = (sum + BigInt(`0x${createHash('sha256').update(text).digest('hex')}`)) % (1n << 256n)
    }
    ordered.digest('hex')
  }
  const idle = () => sealAll(db, new Date())
  // Seal everything first, so the idle pass below finds nothing new. (Transaction ids are the whole
  // cluster's: a transaction open in another database holds the xmin back, and a pass leaves the
  // rows above it for later.)
  for (let i = 0; i < 100 && (await sealAll(db, new Date())).length > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  const idleMs = await time(idle)

  console.log(`Node ${process.version}, ${os.cpus().length} CPUs (load average ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}), local PostgreSQL`)
  console.log(`${rows.length} decisions + ${ROWS / 100} events, median of ${REPEAT}:`)
  const plan = async () => {
    const { rows: lines } = await sql<{ 'QUERY PLAN': string }>`explain select decision_id from decisions where organization_id = ${org.id} and xid >= 0 and xid < ${to}
      order by xid, decision_id limit 1000`.execute(db)
    // The plan's node names, outermost first: "Limit > Incremental Sort > Index Scan …".
    return lines
      .map((line) => line['QUERY PLAN'].trim().replace(/^-> +/, ''))
      .filter((line) => /^[A-Z]/.test(line) && !/^(Sort Key|Presorted Key|Index Cond|Filter):/.test(line))
      .map((line) => line.replace(/ +\(cost=.*$/, '').replace(/ on \S+ \S+$/, ''))
      .join(' > ')
  }
  console.log(`  digestRange (reads + canonical JSON + hashing): ${(await time(digest)).toFixed(1)} ms   [${await plan()}]`)
  // The same with the index this replaced (decisions_xid on organization_id, xid: a sort per page).
  await sql`create index decisions_xid on decisions (organization_id, xid)`.execute(db)
  await sql`drop index decisions_seal_order`.execute(db)
  await sql`analyze decisions`.execute(db)
  console.log(`  the same with the older index only:              ${(await time(digest)).toFixed(1)} ms   [${await plan()}]`)
  console.log(`  canonical JSON of the decisions alone:           ${(await time(canonical)).toFixed(1)} ms`)
  console.log(`  SHA-256 (ordered + per-row set digest) alone:    ${(await time(hashing)).toFixed(1)} ms`)
  const pending = (await organizationsToSeal(db)).length
  console.log(`  idle pass (${ORGS + 1} organizations, ${pending} with rows not sealed yet): ${idleMs.toFixed(1)} ms`)
} finally {
  await world.close()
}
