// Rate-limit overshoot across processes: two servers on one PostgreSQL, LEAD_RATE_LIMIT=L/60, one
// client (127.0.0.1) sending as fast as 10 keep-alive connections allow, split evenly across
// both. Requests carry an invalid body, so every admitted one answers 400 and every refused one
// 429, with no database work. Admitted − L is the overshoot.
//   node --import tsx bench/overshoot.ts [L]          (about 15 s; needs PostgreSQL)
import { createScratchDatabase, reachable, startServer } from './lib.ts'

const limit = Number(process.argv[2] ?? 200)
const adminUrl = [process.env.BENCH_DATABASE_URL, process.env.TEST_DATABASE_URL, 'postgres://postgres@127.0.0.1:5432/test'].find(Boolean)!
if (!(await reachable(adminUrl))) {
  console.log('# no PostgreSQL reachable: nothing measured')
  process.exit(0)
}
const scratch = await createScratchDatabase(adminUrl, 'steward_overshoot')
try {
  const env = { DATABASE_URL: scratch.url, LEAD_RATE_LIMIT: `${limit}/60` }
  const servers = [await startServer('node', env), await startServer('node', env)]
  try {
    // Stay inside one 60 s window.
    const into = Date.now() % 60_000
    if (into > 45_000) await new Promise((r) => setTimeout(r, 60_000 - into + 200))
    const counts: Record<number, number> = {}
    const perServer = [0, 0]
    const deadline = performance.now() + 4000
    await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const which = i % 2
        while (performance.now() < deadline) {
          const res = await fetch(`${servers[which]!.url}/demo-request`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
          await res.arrayBuffer()
          counts[res.status] = (counts[res.status] ?? 0) + 1
          if (res.status === 400) perServer[which]!++
        }
      }),
    )
    const admitted = counts[400] ?? 0
    console.log(
      `limit ${limit}/60 s over 2 processes: admitted ${admitted} (A ${perServer[0]}, B ${perServer[1]}), refused ${counts[429] ?? 0}; ` +
        `overshoot ${admitted - limit} (${(((admitted - limit) / limit) * 100).toFixed(1)}% of the limit)`,
    )
  } finally {
    for (const s of servers) await s.stop()
  }
} finally {
  await scratch.drop()
}
