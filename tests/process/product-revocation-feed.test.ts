// The revocation feed (PostgreSQL LISTEN/NOTIFY): while it is down nothing is cached, so a
// revocation made without a notification still takes effect on the next request; once it is
// back, caching resumes.
import t from 'tap'
import { HttpError } from '../../http/errors.ts'
import { createCredentials } from '../../services/credentials.ts'
import { silentLogger } from '../../log.ts'
import { createPostgresPool } from '../../database/connect.ts'
import { FakeClock, openTestDatabase, TEST_DATABASE_URL, testConfig } from '../support/helpers.ts'
import { seedWorld } from '../../fixtures/seed.ts'

/** The status of the HttpError the check threw, or 0 when it accepted the credential. */
/** The status of a refused check (returned or thrown), 0 for a principal. */
async function refusal(check: unknown): Promise<number> {
  try {
    const outcome = await check
    return outcome instanceof HttpError ? outcome.status : 0
  } catch (error) {
    return (error as { status?: number }).status ?? -1
  }
}

async function waitFor(condition: () => boolean, ms = 5000): Promise<boolean> {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (condition()) return true
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
  return condition()
}

t.test('a lost LISTEN connection turns the cache off until it is back', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  const vars = await seedWorld(database.db, clock.now)
  const name = `steward_feed_test_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const url = new URL(TEST_DATABASE_URL!)
  url.searchParams.set('application_name', name)
  const credentials = createCredentials(testConfig(), { db: database.db, clock: clock.read, logger: silentLogger, listenUrl: url.toString() })
  credentials.start()
  t.teardown(() => credentials.close())
  const admin = await createPostgresPool(TEST_DATABASE_URL!, silentLogger, 1)
  t.teardown(() => admin.end())

  const now = clock.now
  const bearer = (token: string) => `Bearer ${token}`
  t.ok(await waitFor(() => credentials.cacheEnabled()), 'subscribed')
  await credentials.authenticate(bearer(vars.VIEWER_KEY_A!), now)

  await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1', [name])
  t.ok(await waitFor(() => !credentials.cacheEnabled()), 'the cache is off once the feed is lost')

  // A revocation nobody announced (e.g. while the feed was down) is seen at once.
  await database.db.updateTable('api_keys').set({ revoked_at: new Date(clock.now) }).where('id', '=', vars.VIEWER_KEY_ID_A!).execute()
  t.equal(await refusal(credentials.authenticate(bearer(vars.VIEWER_KEY_A!), now)), 401)

  t.ok(await waitFor(() => credentials.cacheEnabled()), 'resubscribed')
  await credentials.authenticate(bearer(vars.MEMBER_KEY_A!), now)
  // Now cached: an unannounced revocation is not seen until the entry ages out (5 s)…
  await database.db.updateTable('api_keys').set({ revoked_at: new Date(clock.now) }).where('id', '=', vars.MEMBER_KEY_ID_A!).execute()
  t.equal(await refusal(credentials.authenticate(bearer(vars.MEMBER_KEY_A!), now)), 0, 'served from the cache')
  // …while an announced one is seen on the next request.
  await admin.query(`select pg_notify('steward_credentials', $1)`, [vars.MEMBER_KEY_ID_A])
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal(await refusal(credentials.authenticate(bearer(vars.MEMBER_KEY_A!), now)), 401)
  // And the age limit is the safety net for anything missed.
  await credentials.authenticate(bearer(vars.MANAGER_KEY_A!), now)
  await database.db.updateTable('api_keys').set({ revoked_at: new Date(clock.now) }).where('id', '=', vars.MANAGER_KEY_ID_A!).execute()
  clock.advance(5_000)
  t.equal(await refusal(credentials.authenticate(bearer(vars.MANAGER_KEY_A!), clock.now)), 401)
})
