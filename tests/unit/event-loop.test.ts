// holdingEventLoop keeps one ref'd timer for exactly as long as the work runs, whether the work
// succeeds or fails, so a start never leaves the loop held and never lets it run dry.
import t from 'tap'
import { holdingEventLoop } from '../../cli/event-loop.ts'

const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length

t.test('one timer is held while the work runs, none after', async (t) => {
  const before = timers()
  let during = -1
  const result = await holdingEventLoop(async () => {
    await new Promise((resolve) => setImmediate(resolve))
    during = timers()
    return 'done'
  })
  t.equal(result, 'done')
  t.equal(during, before + 1)
  t.equal(timers(), before)
})

t.test('a failing work releases the timer and rejects with its error', async (t) => {
  const before = timers()
  const failure = new Error('open failed')
  await t.rejects(holdingEventLoop(async () => { throw failure }), failure)
  t.equal(timers(), before)
})
