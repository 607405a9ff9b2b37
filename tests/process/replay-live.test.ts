// The documented live replay (`fixtures/replay.ts --url …`) against a real server process keeps
// working when the server's per-client lead limit refuses part of it: every replayed request
// comes from one address, so the replay waits out each 429 (Retry-After) like any polite client
// instead of failing. A small limit with a one-second window stands for the default one, which
// would make this test wait minutes.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createScratchDatabase, startServer, tsx } from '../../bench/lib.ts'

const pgUrl = process.env.TEST_DATABASE_URL

t.test(`the lead fixtures replay against a rate-limited live server (${pgUrl ? 'PostgreSQL' : 'PGlite'})`, async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'steward-replay-'))
  t.teardown(() => rmSync(work, { recursive: true, force: true }))
  const scratch = pgUrl ? await createScratchDatabase(pgUrl, 'steward_replay') : null
  if (scratch) t.teardown(() => scratch.drop())
  const env: Record<string, string> = { DATA_DIR: join(work, 'data'), DATABASE_URL: scratch?.url ?? '', LEAD_RATE_LIMIT: '4/1', NODE_OPTIONS: '' }
  const server = await startServer('node', env)
  t.teardown(() => server.stop())

  const replay = await tsx('fixtures/replay.ts', ['--url', server.url, '--only', 'leads/'], { NODE_OPTIONS: '' }, 90_000)
  const lines = replay.output.trim().split('\n')
  t.equal(lines.filter((line) => line.startsWith('not ok')).join('\n'), '', 'no fixture failed')
  t.match(lines.at(-1), /^\d+ passed, 0 failed$/, 'closing summary')
  t.equal(replay.code, 0, 'exit code 0')
  const waits = lines.filter((line) => line.startsWith('# 429 on')).length
  t.comment(`the replay waited out ${waits} rate-limit answers`)
})
