// Approvals, measured over HTTP against real server processes (bench/lib.ts):
// 1. wake-up latency: an agent holds GET /approvals/{id}?wait=60, a signed-in manager approves
//    (POST /approvals/{id}/approve); how long after the approve the waiter's answer arrives, on
//    one process (PGlite, and PostgreSQL if reachable) and across two processes on one PostgreSQL
//    (waiter on server 1, approve on server 2: woken through the NOTIFY feed).
//    Two clocks, both taken in this client: from the approve's response arriving (the commit has
//    happened before the server answers) and from the approve request being sent.
// 2. 5,000 concurrent waiters held on one process: the server's RSS (VmRSS) before and with them,
//    its CPU time (utime+stime) over an idle window with them, and (PostgreSQL) the transactions
//    the database committed in that window (pg_stat_database xact_commit+xact_rollback delta),
//    against the same window with no waiters.
//   node --import tsx bench/approvals.ts            (PostgreSQL: BENCH_DATABASE_URL, else
//   TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test; skipped when unreachable)
// TRIALS (200), WAITERS (5000), IDLE_SECONDS (10). Prints Markdown.
// For the bench only, the connection caps are raised through the environment:
// MAX_CONNECTIONS=20000, MAX_CONNECTIONS_PER_CLIENT=20000 (every waiter comes from 127.0.0.1).
import { readdirSync, readFileSync, rmSync } from 'node:fs'
import { execSync } from 'node:child_process'
import { setMaxListeners } from 'node:events'
import { join } from 'node:path'
import os from 'node:os'
import pg from 'pg'
import { BY_OPERATOR } from '../storage/audit.ts'
import { createScratchDatabase, findPostgres, NO_RATE_LIMITS, startServer, statFields, type ServerProcess } from './lib.ts'

const TRIALS = Number(process.env.TRIALS ?? 200)
const WAITERS = Number(process.env.WAITERS ?? 5000)
// PGlite answers one query at a time: each waiter's first read takes ~15 ms on a loaded 2-core
// machine, so 5,000 would not all be held before the first ones' 60 s ran out.
const WAITERS_PGLITE = Number(process.env.WAITERS_PGLITE ?? 2000)
const IDLE_SECONDS = Number(process.env.IDLE_SECONDS ?? 10)
const PASSWORD = 'a long enough bench password'
const ENV = {
  LOG_LEVEL: 'warn',
  ...NO_RATE_LIMITS,
  MAX_CONNECTIONS: '20000',
  MAX_CONNECTIONS_PER_CLIENT: '20000',
}
const out: string[] = []
// Progress on stderr as it comes, unless BENCH_QUIET=1 (bench/run.ts keeps stdout only).
const say = (line: string) => {
  out.push(line)
  if (process.env.BENCH_QUIET !== '1') console.error(line)
}

const servers: ServerProcess[] = []
const cleanups: (() => Promise<unknown> | unknown)[] = []

/** An organization and an owner key, written through the product's storage before any server opens it. */
async function seedOwner(target: { databaseUrl: string } | { dataDir: string }): Promise<{ organizationId: string; key: string }> {
  const { openDatabase } = await import('../database/connect.ts')
  const { migrateToLatest } = await import('../database/migrate.ts')
  const { silentLogger } = await import('../log.ts')
  const { createOrganization } = await import('../storage/organizations.ts')
  const { createApiKey } = await import('../storage/keys.ts')
  const handle = await openDatabase({ databaseUrl: 'databaseUrl' in target ? target.databaseUrl : null, dataDir: 'dataDir' in target ? target.dataDir : '', logger: silentLogger })
  try {
    await migrateToLatest(handle.db)
    const now = new Date()
    const org = await createOrganization(handle.db, `approvals bench ${process.pid}`, now)
    const { secret } = await createApiKey(handle.db, { organizationId: org.id, name: 'bench', role: 'owner', createdByUserId: null, createdByKeyId: null, expiresAt: null }, now, BY_OPERATOR)
    return { organizationId: org.id, key: secret }
  } finally {
    await handle.close()
  }
}

async function call(base: string, method: string, path: string, token: string | null, body?: unknown, signal?: AbortSignal): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : null }
}

function must(what: string, res: { status: number; body: any }, status: number): any {
  if (res.status !== status) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

interface World {
  readonly ownerKey: string
  readonly approverToken: string
  /** A new pending approval (a require_approval decision on a fresh resource). */
  pending(base: string): Promise<string>
}

/** Through the server's HTTP API: a manager who signs in, an agent, a require_approval policy. */
async function setUp(base: string, seed: { organizationId: string; key: string }): Promise<World> {
  const email = `approver-${process.pid}-${Date.now()}@example.com`
  const invited = must('POST /invitations', await call(base, 'POST', '/invitations', seed.key, { email, role: 'manager' }), 201)
  must('POST /invitations/accept', await call(base, 'POST', '/invitations/accept', null, { token: invited.token, password: PASSWORD }), 201)
  const login = must('POST /auth/login', await call(base, 'POST', '/auth/login', null, { email, password: PASSWORD }), 200)
  must('POST /agents', await call(base, 'POST', '/agents', seed.key, { handle: 'appr-bot' }), 201)
  must('POST /policies', await call(base, 'POST', `/policies?organization_id=${seed.organizationId}`, seed.key, {
    name: 'Refunds need a manager',
    effect: 'require_approval',
    agents: ['appr-bot'],
    actions: ['payments.*'],
    approval: { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 3600, use_within_seconds: 300 },
  }), 201)
  let n = 0
  return {
    ownerKey: seed.key,
    approverToken: login.access_token,
    async pending(at) {
      n++
      const answer = must('POST /decisions', await call(at, 'POST', '/decisions', seed.key, { agent: 'appr-bot', action: 'payments.refund', resource: `order/${process.pid}-${n}`, args: { amount: n } }), 200)
      if (answer.decision !== 'require_approval') throw new Error(`expected require_approval, got ${JSON.stringify(answer)}`)
      return answer.approval.approval_id as string
    },
  }
}

/**
 * The read-then-register window: GET ?wait=5 and the approve sent 0–20 ms apart, RACES pairs at
 * once. A waiter whose first read saw `pending` but whose wake-up came before it registered
 * sleeps the full 5 s and then reads `approved`: counted here as a lost wake-up.
 */
const RACES = Number(process.env.RACES ?? 100)
async function raceProbe(world: World, waitAt: string, approveAt: string, label: string): Promise<void> {
  const ids: string[] = []
  for (let i = 0; i < RACES; i += 16) ids.push(...(await Promise.all(Array.from({ length: Math.min(16, RACES - i) }, () => world.pending(approveAt)))))
  const results = await Promise.all(ids.map(async (id, i) => {
    const sent = performance.now()
    const waiting = call(waitAt, 'GET', `/approvals/${id}?wait=5`, world.ownerKey)
    await new Promise((r) => setTimeout(r, i % 21))
    must('approve', await call(approveAt, 'POST', `/approvals/${id}/approve`, world.approverToken, {}), 200)
    const res = await waiting
    return { ms: performance.now() - sent, status: res.status === 200 ? (res.body?.status as string) : `HTTP ${res.status}` }
  }))
  const lost = results.filter((r) => r.ms >= 4500 && r.status === 'approved').length
  const other = new Map<string, number>()
  for (const r of results) if (r.status !== 'approved') other.set(r.status, (other.get(r.status) ?? 0) + 1)
  say(`| ${label} | ${RACES} | ${lost} | ${[...other].map(([k, n]) => `${n} ${k}`).join(', ') || 0} |`)
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
const ms = (x: number) => x.toFixed(1)

/** TRIALS times: waiter on `waitAt`, approve on `approveAt`; latencies in ms. */
async function wakeLatency(world: World, waitAt: string, approveAt: string, label: string): Promise<void> {
  const fromAnswer: number[] = []
  const fromSend: number[] = []
  let slow = 0
  for (let i = 0; i < TRIALS + 5; i++) {
    const id = await world.pending(approveAt)
    const waiting = (async () => {
      const res = await call(waitAt, 'GET', `/approvals/${id}?wait=60`, world.ownerKey)
      const at = performance.now()
      if (res.status !== 200 || res.body.status !== 'approved') throw new Error(`waiter: ${res.status} ${JSON.stringify(res.body)}`)
      return at
    })()
    // Let the GET reach the server and register its waiter before the approve.
    await new Promise((r) => setTimeout(r, 40))
    const sent = performance.now()
    const approved = must('approve', await call(approveAt, 'POST', `/approvals/${id}/approve`, world.approverToken, {}), 200)
    const answered = performance.now()
    if (approved.status !== 'approved') throw new Error(`approve: ${JSON.stringify(approved)}`)
    const woke = await waiting
    if (i < 5) continue // warm-up
    fromAnswer.push(woke - answered)
    fromSend.push(woke - sent)
    if (woke - answered > 1000) slow++
  }
  const a = [...fromAnswer].sort((x, y) => x - y)
  const s = [...fromSend].sort((x, y) => x - y)
  const within = fromAnswer.filter((x) => x <= 50).length
  say(`| ${label} | ${TRIALS} | ${ms(pct(a, 50))} / ${ms(pct(a, 99))} / ${ms(a[a.length - 1]!)} | ${ms(pct(s, 50))} / ${ms(pct(s, 99))} / ${ms(s[s.length - 1]!)} | ${within}/${TRIALS} (${slow} over 1 s) |`)
}

function vmRssKb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(match?.[1] ?? NaN)
}
const TICK = Number(execSync('getconf CLK_TCK').toString().trim()) || 100
function cpuMs(pid: number): number {
  const fields = statFields(pid)
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICK
}

async function xacts(admin: pg.Client | null, name: string | null): Promise<number | null> {
  if (!admin || !name) return null
  // Statistics are flushed by backends about once a second; clear our snapshot so we read fresh ones.
  await admin.query('select pg_stat_clear_snapshot()')
  const row = await admin.query<{ n: string }>('select (xact_commit + xact_rollback)::text as n from pg_stat_database where datname = $1', [name])
  return Number(row.rows[0]?.n ?? NaN)
}

/** An idle window: CPU ms of the server and (PostgreSQL) transactions committed in the database. */
async function idleWindow(server: ServerProcess, admin: pg.Client | null, dbName: string | null): Promise<{ cpu: number; xacts: number | null }> {
  const pid = server.child.pid!
  // A backend sends its statistics to pg_stat_database at most once a second (PostgreSQL 15+):
  // settle 3 s before and after the window so earlier and later work is not counted in it. The
  // waiters stay held until after the last read (releasing one re-reads its approval).
  const settle = admin ? 3_000 : 500
  await new Promise((r) => setTimeout(r, settle))
  const x0 = await xacts(admin, dbName)
  const c0 = cpuMs(pid)
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000))
  const c1 = cpuMs(pid)
  await new Promise((r) => setTimeout(r, settle))
  const x1 = await xacts(admin, dbName)
  // Our own two statistics queries run on the admin connection to another database: not counted.
  return { cpu: c1 - c0, xacts: x0 === null || x1 === null ? null : x1 - x0 }
}

async function manyWaiters(world: World, server: ServerProcess, label: string, admin: pg.Client | null, dbName: string | null, WAITERS: number): Promise<void> {
  const pid = server.child.pid!
  const ids: string[] = []
  const made = performance.now()
  // Concurrent decisions, 32 at a time, so 5,000 approvals take seconds rather than minutes.
  for (let i = 0; i < WAITERS; i += 32) ids.push(...(await Promise.all(Array.from({ length: Math.min(32, WAITERS - i) }, () => world.pending(server.url)))))
  const madeMs = performance.now() - made
  if (global.gc) global.gc()
  await new Promise((r) => setTimeout(r, 2000))
  const quiet = await idleWindow(server, admin, dbName)
  const rssBefore = vmRssKb(pid)
  const controller = new AbortController()
  setMaxListeners(0, controller.signal) // one signal for all the held requests
  let answeredEarly = 0
  const held = ids.map((id) =>
    call(server.url, 'GET', `/approvals/${id}?wait=60`, world.ownerKey, undefined, controller.signal).then(
      () => answeredEarly++,
      () => {},
    ),
  )
  const opening = performance.now()
  // Wait until the server holds them all: its open sockets (fds) grow by WAITERS.
  const fds = () => readdirSync(`/proc/${pid}/fd`).length
  const fdsBefore = fds()
  while (fds() < fdsBefore + WAITERS * 0.99 && performance.now() - opening < 30_000) await new Promise((r) => setTimeout(r, 100))
  await new Promise((r) => setTimeout(r, 3000)) // every GET has read its approval and is waiting
  const openMs = performance.now() - opening - 3000
  const rssWith = vmRssKb(pid)
  const busy = await idleWindow(server, admin, dbName)
  const rssAfterIdle = vmRssKb(pid)
  const fdsHeld = fds() - fdsBefore
  controller.abort()
  await Promise.all(held)
  const perWaiter = ((rssWith - rssBefore) * 1024) / WAITERS
  say(
    `| ${label} | ${WAITERS} (${fdsHeld} sockets held; ${answeredEarly} answered early) | ${(rssBefore / 1024).toFixed(0)} → ${(rssWith / 1024).toFixed(0)} MiB (+${((rssWith - rssBefore) / 1024).toFixed(0)} MiB, ${(perWaiter / 1024).toFixed(1)} KiB per waiter; ${(rssAfterIdle / 1024).toFixed(0)} MiB after the window) | ` +
      `${quiet.cpu.toFixed(0)} ms → ${busy.cpu.toFixed(0)} ms | ${quiet.xacts ?? 'n/a'} → ${busy.xacts ?? 'n/a'} | ${(madeMs / 1000).toFixed(1)} s / ${(openMs / 1000).toFixed(1)} s |`,
  )
}

const adminUrl = await findPostgres()

const pgliteDir = join(os.tmpdir(), `steward-bench-approvals-${process.pid}`)
cleanups.push(() => rmSync(pgliteDir, { recursive: true, force: true }))
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(', ')
try {
  say(`## Approvals: wake-up latency and held waiters (bench/approvals.ts)`)
  say('')
  say(`${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}; load average at start ${load()}. ` +
    `Real server processes (LOG_LEVEL=warn; MAX_CONNECTIONS=20000 and MAX_CONNECTIONS_PER_CLIENT=20000 for the bench), client in this process over HTTP/1.1 on 127.0.0.1. ` +
    `Each trial: a new require_approval decision, the agent side sends GET /approvals/{id}?wait=60, 40 ms later a signed-in manager sends POST /approvals/{id}/approve; 5 warm-up trials not counted.`)
  say('')
  say('"after approve answered": from the approve response arriving at the client (its transaction has committed) to the waiter\'s response arriving; "after approve sent": from the approve request being sent. ms, p50 / p99 / max.')
  say('')
  say('| setting | trials | after approve answered | after approve sent | ≤ 50 ms after answered |')
  say('|---|---:|---:|---:|---:|')
  const pgliteSeed = await seedOwner({ dataDir: pgliteDir })
  const lite = await startServer('node', { ...ENV, DATABASE_URL: '', DATA_DIR: pgliteDir })
  servers.push(lite)
  const liteWorld = await setUp(lite.url, pgliteSeed)
  await wakeLatency(liteWorld, lite.url, lite.url, 'PGlite, one process')

  let pgServers: [ServerProcess, ServerProcess] | null = null
  let pgWorld: World | null = null
  let scratchName: string | null = null
  if (adminUrl) {
    const scratch = await createScratchDatabase(adminUrl, 'steward_appr')
    cleanups.push(() => scratch.drop())
    scratchName = scratch.name
    const one = await startServer('node', { ...ENV, DATABASE_URL: scratch.url })
    servers.push(one)
    const two = await startServer('node', { ...ENV, DATABASE_URL: scratch.url })
    servers.push(two)
    pgServers = [one, two]
    pgWorld = await setUp(one.url, await seedOwner({ databaseUrl: scratch.url }))
    await wakeLatency(pgWorld, one.url, one.url, 'PostgreSQL, one process')
    await wakeLatency(pgWorld, one.url, two.url, 'PostgreSQL, two processes (wait on 1, approve on 2)')
  } else {
    say('| PostgreSQL | not reachable: skipped | | | |')
  }
  say('')
  say('### Lost wake-ups: GET ?wait=5 and the approve sent 0–20 ms apart')
  say('')
  say(`${RACES} pairs at once per row. "lost": the waiter answered \`approved\` only after its full 5 s (its first read saw pending, the wake-up came before it was registered).`)
  say('')
  say('| setting | pairs | lost wake-ups | not approved |')
  say('|---|---:|---:|---:|')
  await raceProbe(liteWorld, lite.url, lite.url, 'PGlite, one process')
  if (pgServers && pgWorld) {
    await raceProbe(pgWorld, pgServers[0].url, pgServers[0].url, 'PostgreSQL, one process')
    await raceProbe(pgWorld, pgServers[0].url, pgServers[1].url, 'PostgreSQL, two processes')
  }
  say('')
  say(`### Waiters held on one process (${WAITERS} on PostgreSQL, ${WAITERS_PGLITE} on PGlite)`)
  say('')
  say(`Approvals created first (POST /decisions, 32 at a time), then one GET ?wait=60 each on its own connection. ` +
    `CPU: the server process's utime+stime over a ${IDLE_SECONDS} s idle window, without waiters → with them. ` +
    `Database: transactions committed in the scratch database over the same windows by the one server left on it (pg_stat_database xact_commit + xact_rollback, read 3 s after each window edge; pg_stat_statements is not loaded here). ` +
    `ulimit -n ${execSync('ulimit -n', { shell: '/bin/bash' }).toString().trim()}.`)
  say('')
  say('| database | waiters | server RSS (VmRSS) before → with | CPU in idle window: none → with waiters | DB transactions in window: none → with | create / open |')
  say('|---|---:|---|---:|---:|---:|')
  await manyWaiters(liteWorld, lite, 'PGlite', null, null, WAITERS_PGLITE)
  if (pgServers && pgWorld) {
    const admin = new pg.Client({ connectionString: adminUrl! })
    await admin.connect()
    cleanups.unshift(() => admin.end())
    // Server 2 stops so the database's transactions are server 1's alone.
    await pgServers[1].stop()
    await manyWaiters(pgWorld, pgServers[0], 'PostgreSQL', admin, scratchName, WAITERS)
  }
  say('')
  say(`Load average at end ${load()}.`)
} finally {
  await Promise.all(servers.map((s) => s.stop(5000).catch(() => {})))
  for (const fn of cleanups) await Promise.resolve(fn()).catch(() => {})
}
console.log(out.join('\n'))
