// leads export of newsletter subscribers: each row's status (pending under double opt-in, else
// active) and its one-click unsubscribe URL; demo requests carry neither.
import { PassThrough } from 'node:stream'
import t from 'tap'
import { EXPORT_COLUMNS, exportLeads } from '../../cli/export.ts'
import { insertDemoRequestUnlessRegistered, insertSubscriptionUnlessRegistered } from '../../storage/leads.ts'
import { insertPendingSubscription, leadIdOf } from '../../storage/lead-subscriptions.ts'
import { openTestDatabase } from '../support/helpers.ts'

t.test('newsletter rows carry status and unsubscribe_url; demo rows leave them empty', async (t) => {
  const { db } = await openTestDatabase(t)
  const at = new Date('2026-12-06T04:00:00Z')
  await insertDemoRequestUnlessRegistered(db, { email: 'ada@example.com', first_name: 'Ada', last_name: 'L', company: 'AE', linkedin: 'https://www.linkedin.com/in/ada', phone: null, source: null, analytics_distinct_id: null }, at)
  for (const email of ['active@example.com', 'pending@example.com']) await insertSubscriptionUnlessRegistered(db, { email, source: null, analytics_distinct_id: null, via: '/newsletter' }, at)
  const pendingId = (await leadIdOf(db, 'newsletter_subscriptions', 'pending@example.com'))!
  await insertPendingSubscription(db, { leadId: pendingId, email: 'pending@example.com', consentVersion: 'v1', at, ip: '192.0.2.1', expiresAt: new Date(at.getTime() + 3_600_000) })

  const out = new PassThrough()
  let text = ''
  out.on('data', (chunk) => (text += chunk))
  const written = await exportLeads(db, { lists: ['demo', 'newsletter'], format: 'ndjson', out, progress: null, unsubscribeUrl: (id) => `https://api.example.com/leads/unsubscribe?token=u.${id}` })
  t.equal(written, 3)
  const rows = text.trim().split('\n').map((line) => JSON.parse(line))
  t.same(rows.map((row) => Object.keys(row)), [[...EXPORT_COLUMNS], [...EXPORT_COLUMNS], [...EXPORT_COLUMNS]])
  t.same(rows.map((row) => [row.email, row.status, row.unsubscribe_url]), [
    ['ada@example.com', null, null],
    ['active@example.com', 'active', `https://api.example.com/leads/unsubscribe?token=u.${rows[1].id}`],
    ['pending@example.com', 'pending', `https://api.example.com/leads/unsubscribe?token=u.${pendingId}`],
  ])
})
