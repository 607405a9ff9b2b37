// Export and erasure of one person's lead data (docs/leads.md, "Export and erasure"): Owners only,
// the email in the body, matched trimmed and case-insensitively; erasure leaves nothing of the
// person in any table (every text, varchar, json and jsonb column is scanned), leaves an audit
// event without the erased data, and the audit seals still verify. PGlite, or PostgreSQL.
import t from 'tap'
import { sql } from 'kysely'
import { sealAll } from '../../storage/audit-seal.ts'
import { verifyChain } from '../../services/audit-verify.ts'
import { jsonOf } from '../support/product-support.ts'
import { leadsApp } from '../support/lead-spam-support.ts'
import { startSmtp } from '../support/smtp-support.ts'
import type { TestApp } from '../support/helpers.ts'

const app = await leadsApp(t)
const OWNER = app.vars.OWNER_KEY_A!
const ORG = app.vars.ORG_A!
const tag = `${process.pid}${Date.now().toString(36)}`
// As submitted (mixed case, spaces) and as stored for matching.
const SUBMITTED = `  Erase.Me-${tag}@Example.COM `
const EMAIL = SUBMITTED.trim().toLowerCase()
const OTHER = `keep-me-${tag}@example.com`

const demo = (email: string, extra: Record<string, unknown> = {}) => ({ first_name: 'Grace', last_name: 'Hopper', email, company: 'Navy', linkedin: 'https://www.linkedin.com/in/grace', ...extra })

async function post(path: string, json: unknown): Promise<number> {
  return (await app.request(path, { method: 'POST', json })).status
}

/** Every base table's text-like columns holding `needle` (case-insensitive), as "table.column: n". */
async function scan(needle: string, on: Pick<TestApp, 'db'> = app): Promise<string[]> {
  const columns = await sql<{ table_name: string; column_name: string }>`select c.table_name, c.column_name from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name and t.table_type = 'BASE TABLE'
    where c.table_schema = current_schema() and c.data_type in ('text', 'character varying', 'character', 'json', 'jsonb', 'USER-DEFINED', 'ARRAY')
    order by c.table_name, c.column_name`.execute(on.db)
  const hits: string[] = []
  for (const { table_name, column_name } of columns.rows) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table_name)} where strpos(lower(${sql.ref(column_name)}::text), ${needle.toLowerCase()}) > 0`.execute(on.db)
    if (rows[0]!.n > 0) hits.push(`${table_name}.${column_name}: ${rows[0]!.n}`)
  }
  return hits
}

t.test('set up: the person in every lead table, and someone else beside them', async (t) => {
  t.equal((await app.call('PATCH', '/leads/lists/demo-requests/spam', { token: OWNER, json: { honeypot_field: 'website' } })).status, 200)
  for (const email of [SUBMITTED, OTHER]) {
    t.equal(await post('/demo-request', demo(email)), 200)
    t.equal(await post('/newsletter', { email }), 200)
    // Spam too (the lead exists already: a hit answers 409 as a real repeat would).
    t.equal(await post('/demo-request', demo(email.toUpperCase(), { website: 'x' })), 409)
  }
  // Consent records and mail, as the lead-mail service writes them.
  const at = new Date(app.clock.now)
  for (const email of [EMAIL, OTHER]) {
    const subscription = await app.db
      .insertInto('lead_subscriptions')
      .values({ lead_id: null, email, email_normalized: email, status: 'active', consent_version: 'v1', requested_at: at, requested_ip: '203.0.113.9', confirmed_at: at, confirmed_ip: '203.0.113.9' })
      .returning('id')
      .executeTakeFirstOrThrow()
    const mail = await app.db
      .insertInto('lead_mail_outbox')
      .values({
        kind: 'confirmation',
        list: 'newsletter',
        email_normalized: email,
        subscription_id: subscription.id,
        recipients: JSON.stringify([email]),
        reply_to: null,
        subject: 'Confirm your subscription',
        body: `Hello ${email}, confirm here.`,
        headers: JSON.stringify({ 'List-Unsubscribe': '<https://api.example.com/leads/unsubscribe?t=abc>' }),
        created_at: at,
        next_attempt_at: at,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    await app.db.insertInto('lead_mail_attempts').values({ outbox_id: mail.id, attempt: 1, attempted_at: at, ok: false, detail: `550 mailbox ${email} unavailable` }).execute()
  }
  t.ok((await scan(EMAIL)).length >= 5, 'the person is held in several tables')
})

t.test('export: Owners of the holder only; everything about the person, matched trimmed and case-insensitively', async (t) => {
  for (const [token, who] of [
    [app.vars.ADMIN_KEY_A!, 'an Admin'],
    [app.vars.VIEWER_KEY_A!, 'a Viewer'],
    [app.vars.OWNER_KEY_B!, "another organization's Owner"],
  ] as const) {
    for (const path of ['/leads/people/export', '/leads/people/erase', '/leads/people/erasures']) {
      const response = await app.call('POST', path, { token, json: { email: EMAIL } })
      t.equal(response.status, 403, `${who}: ${path}`)
    }
  }
  t.equal((await app.call('POST', '/leads/people/export', { token: OWNER, json: {} })).status, 400)
  t.equal((await app.call('POST', '/leads/people/export', { token: OWNER, json: { email: EMAIL, extra: 1 } })).status, 400)
  const response = await app.call('POST', '/leads/people/export', { token: OWNER, json: { email: `  ${EMAIL.toUpperCase()}  ` } })
  t.equal(response.status, 200)
  const body = await jsonOf(response)
  t.equal(body.email, EMAIL)
  t.same(Object.keys(body.records).sort(), ['demo_requests', 'lead_mail_attempts', 'lead_mail_outbox', 'lead_spam', 'lead_subscriptions', 'newsletter_subscriptions'])
  t.equal(body.records.demo_requests[0].email, SUBMITTED.trim(), 'as submitted, trimmed')
  t.match(body.records.lead_spam[0], { list: 'demo-requests', reason: 'honeypot' })
  t.equal(body.records.lead_mail_attempts.length, 1)
  t.notMatch(JSON.stringify(body), new RegExp(OTHER), 'nobody else')
  const event = await app.db.selectFrom('audit_events').selectAll().where('type', '=', 'lead.exported').executeTakeFirstOrThrow()
  t.notMatch(JSON.stringify(event.data).toLowerCase(), new RegExp(EMAIL.split('@')[0]!), 'the export event holds no address')
})

t.test('erase: nothing of the person left in any table; the event holds no data of theirs; the seals verify', async (t) => {
  await sealAll(app.db, new Date(app.clock.now))
  t.match(await verifyChain(app.db, ORG, new Date(app.clock.now)), { ok: true })
  const response = await app.call('POST', '/leads/people/erase', { token: OWNER, json: { email: SUBMITTED } })
  t.equal(response.status, 200)
  t.same(await jsonOf(response), {
    erased: true,
    deleted: { demo_requests: 1, lead_mail_attempts: 1, lead_mail_outbox: 1, lead_spam: 1, lead_subscriptions: 1, newsletter_subscriptions: 1 },
  })
  t.same(await scan(EMAIL), [], 'lower-cased: nowhere')
  t.same(await scan(SUBMITTED.trim()), [], 'as submitted: nowhere')
  t.ok((await scan(OTHER)).length >= 5, 'the other person is untouched')

  const events = await app.db.selectFrom('audit_events').selectAll().where('type', '=', 'lead.erased').execute()
  t.equal(events.length, 1)
  t.match(events[0], { organization_id: ORG, actor_type: 'key', target_type: 'person', target_id: null })
  t.match(events[0]!.data, { email_hmac: /^[0-9a-f]{64}$/, deleted: { demo_requests: 1 } })

  await sealAll(app.db, new Date(app.clock.now))
  t.match(await verifyChain(app.db, ORG, new Date(app.clock.now)), { ok: true }, 'verify after erasure')
  const verified = await app.call('GET', '/audit/verify', { token: OWNER })
  t.match(await jsonOf(verified), { ok: true })

  // "Was X erased?": answerable by someone who knows X, however they write it.
  const asked = await jsonOf(await app.call('POST', '/leads/people/erasures', { token: OWNER, json: { email: EMAIL.toUpperCase() } }))
  t.same(asked.erasures.map((row: { event_id: number }) => row.event_id), [Number(events[0]!.event_id)])
  t.same(await jsonOf(await app.call('POST', '/leads/people/erasures', { token: OWNER, json: { email: OTHER } })), { erasures: [] })

  // A second erasure finds nothing and says so.
  t.same(await jsonOf(await app.call('POST', '/leads/people/erase', { token: OWNER, json: { email: EMAIL } })), { erased: true, deleted: {} })
  // The person may come back: a new signup is a new lead.
  t.equal(await post('/newsletter', { email: EMAIL }), 200)
})

t.test('erase after the real mail flows: a notification, a double opt-in confirmation mail, a confirmed consent', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const mailApp = await leadsApp(t, { LEAD_MAIL_POLL_MS: '50', SMTP_URL: `smtp://127.0.0.1:${smtp.port}`, SMTP_FROM: 'leads@example.com' })
  const owner = mailApp.vars.OWNER_KEY_A!
  t.equal((await mailApp.call('PATCH', '/leads/lists/newsletter', { token: owner, json: { double_opt_in: true, consent_version: 'v1' } })).status, 200)
  t.equal((await mailApp.call('PATCH', '/leads/lists/demo-requests', { token: owner, json: { notify: ['sales@example.com'] } })).status, 200)
  const person = `Mail.Flow-${tag}@Example.org`
  t.equal((await mailApp.request('/newsletter', { method: 'POST', json: { email: person } })).status, 200)
  t.equal((await mailApp.request('/demo-request', { method: 'POST', json: demo(person) })).status, 200)
  const mails = await smtp.waitFor(2)
  const confirmation = mails.find((mail) => mail.headers.subject === 'Confirm your newsletter subscription')!
  const link = /https:\/\/api\.example\.com(\/leads\/confirm\?token=[\w.%-]+)/.exec(confirmation.text)![1]!
  t.equal((await mailApp.request(link, { method: 'POST', conn: { remoteAddress: '203.0.113.7' } })).status, 200)
  // The mails were sent: wait for their attempt rows.
  for (let tries = 0; tries < 100; tries++) {
    const sent = await mailApp.db.selectFrom('lead_mail_outbox').select('id').where('status', '=', 'sent').execute()
    if (sent.length >= 2) break
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const before = await scan(person, mailApp)
  t.ok(before.some((hit) => hit.startsWith('lead_mail_outbox.')) && before.some((hit) => hit.startsWith('lead_subscriptions.')), before.join(', '))
  await sealAll(mailApp.db, new Date(mailApp.clock.now))
  const erased = await jsonOf(await mailApp.call('POST', '/leads/people/erase', { token: owner, json: { email: person } }))
  t.match(erased, { erased: true, deleted: { demo_requests: 1, newsletter_subscriptions: 1, lead_subscriptions: 1, lead_mail_outbox: 2, lead_mail_attempts: 2 } })
  t.same(await scan(person, mailApp), [], 'nothing of the person in any table')
  await sealAll(mailApp.db, new Date(mailApp.clock.now))
  t.match(await verifyChain(mailApp.db, mailApp.vars.ORG_A!, new Date(mailApp.clock.now)), { ok: true })
})
