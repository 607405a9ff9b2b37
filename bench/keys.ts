// Credential costs and revocation delays (Node, PostgreSQL):
//   node --import tsx bench/keys.ts            (about 30 s; BENCH_DATABASE_URL or TEST_DATABASE_URL)
// 1. What the API-key check adds once warm: credentials.authenticate() on a cached key, timed in
//    process (p50/p99 over 20,000 calls), next to the same check on a malformed key (no I/O).
// 2. Revocation: in the same process the next request is refused (checked); across two server
//    processes on one database, the delay from the revoking DELETE's 204 to the first 401 from the
//    other process, over 20 trials (the other has the key cached).
import { createCredentials } from '../services/credentials.ts'
import { buildContext } from '../http/context.ts'
import { silentLogger } from '../log.ts'
import { loadConfig } from '../config.ts'
import { openDatabase } from '../database/connect.ts'
import { createScratchDatabase, reachable, seedWorld, startServer } from './lib.ts'

const adminUrl = [process.env.BENCH_DATABASE_URL, process.env.TEST_DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/test'].find(Boolean)!
if (!(await reachable(adminUrl))) {
  console.log('# no PostgreSQL reachable: nothing measured')
  process.exit(0)
}
const scratch = await createScratchDatabase(adminUrl, 'steward_keys')
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
try {
  const world = (await seedWorld(scratch.url, 1))!
  // ---- 1. warm key check, in process ----
  const config = loadConfig({ DATABASE_URL: scratch.url, LOG_LEVEL: 'warn' })
  const database = await openDatabase({ databaseUrl: scratch.url, dataDir: '', logger: silentLogger })
  const credentials = createCredentials(config, { db: database.db, clock: Date.now, logger: silentLogger })
  credentials.start()
  const request = (token: string) => new Request(`http://127.0.0.1/policies?organization_id=${world.organizationId}`, { headers: { authorization: `Bearer ${token}` } })
  const deps = { db: database.db, clock: Date.now, logger: silentLogger }
  // The LISTEN subscription must be up before anything is cached.
  for (let i = 0; i < 100 && !credentials.cacheEnabled(); i++) await new Promise((r) => setTimeout(r, 20))
  const time = async (token: string, n: number) => {
    const samples: number[] = []
    for (let i = 0; i < n; i++) {
      const req = request(token)
      const ctx = buildContext(req, config, deps, { remoteAddress: '127.0.0.1' })
      const t0 = performance.now()
      try {
        await credentials.authenticate(req.headers.get('authorization'), ctx.now)
      } catch {}
      samples.push(performance.now() - t0)
    }
    return samples.sort((a, b) => a - b)
  }
  await time(world.key, 2000)
  const warm = await time(world.key, 20_000)
  await time('stw_key_notavalidkeyatall', 2000)
  const junk = await time('stw_key_notavalidkeyatall', 20_000)
  const cache = credentials.cacheEnabled() ? 'on' : 'off'
  await credentials.close()
  await database.close()
  console.log(`key check, warm cache: p50 ${quantile(warm, 0.5).toFixed(4)} ms, p99 ${quantile(warm, 0.99).toFixed(4)} ms, max ${warm.at(-1)!.toFixed(3)} ms (cache ${cache})`)
  console.log(`key check, malformed key: p50 ${quantile(junk, 0.5).toFixed(4)} ms, p99 ${quantile(junk, 0.99).toFixed(4)} ms`)

  // ---- 2. revocation across two processes ----
  const env = { DATABASE_URL: scratch.url, API_RATE_LIMIT: '1000000/60' }
  const a = await startServer('node', env)
  const b = await startServer('node', env)
  try {
    const call = async (base: string, method: string, path: string, token: string, body?: unknown) => {
      const res = await fetch(`${base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      })
      const text = await res.text()
      return { status: res.status, body: text }
    }
    const policies = `/policies?organization_id=${world.organizationId}`
    const delays: number[] = []
    let sameProcessOk = 0
    const trials = 20
    for (let i = 0; i < trials; i++) {
      const created = await call(a.url, 'POST', '/keys', world.key, { name: `victim ${i}`, role: 'viewer' })
      const victim = JSON.parse(created.body) as { key_id: string; api_key: string }
      for (const base of [a.url, b.url]) for (let j = 0; j < 3; j++) await call(base, 'GET', policies, victim.api_key)
      const revoked = await call(a.url, 'DELETE', `/keys/${victim.key_id}`, world.key)
      const after = performance.now()
      if (revoked.status !== 204) throw new Error(`revoke answered ${revoked.status}`)
      if ((await call(a.url, 'GET', policies, victim.api_key)).status === 401) sameProcessOk++
      let delay = NaN
      while (performance.now() - after < 10_000) {
        if ((await call(b.url, 'GET', policies, victim.api_key)).status === 401) {
          delay = performance.now() - after
          break
        }
      }
      delays.push(delay)
    }
    delays.sort((x, y) => x - y)
    console.log(`revocation, same process: next request refused in ${sameProcessOk}/${trials} trials`)
    console.log(`revocation, other process: median ${quantile(delays, 0.5).toFixed(1)} ms, max ${delays.at(-1)!.toFixed(1)} ms over ${trials} trials (from the 204 to the peer's first 401, polling back to back)`)
  } finally {
    await a.stop()
    await b.stop()
  }
} finally {
  await scratch.drop()
}
