// Rate limits counted across processes: two limiters (as two processes would hold) sharing one
// database through their own stores. No timing: every sync is an explicit flush.
import t from 'tap'
import { createRateLimiter } from '../routes/ratelimit.ts'
import type { SharedCounters } from '../storage/ratelimits.ts'
import { createRateLimitStore } from '../storage/ratelimits.ts'
import { openTestDatabase } from './helpers.ts'

const rule = { limit: 10, windowSeconds: 60 }
const now = Date.parse('2026-11-22T12:00:10Z')

t.test('counts from another process are added at the next sync', async (t) => {
  const database = await openTestDatabase(t)
  const storeA = createRateLimitStore(database.db, { intervalMs: 3_600_000, clock: () => now })
  const storeB = createRateLimitStore(database.db, { intervalMs: 3_600_000, clock: () => now })
  t.teardown(() => Promise.all([storeA.close(), storeB.close()]))
  const a = createRateLimiter(rule, 'api', storeA)
  const b = createRateLimiter(rule, 'api', storeB)
  for (let i = 0; i < 6; i++) t.ok(a.take('k', now).allowed, `A request ${i + 1}`)
  await storeA.flush()
  t.ok(b.take('k', now).allowed, 'B has not synced yet: counts only its own')
  await storeB.flush()
  // Global is now 7; B knows A's 6.
  const decisions = [1, 2, 3].map(() => b.take('k', now))
  t.same(decisions.map((d) => d.allowed), [true, true, true], '8, 9, 10 allowed')
  t.equal(decisions[2]!.remaining, 0)
  t.notOk(b.take('k', now).allowed, 'the 11th across both processes is refused')
  await storeB.flush()
  await storeA.flush()
  t.notOk(a.take('k', now).allowed, 'A learns B’s count at its next sync (the key is hot: 11 ≥ 10/2)')
  const fresh = createRateLimiter(rule, 'api', storeB)
  t.ok(fresh.take('cold', now).allowed)
  await storeA.flush()
  await storeB.flush()
  t.notOk(fresh.take('k', now).allowed, 'a process that never saw the hot key refuses it after one sync')
  const other = a.take('other', now)
  t.ok(other.allowed, 'other keys are unaffected')
  t.equal(other.remaining, 9)
  const next = a.take('k', now + 60_000)
  t.ok(next.allowed, 'a new window starts from zero')
  t.equal(next.remaining, 9)
})

t.test('a delta that could not be stored is drained again', async (t) => {
  const counters: SharedCounters[] = []
  const a = createRateLimiter(rule, 'leads', { attach: (c) => counters.push(c) })
  for (let i = 0; i < 4; i++) a.take('x', now)
  const [shared] = counters
  const first = shared!.drain()
  t.same(first, [{ key: 'x', start: now - (now % 60_000), delta: 4, local: 4 }])
  t.same(shared!.drain(), [], 'nothing new')
  for (const p of first) shared!.restore(p)
  a.take('x', now)
  t.same(shared!.drain(), [{ key: 'x', start: now - (now % 60_000), delta: 5, local: 5 }], 'restored delta plus the new request')
  shared!.merge({ key: 'x', start: now - (now % 60_000), delta: 5, local: 5 }, 9)
  t.equal(a.take('x', now).remaining, 0, '6 here + 4 elsewhere = 10')
  shared!.preload('y', now - (now % 60_000), 8)
  t.equal(a.take('y', now).remaining, 1, 'a preloaded hot key starts from the global count')
})

t.test('without a sync the limiter is per process', async (t) => {
  const a = createRateLimiter(rule, 'api', null)
  const b = createRateLimiter(rule, 'api', null)
  for (let i = 0; i < 10; i++) a.take('k', now)
  t.notOk(a.take('k', now).allowed)
  t.ok(b.take('k', now).allowed)
})
