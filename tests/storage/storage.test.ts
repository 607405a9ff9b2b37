// The storage layer on both drivers: our PGlite dialect's connection lock and affected-row
// counts (kysely-pglite 0.6.1 got both wrong), migrations, unique violations, and a
// PGlite data directory that keeps its leads across a close and reopen.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql, type Kysely } from 'kysely'
import t, { type Test } from 'tap'
import { silentLogger } from '../../log.ts'
import { openDatabase, type DatabaseHandle } from '../../database/connect.ts'
import { normalizeEmail } from '../../domain/email.ts'
import { countLeads, insertDemoRequestUnlessRegistered, insertSubscriptionUnlessRegistered, streamLeads } from '../../storage/leads.ts'
import { migrateToLatest } from '../../database/migrate.ts'
import type { Database } from '../../database/schema.ts'
import { DATABASE_KIND, openTestDatabase } from '../support/helpers.ts'

const AT = new Date('2026-11-22T12:00:00Z')
let counter = 0
function uniqueEmail(prefix = 'store'): string {
  counter++
  return `${prefix}-${counter}-${process.pid}@example.com`
}

const subscription = (email: string, source: string | null = null) => ({ email, source, analytics_distinct_id: null, via: '/newsletter' })

async function subscribers(db: Kysely<Database>, emails: string[]): Promise<string[]> {
  const rows = await db.selectFrom('newsletter_subscriptions').select('email').where('email', 'in', emails).orderBy('email').execute()
  return rows.map((row) => row.email)
}

/** The driver-level guarantees the lead code relies on, checked on one database. */
function driverChecks(t: Test, handle: () => DatabaseHandle, kind: string): void {
  t.test(`${kind}: a transaction that rolls back does not discard a concurrent insert made outside it`, async (t) => {
    const { db } = handle()
    const inside = uniqueEmail('inside')
    const outside = uniqueEmail('outside')
    let outsideWrite: Promise<boolean> | null = null
    const transaction = db.transaction().execute(async (trx) => {
      await insertSubscriptionUnlessRegistered(trx, subscription(inside), AT)
      // While the transaction is open, another caller writes through the same database object.
      outsideWrite = insertSubscriptionUnlessRegistered(db, subscription(outside), AT)
      await new Promise((resolve) => setTimeout(resolve, 30))
      throw new Error('roll back')
    })
    await t.rejects(transaction, { message: 'roll back' })
    t.equal(await outsideWrite!, true)
    t.same(await subscribers(db, [inside, outside]), [outside])
  })

  t.test(`${kind}: a committed transaction keeps its rows and a nested rollback (savepoint) undoes only its part`, async (t) => {
    const { db } = handle()
    const kept = uniqueEmail('kept')
    const undone = uniqueEmail('undone')
    const trx = await db.startTransaction().execute()
    await insertSubscriptionUnlessRegistered(trx, subscription(kept), AT)
    const savepoint = await trx.savepoint('inner').execute()
    await insertSubscriptionUnlessRegistered(savepoint, subscription(undone), AT)
    const back = await savepoint.rollbackToSavepoint('inner').execute()
    await back.commit().execute()
    t.same(await subscribers(db, [kept, undone]), [kept])
  })

  t.test(`${kind}: affected-row counts are right for insert, update and delete`, async (t) => {
    const { db } = handle()
    const tag = `batch-${process.pid}-${counter++}`
    const emails = [uniqueEmail(), uniqueEmail(), uniqueEmail()]
    const inserted = await db
      .insertInto('newsletter_subscriptions')
      .values(emails.map((email) => ({ ...subscription(email, tag), email_normalized: normalizeEmail(email), received_at: AT })))
      .executeTakeFirst()
    t.equal(inserted.numInsertedOrUpdatedRows, 3n)
    const updated = await db.updateTable('newsletter_subscriptions').set({ analytics_distinct_id: 'x' }).where('source', '=', tag).executeTakeFirst()
    t.equal(updated.numUpdatedRows, 3n)
    const none = await db.updateTable('newsletter_subscriptions').set({ analytics_distinct_id: 'y' }).where('source', '=', `${tag}-none`).executeTakeFirst()
    t.equal(none.numUpdatedRows, 0n)
    const deleted = await db.deleteFrom('newsletter_subscriptions').where('email', '=', emails[0]!).executeTakeFirst()
    t.equal(deleted.numDeletedRows, 1n)
    const rest = await db.deleteFrom('newsletter_subscriptions').where('source', '=', tag).executeTakeFirst()
    t.equal(rest.numDeletedRows, 2n)
  })

  t.test(`${kind}: a unique violation has code 23505`, async (t) => {
    const { db } = handle()
    const email = uniqueEmail('unique')
    const row = { ...subscription(email), email_normalized: normalizeEmail(email), received_at: AT }
    await db.insertInto('newsletter_subscriptions').values(row).execute()
    await t.rejects(db.insertInto('newsletter_subscriptions').values({ ...row, email: email.toUpperCase() }).execute(), { code: '23505' })
  })

  t.test(`${kind}: the insert functions store once and report a duplicate as false`, async (t) => {
    const { db } = handle()
    const email = uniqueEmail('Insert')
    t.equal(await insertSubscriptionUnlessRegistered(db, subscription(email), AT), true)
    t.equal(await insertSubscriptionUnlessRegistered(db, subscription(` ${email.toUpperCase()} `), AT), false)
    const lead = { email, first_name: 'A', last_name: 'B', company: 'C', linkedin: 'L', phone: null, source: null, analytics_distinct_id: null }
    t.equal(await insertDemoRequestUnlessRegistered(db, lead, AT), true)
    t.equal(await insertDemoRequestUnlessRegistered(db, { ...lead, email: email.toLowerCase() }, AT), false)
    const [row] = await db.selectFrom('newsletter_subscriptions').selectAll().where('email_normalized', '=', email.toLowerCase()).execute()
    t.equal(row?.email, email)
    t.equal(new Date(row!.received_at).toISOString(), AT.toISOString())
  })

  t.test(`${kind}: 50 concurrent inserts of one email store exactly one row`, async (t) => {
    const { db } = handle()
    const email = uniqueEmail('race')
    const results = await Promise.all(Array.from({ length: 50 }, () => insertSubscriptionUnlessRegistered(db, subscription(email), AT)))
    t.equal(results.filter(Boolean).length, 1)
    t.equal((await subscribers(db, [email])).length, 1)
  })

  t.test(`${kind}: countLeads is a number and streamLeads pages through every row in id order`, async (t) => {
    const { db } = handle()
    const before = await countLeads(db, 'newsletter')
    t.type(before, 'number')
    const emails = Array.from({ length: 5 }, () => uniqueEmail('page'))
    for (const email of emails) await insertSubscriptionUnlessRegistered(db, subscription(email, 'page'), AT)
    t.equal(await countLeads(db, 'newsletter'), before + 5)
    const streamed: string[] = []
    let lastId = 0
    let ordered = true
    for await (const lead of streamLeads(db, 'newsletter', 2)) {
      if (lead.id <= lastId) ordered = false
      lastId = lead.id
      streamed.push(lead.email)
      t.equal(lead.list, 'newsletter')
    }
    t.ok(ordered, 'ids ascend')
    t.equal(streamed.length, before + 5)
    t.same(streamed.slice(-5), emails)
  })
}

let main: DatabaseHandle | null = null
t.before(async () => {
  main = await openTestDatabase(t)
})
driverChecks(t, () => main!, DATABASE_KIND)

t.test('migrations are idempotent: a second run applies nothing', async (t) => {
  t.same(await migrateToLatest(main!.db), [])
  t.same(await migrateToLatest(main!.db), [])
})

t.test('a PGlite data directory keeps its leads across a close and reopen', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'steward-storage-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const open = () => openDatabase({ databaseUrl: null, dataDir, logger: silentLogger })
  const first = await open()
  t.equal(first.kind, 'pglite')
  // A new directory is a copy of the install-time template (already migrated) or is migrated now:
  // either way every migration is applied once.
  await migrateToLatest(first.db)
  const applied = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(first.db)
  t.same(applied.rows.map((row) => row.name), ['2026-11-22T00-leads', ...(await laterMigrations())])
  const email = uniqueEmail('kept')
  t.equal(await insertSubscriptionUnlessRegistered(first.db, subscription(email), AT), true)
  await first.close()
  await first.close()

  // Closing a handle that never ran a query must still close PGlite (and release the directory).
  const idle = await open()
  await idle.close()
  await t.rejects(sql`select 1`.execute(idle.db), 'a query after close fails')

  const second = await open()
  t.teardown(() => second.close())
  t.same(await migrateToLatest(second.db), [], 'nothing to apply on reopen')
  t.same(await subscribers(second.db, [email]), [email])
  t.equal(await insertSubscriptionUnlessRegistered(second.db, subscription(email.toUpperCase()), AT), false, 'still a duplicate after reopen')

  // On a PostgreSQL run this instance also covers the PGlite driver.
  if (DATABASE_KIND === 'postgres') driverChecks(t, () => second, 'pglite')
})

async function laterMigrations(): Promise<string[]> {
  const { migrations } = await import('../../database/migrations/index.ts')
  return Object.keys(migrations).slice(1)
}
