// Rate limits counted across processes: two limiters (as two processes would hold) sharing one
// database through their own stores. No timing: every sync is an explicit flush.
import t from 'tap'
import { createRateLimiter } from '../../services/ratelimit.ts'
import type { SharedCounters } from '../../storage/ratelimits.ts'
import { createRateLimitStore } from '../../storage/ratelimits.ts'
import { openTestDatabase } from '../support/helpers.ts'

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

t.test('one sync sends one statement for the hot keys of every limiter, each in its own window', async (t) => {
  const database = await openTestDatabase(t)
  let statements = 0
  // Counts every statement the store sends (raw `sql` ones too): an idle process syncs four times
  // a second forever, so what one sync costs is multiplied by every hour a deployment runs.
  const counted = database.db.withPlugin({
    transformQuery: (args) => {
      statements++
      return args.node
    },
    transformResult: async (args) => args.result,
  })
  const store = createRateLimitStore(counted, { intervalMs: 3_600_000, clock: () => now })
  const other = createRateLimitStore(database.db, { intervalMs: 3_600_000, clock: () => now })
  t.teardown(() => Promise.all([store.close(), other.close()]))
  const minute = createRateLimiter(rule, 'api', store)
  const hour = createRateLimiter({ limit: 4, windowSeconds: 3600 }, 'leads', store)
  const org = createRateLimiter({ limit: 100, windowSeconds: 60 }, 'api-org', store)
  await store.flush()
  statements = 0
  await store.flush()
  t.equal(statements, 1, 'an idle sync of three limiters: one statement')

  // Another process makes keys hot in two of the limiters' windows, and one not yet hot.
  const otherMinute = createRateLimiter(rule, 'api', other)
  const otherHour = createRateLimiter({ limit: 4, windowSeconds: 3600 }, 'leads', other)
  const otherOrg = createRateLimiter({ limit: 100, windowSeconds: 60 }, 'api-org', other)
  for (let i = 0; i < 6; i++) otherMinute.take('m', now)
  for (let i = 0; i < 3; i++) otherHour.take('h', now)
  for (let i = 0; i < 49; i++) otherOrg.take('o', now)
  await other.flush()
  statements = 0
  await store.flush()
  t.equal(statements, 1, 'still one statement when there are hot keys to learn')
  t.equal(minute.take('m', now).remaining, 3, 'api: 6 elsewhere + this one of 10')
  t.equal(hour.take('h', now).remaining, 0, 'leads (hourly window): 3 elsewhere + this one of 4')
  t.equal(org.take('o', now).remaining, 99, 'api-org: 49 of 100 is not hot yet, so only this one is known')
  t.equal(minute.take('h', now).remaining, 9, 'a hot key of one limiter is not preloaded into another')

  statements = 0
  await store.flush()
  t.equal(statements, 4, 'with counts of its own in three limiters: three upserts and the one hot-key statement')
})
