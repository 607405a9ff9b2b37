// The two HTTP scenarios of `npm run bench`, run for real with short windows: a figure means
// something only when every server gave the answer it was meant to (each scenario exits 1 on
// any other status), and a baseline that drifts from Steward's answers or stops starting after a
// refactor must fail here rather than in a bench run. The decision pair must send what users
// send: a new order, amount and customer in every decision, every one allowed by the condition.
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { decisionBody } from '../bench/decision-world.ts'

const bench = (script: string, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', timeout: 110_000, env: { ...process.env, NODE_OPTIONS: '' } })

t.test('every decision body asks about its own resource and arguments, each allowed by the seeded condition', async (t) => {
  const bodies = Array.from({ length: 2000 }, (_, n) => JSON.parse(decisionBody('bench-bot', n)) as { agent: string; action: string; resource: string; args: { amount: number; currency: string }; context: unknown })
  t.equal(new Set(bodies.map((b) => b.resource)).size, bodies.length, 'a resource per request')
  t.equal(new Set(bodies.map((b) => JSON.stringify(b.args))).size, bodies.length, 'arguments per request')
  t.ok(new Set(bodies.map((b) => b.action)).size > 1, 'more than one action')
  t.same(bodies.filter((b) => !(b.agent === 'bench-bot' && b.action.startsWith('payments.') && b.args.currency === 'EUR' && b.args.amount >= 1 && b.args.amount < 1000)), [], 'each matches the allowing policy and its condition')
})

t.test('the decision pair on PGlite: every request of both routes answered 200, and the ratio is reported', async (t) => {
  const result = bench('bench/decision-pair.ts', '--databases', 'pglite', '--seconds', '0.5', '--rounds', '2', '--rate', '100')
  t.equal(result.status, 0, 'exit 0', { output: result.status === 0 ? '' : `${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}` })
  t.match(result.stdout, /^\| POST \/decisions vs POST \/demo-request \(new lead\), throughput, PGlite \| ≥ 0\.85 \| \*\*\d+\.\d\d\*\* [✓✗] \|$/m)
  t.match(result.stdout, /^- PGlite: rounds, .*Statuses: decisions 200×\d+; demo 200×\d+; probe errors 0\.$/m)
})

t.test('the pipeline: Steward, the Fastify reference and the bare fetch function each give the status the row expects', async (t) => {
  const result = bench('bench/pipeline.ts', '--seconds', '0.3', '--rounds', '1', '--rate', '100')
  t.equal(result.status, 0, 'exit 0', { output: result.status === 0 ? '' : `${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}` })
  t.match(result.stdout, /^\| GET unknown path → 404 vs bare fetch function \(same adapter\) \| ≥ 0\.80 \| \*\*\d+\.\d\d\*\* [✓✗] \|$/m)
  t.match(result.stdout, /^\| GET \/policies, malformed key → 401 \| [\d,.]+ \|/m)
})

t.test('a mistyped option or an unknown database is refused before anything starts', async (t) => {
  for (const args of [['--databases', 'mysql'], ['--seconds', 'soon'], ['--connection', '5']]) {
    const result = bench('bench/decision-pair.ts', ...args)
    t.equal(result.status, 2, args.join(' '))
    t.match(result.stderr, /^usage error: /m, args.join(' '))
    t.equal(result.stdout, '', `${args.join(' ')}: nothing measured`)
  }
})
