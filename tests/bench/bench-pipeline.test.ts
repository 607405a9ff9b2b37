// The HTTP pipeline scenario of `npm run bench` (bench/pipeline.ts), run for real with short
// windows: a ratio to the Fastify reference or the bare fetch function means something only when
// every server gave the answer the row expects (the scenario exits 1 on any other status), and a
// baseline that drifts from Steward's answers or stops starting after a refactor fails here.
import { spawnSync } from 'node:child_process'
import t from 'tap'

const bench = (script: string, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', timeout: 110_000, env: { ...process.env, NODE_OPTIONS: '' } })

t.test('the pipeline: Steward, the Fastify reference and the bare fetch function each give the status the row expects', async (t) => {
  const result = bench('bench/pipeline.ts', '--seconds', '0.3', '--rounds', '1', '--rate', '100')
  t.equal(result.status, 0, 'exit 0', { output: result.status === 0 ? '' : `${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}` })
  t.match(result.stdout, /^\| GET unknown path → 404 vs bare fetch function \(same adapter\) \| ≥ 0\.80 \| \*\*\d+\.\d\d\*\* [✓✗]; by CPU per request \d+\.\d\d \|$/m)
  t.match(result.stdout, /^\| GET \/policies, malformed key → 401 \| [\d,.]+ \|/m)
})
