// bench/inprocess.ts drives a server's own node:http request listener with in-memory requests.
// A driver that measured the wrong answer (a 400 for a missing Host, a route that never finished)
// would report a cost that means nothing: it checks every status, and this checks that it does,
// on Steward's refusals (the Fastify reference needs PostgreSQL; bench/run.ts starts it).
import { spawnSync } from 'node:child_process'
import t from 'tap'

const run = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/inprocess.ts', ...args], { encoding: 'utf8', timeout: 120_000 })

for (const route of ['notfound', 'badkey', 'badbody']) {
  t.test(`steward ${route}: every answer has the route's status, and the cost is reported`, async (t) => {
    const result = run('steward', route, '--requests', '300', '--rounds', '2')
    t.equal(result.status, 0, result.stderr)
    t.match(result.stdout, new RegExp(`^steward ${route}: CPU µs per request \\d+\\.\\d\\d \\d+\\.\\d\\d; median \\d+\\.\\d\\d\\n$`))
  })
}

t.test('an unknown target, route or option, or a count that is not a positive whole number, is refused with the usage', async (t) => {
  for (const args of [['steward', 'nope'], ['express', 'badkey'], ['steward'], ['steward', 'badkey', '--requests', 'many'], ['steward', 'badkey', '--rounds', '0'], ['steward', 'badkey', '--request', '5']]) {
    const result = run(...args)
    t.equal(result.status, 2, args.join(' '))
    t.match(result.stderr, /^usage: bench\/inprocess\.ts \[--instructions\] steward\|fastify\|bare notfound\|badkey\|badbody/m, args.join(' '))
    t.equal(result.stdout, '', `${args.join(' ')}: nothing measured`)
  }
})
