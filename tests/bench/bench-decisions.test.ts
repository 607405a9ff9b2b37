// The decision pair of `npm run bench` (bench/decision-pair.ts), run for real with short windows:
// its figures mean something only when every request was answered 200 (it exits 1 on any other
// status), and it must send what users send: a new order, amount and customer in every decision,
// every one allowed by the seeded condition.
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { decisionBody } from '../../bench/decision-world.ts'

const bench = (script: string, ...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', script, ...args], { encoding: 'utf8', timeout: 110_000, env: { ...process.env, NODE_OPTIONS: '' } })

t.test('every decision body asks about its own resource and arguments, each allowed by the seeded condition', async (t) => {
  const bodies = Array.from({ length: 2000 }, (_, n) => JSON.parse(decisionBody('bench-bot', n)) as { agent: string; action: string; resource: string; args: { amount: number; currency: string }; context: unknown })
  t.equal(new Set(bodies.map((b) => b.resource)).size, bodies.length, 'a resource per request')
  t.equal(new Set(bodies.map((b) => JSON.stringify(b.args))).size, bodies.length, 'arguments per request')
  t.ok(new Set(bodies.map((b) => b.action)).size > 1, 'more than one action')
  t.same(bodies.filter((b) => !(b.agent === 'bench-bot' && b.action.startsWith('payments.') && b.args.currency === 'EUR' && b.args.amount >= 1 && b.args.amount < 1000)), [], 'each matches the allowing policy and its condition')
})

t.test('the decision pair on PGlite: every request of both routes answered 200 at both connection counts, and the ratio is reported', async (t) => {
  const result = bench('bench/decision-pair.ts', '--databases', 'pglite', '--seconds', '0.5', '--rounds', '2', '--connections', '10', '--few', '2', '--rate', '100')
  t.equal(result.status, 0, 'exit 0', { output: result.status === 0 ? '' : `${result.stdout.slice(-2000)}\n${result.stderr.slice(-2000)}` })
  t.match(result.stdout, /^\| POST \/decisions vs POST \/demo-request \(new lead\), throughput at 10 connections each, PGlite \| ≥ 0\.85 \| \*\*\d+\.\d\d\*\* [✓✗]; by CPU per request \d+\.\d\d \|$/m)
  t.match(result.stdout, /^\| PGlite \| 2 \| [\d,.]+ \| [\d,.]+ \| \d+\.\d\d \| /m, 'the few-connections row')
  t.match(result.stdout, /^- PGlite: median latency .*\(probe errors 0\)\. Statuses at 10, decisions 200×\d+ and demo 200×\d+; at 2, decisions 200×\d+ and demo 200×\d+\.$/m)
})

t.test('a mistyped option or an unknown database is refused before anything starts', async (t) => {
  for (const args of [['--databases', 'mysql'], ['--seconds', 'soon'], ['--few', '-1'], ['--connection', '5']]) {
    const result = bench('bench/decision-pair.ts', ...args)
    t.equal(result.status, 2, args.join(' '))
    t.match(result.stderr, /^usage error: /m, args.join(' '))
    t.equal(result.stdout, '', `${args.join(' ')}: nothing measured`)
  }
})
