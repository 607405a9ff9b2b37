// bench/p99-aa.ts measures how far two identical servers' p99s stray under bench/run.ts's latency
// method. A typo in its arguments must not silently measure something else (another route, an odd
// number of probes that breaks the forwards/backwards order): it is refused with the usage before
// any server starts, so these cases need no database.
import { spawnSync } from 'node:child_process'
import t from 'tap'

const run = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/p99-aa.ts', ...args], { encoding: 'utf8', timeout: 60_000 })

t.test('an unknown route or option, a rate or probe count that is not a positive whole number, or an odd probe count, is refused with the usage', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [['--routes', 'bad-key-401,nope'], /^unknown route: nope$/m],
    [['--rates', '2000,fast'], /^--rates must be a positive whole number: fast$/m],
    [['--rates', '0'], /^--rates must be a positive whole number: 0$/m],
    [['--probes', '3'], /^--probes must be even/m],
    [['--probes=-2'], /^--probes must be a positive whole number: -2$/m],
    [['--probe', '8'], /Unknown option '--probe'/],
    [['extra'], /Unexpected argument 'extra'/],
  ]
  for (const [args, message] of cases) {
    const result = run(...args)
    t.equal(result.status, 2, args.join(' '))
    t.match(result.stderr, message, args.join(' '))
    t.match(result.stderr, /^usage: bench\/p99-aa\.ts \[--routes notfound-404,bad-body-400,bad-key-401\] \[--rates N,N…\] \[--probes N \(even\)\]$/m, args.join(' '))
    t.equal(result.stdout, '', `${args.join(' ')}: nothing measured`)
  }
})
