// Replays every contract fixture in fixtures/ against the in-process handler.
import t from 'tap'
import { loadFixtures, runFixture } from '../../fixtures/runner.ts'
import { seedWorld } from '../../fixtures/seed.ts'
import { createTestApp } from '../support/helpers.ts'

const fixtures = loadFixtures()
const app = await createTestApp(t)
const seedVars = await seedWorld(app.db, app.clock.now)

t.ok(fixtures.length > 0, 'there are fixtures to replay')
for (const fixture of fixtures) {
  t.test(`${fixture.file}: ${fixture.name}`, async (t) => {
    const failures = await runFixture(fixture, async (request) => app.app.fetch(request, { remoteAddress: '127.0.0.1' }), 'http://localhost', seedVars)
    t.same(failures, [], 'every step matches')
  })
}
