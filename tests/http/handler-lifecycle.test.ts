// createHandler is pure: building a handler opens no connection and starts no timer. Background
// work (the revocation and approval feeds on PostgreSQL, the key-use, pruning, approval-expiry,
// audit-sealing and webhook-delivery timers, rate-limit sharing)
// runs between start() and close(), and close() leaves nothing behind.
import { createServer } from 'node:net'
import t, { type Test } from 'tap'
import { createHandler } from '../../server.ts'
import { silentLogger } from '../../log.ts'
import { createRateLimitStore } from '../../storage/ratelimits.ts'
import { openTestDatabase, testConfig } from '../support/helpers.ts'

/**
 * Live intervals: the handler's timers are unref'd, so the process's resource list does not show
 * them; the global setInterval/clearInterval are wrapped to count them instead.
 */
function countIntervals(t: Test): { live(): number } {
  const live = new Set<unknown>()
  const { setInterval: set, clearInterval: clear } = globalThis
  globalThis.setInterval = ((...args: Parameters<typeof set>) => {
    const timer = set(...args)
    live.add(timer)
    return timer
  }) as typeof set
  globalThis.clearInterval = ((timer: Parameters<typeof clear>[0]) => {
    live.delete(timer)
    clear(timer)
  }) as typeof clear
  t.teardown(() => {
    globalThis.setInterval = set
    globalThis.clearInterval = clear
  })
  return { live: () => live.size }
}

t.test('construction starts nothing; start() starts the background work; close() stops all of it', async (t) => {
  const database = await openTestDatabase(t)
  // A LISTEN target that accepts connections: the feed's socket shows up as a TCP handle.
  // Each connection is closed at once: the feed sees a lost connection and retries later.
  let accepted = 0
  const listener = createServer((socket) => {
    accepted++
    socket.destroy()
  })
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => listener.close(() => resolve())))
  const port = (listener.address() as { port: number }).port
  const rateLimits = createRateLimitStore(database.db, { intervalMs: 60_000 })

  const intervals = countIntervals(t)
  const app = createHandler(testConfig(), { db: database.db, clock: Date.now, logger: silentLogger, listenUrl: `postgres://x@127.0.0.1:${port}/x`, rateLimits })
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(intervals.live(), 0, 'no timer after createHandler')
  t.equal(accepted, 0, 'no connection was opened')

  app.start()
  app.start()
  for (let i = 0; i < 40 && accepted < 3; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(intervals.live(), 9, 'nine timers after start() (key use, pruning, decision-log maintenance, approval expiry, audit sealing, webhook delivery, rate-limit sharing, lead mail, the reports\' rollup), however often it is called')
  t.equal(accepted, 3, 'the revocation, approval and MCP registry feeds connected once each')

  await app.close()
  t.equal(intervals.live(), 0, 'close() stopped every timer')
  await new Promise((resolve) => setTimeout(resolve, 1500))
  t.equal(accepted, 3, 'and the feeds do not reconnect after close()')
})
