// Budget windows (engine/limits.ts): calendar windows in a stated zone across daylight-saving
// changes, weeks from Monday, months, half-hour zones; rolling buckets; amounts taken by CEL.
import t from 'tap'
import { addTo, compileLimit, currentOf, releaseFrom, resetsAt, windowAt, type LimitInput } from '../../engine/index.ts'

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())
const span = (type: 'hour' | 'day' | 'week' | 'month', tz: string, at: string) => {
  const w = windowAt({ type, tz }, Date.parse(at))
  return [iso(w.start), iso(w.end)]
}

t.test('calendar windows start in the stated zone, daylight saving included', async (t) => {
  t.same(span('day', 'Europe/Paris', '2026-12-06T22:59:59.999Z'), ['2026-12-05T23:00:00.000Z', '2026-12-06T23:00:00.000Z'])
  t.same(span('day', 'Europe/Paris', '2026-12-06T23:00:00.000Z'), ['2026-12-06T23:00:00.000Z', '2026-12-07T23:00:00.000Z'])
  t.same(span('day', 'Europe/Paris', '2026-03-29T12:00:00.000Z'), ['2026-03-28T23:00:00.000Z', '2026-03-29T22:00:00.000Z'], 'the spring-forward day lasts 23 hours')
  t.same(span('day', 'America/New_York', '2026-11-01T12:00:00.000Z'), ['2026-11-01T04:00:00.000Z', '2026-11-02T05:00:00.000Z'], 'the fall-back day lasts 25 hours')
  t.same(span('hour', 'Asia/Kolkata', '2026-12-06T10:10:00.000Z'), ['2026-12-06T10:00:00.000Z', '2026-12-06T11:00:00.000Z'].map((x) => new Date(Date.parse(x) - 30 * 60_000).toISOString()), 'a half-hour zone starts its hours at :30 UTC')
  t.same(span('week', 'UTC', '2026-12-06T10:00:00.000Z'), ['2026-11-30T00:00:00.000Z', '2026-12-07T00:00:00.000Z'], 'a Sunday belongs to the week from the Monday before')
  t.same(span('week', 'UTC', '2026-12-07T00:00:00.000Z'), ['2026-12-07T00:00:00.000Z', '2026-12-14T00:00:00.000Z'])
  t.same(span('month', 'Asia/Tokyo', '2026-12-31T15:00:00.000Z'), ['2026-12-31T15:00:00.000Z', '2027-01-31T15:00:00.000Z'], 'January starts at 15:00Z in Tokyo')
  t.same(span('month', 'UTC', '2027-02-10T00:00:00.000Z'), ['2027-02-01T00:00:00.000Z', '2027-03-01T00:00:00.000Z'])
})

t.test('a calendar counter starts again in a new window, keeps a newer one, and releases only in its own', async (t) => {
  const window = { type: 'day' as const, tz: 'UTC' }
  const day1 = Date.parse('2026-12-06T10:00:00Z')
  const held = addTo(window, currentOf(window, null, day1), 5, day1)
  t.same(held, { window_start: Date.parse('2026-12-06T00:00:00Z'), used: 5, buckets: null })
  t.equal(currentOf(window, held, Date.parse('2026-12-07T00:00:00Z')).used, 0, 'a new day starts at 0')
  t.equal(currentOf(window, held, Date.parse('2026-12-05T23:00:00Z')).used, 5, 'a clock behind counts into the newer window')
  t.same(releaseFrom(window, held, held.window_start, 2)?.used, 3)
  t.equal(releaseFrom(window, held, Date.parse('2026-12-05T00:00:00Z'), 2), null, 'a reservation of another window gives nothing back')
})

t.test('a rolling window slides by buckets of 1/120 of it', async (t) => {
  const window = { type: 'rolling' as const, seconds: 3600 }
  const t0 = Date.parse('2026-12-06T10:00:10Z')
  let state = addTo(window, currentOf(window, null, t0), 2, t0)
  state = addTo(window, currentOf(window, state, t0 + 600_000), 3, t0 + 600_000)
  t.equal(currentOf(window, state, t0 + 3_590_000).used, 5)
  t.equal(iso(resetsAt(window, currentOf(window, state, t0 + 3_590_000), t0 + 3_590_000)), '2026-12-06T11:00:30.000Z', 'the first bucket (10:00:00-10:00:30) counts until 11:00:30')
  t.equal(currentOf(window, state, Date.parse('2026-12-06T11:00:30Z')).used, 3, 'then it slides out')
  t.same(releaseFrom(window, state, Date.parse('2026-12-06T10:00:00Z'), 2)?.used, 3, 'a reservation leaves its own bucket')
})

t.test('amounts: whole minor units from CEL, or a clear failure', async (t) => {
  const limit = (amount: string): LimitInput => ({ name: 'x', kind: 'spend', max: 10, amount, currency: 'EUR', scope: 'agent', window: { type: 'day' }, mode: 'enforce' })
  const run = (amount: string, args: Record<string, unknown>) => {
    const compiled = compileLimit(limit(amount))
    if (!compiled.ok) return compiled.message
    const outcome = compiled.limit.evaluateAmount!({ agent: { id: '', handle: '', labels: {} }, action: 'a', resource: '', args, context: {}, now: new Date(0) })
    return outcome.ok ? outcome.value : outcome.message
  }
  t.equal(run('args.cents', { cents: 250 }), 250)
  t.equal(run('int(args.cents) * 2', { cents: 250 }), 500)
  t.equal(run('args.cents', { cents: 2.5 }), 'amount 2.5 is not a whole number of minor units')
  t.equal(run('int(args.cents)', { cents: -1 }), 'amount is negative (-1)')
  t.equal(run('args.cents', { cents: 1e16 }), 'amount 10000000000000000 is larger than 1000000000000000')
  t.equal(run('args.cents', {}), 'amount could not be evaluated: No such key: cents')
  t.equal(run('args.name', { name: 'x' }), 'amount returned a string, not a whole number')
  t.equal(run('args.cents +', {}), 'amount does not compile (line 1, column 13): Unexpected token: EOF')
})
