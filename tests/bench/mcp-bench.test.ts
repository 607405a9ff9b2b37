// The MCP gateway scenario of `npm run bench` (bench/mcp-gateway.ts), run for real with short
// windows: its figures mean something only when every gateway call answered 200 and reached the
// upstream once, and POST /decisions answered 200 for the same decision; the scenario exits 1
// otherwise, and must fail here rather than in a bench run.
import { spawnSync } from 'node:child_process'
import t from 'tap'

const bench = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/mcp-gateway.ts', ...args], { encoding: 'utf8', timeout: 170_000, env: { ...process.env, NODE_OPTIONS: '' } })

t.test('the gateway scenario on PGlite: every call answered 200 and forwarded once, and the ratios are reported', async (t) => {
  const result = bench('--databases', 'pglite', '--seconds', '0.5', '--rounds', '2')
  t.equal(result.status, 0, 'exit 0', { output: result.status === 0 ? '' : `${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}` })
  t.match(result.stdout, /^\| MCP tools\/call through the gateway vs POST \/decisions, throughput, PGlite \| ≥ 0\.8 \| \*\*\d+\.\d\d\*\* [✓✗] \|$/m)
  t.match(result.stdout, /^\| MCP gateway median latency above a direct upstream call \(ms\) at 10 % of its maximum, PGlite \| ≤ 2 \| \*\*-?\d+\.\d\d\*\* [✓✗] \|$/m)
  t.match(result.stdout, /^\| its ceiling here by CPU: decision ÷ \(decision \+ the SDK serving one tools\/call\), PGlite \| \(≥ 0\.8 for the goal to be reachable\) \| \*\*\d+\.\d\d\*\* [✓✗] \|$/m)
  t.match(result.stdout, /^- PGlite: rounds, .*Statuses: gateway 200×\d+; decisions 200×\d+; upstream alone 200×\d+; probe errors 0\. /m)
})

t.test('a mistyped option or an unknown database is refused before anything starts', async (t) => {
  for (const args of [['--databases', 'mysql'], ['--seconds', 'soon'], ['--connection', '5']]) {
    const result = bench(...args)
    t.equal(result.status, 2, args.join(' '))
    t.match(result.stderr, /^usage error: /m, args.join(' '))
    t.equal(result.stdout, '', `${args.join(' ')}: nothing measured`)
  }
})
