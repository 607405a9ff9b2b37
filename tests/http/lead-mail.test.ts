// Lead notifications by email through a real SMTP server (smtp-server on an ephemeral port): the
// per-list settings (GET/PATCH /leads/lists…), the outbox and its attempts (GET /leads/outbox),
// delivery after the SMTP server comes back, and the forms' answers unchanged throughout.
import t, { type Test } from 'tap'
import { BY_OPERATOR } from '../../storage/audit.ts'
import { createApiKey } from '../../storage/keys.ts'
import { createOrganization } from '../../storage/organizations.ts'
import { ONLY_OWNERS_LISTS, UNKNOWN_LIST } from '../../routes/lead-settings.ts'
import { OPT_IN_NEEDS_SMTP, OPT_IN_NEWSLETTER_ONLY } from '../../services/lead-mail.ts'
import { FakeClock, openTestDatabase } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { startSmtp, type TestSmtp } from '../support/smtp-support.ts'

async function world(t: Test, env: Record<string, string>, leadsOrganization = false) {
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  const holder = await createOrganization(database.db, 'Installation', new Date(clock.now - 60_000))
  const keyOf = async (role: 'owner' | 'admin' | 'viewer') =>
    (await createApiKey(database.db, { organizationId: holder.id, name: role, role, createdByUserId: null, createdByKeyId: null, expiresAt: null }, new Date(clock.now), BY_OPERATOR)).secret
  const keys = { owner: await keyOf('owner'), admin: await keyOf('admin'), viewer: await keyOf('viewer') }
  const app = await productApp(t, { database, clock, env: { LEAD_MAIL_POLL_MS: '50', ...env, ...(leadsOrganization ? { LEADS_ORGANIZATION_ID: holder.id } : {}) } })
  return { app, clock, keys, holder }
}

const smtpEnv = (smtp: TestSmtp) => ({ SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port), SMTP_FROM: 'Steward <leads@example.com>' })

const DEMO = { first_name: 'Ada', last_name: 'Lovelace', email: 'Ada@Example.com', company: 'Analytical Engines', linkedin: 'https://www.linkedin.com/in/ada', phone: '+44 20 7946 0000', source: 'pricing' }

async function until(check: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 20))
}

t.test('without SMTP: no mail, one clear line at start, settings say so, double opt-in refused', async (t) => {
  const { app, keys } = await world(t, {})
  t.ok(app.logs.some((line) => line.message === 'SMTP is not configured (SMTP_URL or SMTP_HOST): no lead notification or confirmation mail will be sent'))
  t.equal((await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com'] } })).status, 200)
  const answer = await app.call('POST', '/demo-request', { json: DEMO })
  t.equal(answer.status, 200)
  t.same(await jsonOf(answer), { message: 'OK' })
  t.same((await jsonOf(await app.call('GET', '/leads/outbox', { token: keys.owner }))).mails, [], 'nothing queued')
  const lists = await jsonOf(await app.call('GET', '/leads/lists', { token: keys.admin }))
  t.equal(lists.smtp_configured, false)
  const refused = await app.call('PATCH', '/leads/lists/newsletter', { token: keys.owner, json: { double_opt_in: true } })
  t.equal(refused.status, 409)
  t.same(await jsonOf(refused), { status: 'Conflict', error: OPT_IN_NEEDS_SMTP })
})

t.test('list settings: defaults, Owners change them, Admins read them, bad input is 400', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const { app, keys } = await world(t, smtpEnv(smtp))
  const lists = await jsonOf(await app.call('GET', '/leads/lists', { token: keys.admin }))
  t.same(lists, {
    smtp_configured: true,
    lists: [
      { list: 'demo-requests', notify: [], double_opt_in: false, consent_text: null, consent_version: null, confirm_ttl_seconds: 172800, updated_at: null },
      { list: 'newsletter', notify: [], double_opt_in: false, consent_text: null, consent_version: null, confirm_ttl_seconds: 172800, updated_at: null },
    ],
  })
  const byAdmin = await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.admin, json: { notify: ['a@example.com'] } })
  t.equal(byAdmin.status, 403)
  t.same(await jsonOf(byAdmin), { status: 'Forbidden', error: ONLY_OWNERS_LISTS })
  t.equal((await app.call('GET', '/leads/lists', { token: keys.viewer })).status, 403)
  t.equal((await app.call('GET', '/leads/lists', { token: app.vars.OWNER_KEY_A })).status, 403, "another organization's Owner")
  t.equal((await app.call('GET', '/leads/lists')).status, 401)
  const unknown = await app.call('GET', '/leads/lists/spam-list', { token: keys.owner })
  t.equal(unknown.status, 404)
  t.same(await jsonOf(unknown), { status: 'Not Found', error: UNKNOWN_LIST })

  const bad: [unknown, string][] = [
    [{ notify: ["not an address"] }, "Field notify holds an invalid email address (at notify.0)"],
    [{ notify: 'sales@example.com' }, 'Field notify must be an array of email addresses'],
    [{ confirm_ttl_seconds: 10 }, 'Field confirm_ttl_seconds must be a whole number from 300 to 2592000'],
    [{ double_opt_in: 'yes' }, 'Field double_opt_in must be true or false'],
    [{}, 'Request body names no field to change'],
  ]
  for (const [json, error] of bad) {
    const answer = await app.call('PATCH', '/leads/lists/newsletter', { token: keys.owner, json })
    t.equal(answer.status, 400, JSON.stringify(json))
    t.same(await jsonOf(answer), { status: 'Bad Request', error }, JSON.stringify(json))
  }
  const demoOptIn = await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { double_opt_in: true } })
  t.same([demoOptIn.status, await jsonOf(demoOptIn)], [400, { status: 'Bad Request', error: OPT_IN_NEWSLETTER_ONLY }])

  const saved = await jsonOf(await app.call('PATCH', '/leads/lists/newsletter', { token: keys.owner, json: { double_opt_in: true, consent_text: 'Monthly product news.', consent_version: '2026-12' } }))
  t.same(saved, { list: 'newsletter', notify: [], double_opt_in: true, consent_text: 'Monthly product news.', consent_version: '2026-12', confirm_ttl_seconds: 172800, updated_at: new Date(app.clock.now).toISOString() })
  const partly = await jsonOf(await app.call('PATCH', '/leads/lists/newsletter', { token: keys.owner, json: { confirm_ttl_seconds: 3600 } }))
  t.same([partly.double_opt_in, partly.consent_version, partly.confirm_ttl_seconds], [true, '2026-12', 3600], 'only the fields given change')
  t.same(await jsonOf(await app.call('GET', '/leads/lists/newsletter', { token: keys.admin })), partly)
  const events = await app.db.selectFrom('audit_events').select(['type', 'target_type', 'target_id', 'data']).where('target_type', '=', 'lead_list').orderBy('event_id').execute()
  t.same(events, [
    { type: 'settings.changed', target_type: 'lead_list', target_id: 'newsletter', data: { changed: ['consent_text', 'consent_version', 'double_opt_in'], setting: 'mail' } },
    { type: 'settings.changed', target_type: 'lead_list', target_id: 'newsletter', data: { changed: ['confirm_ttl_seconds'], setting: 'mail' } },
  ], 'each change is audited, naming the fields, never their values')
})

t.test('a demo request is emailed to the notification addresses: every field, Reply-To the requester', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const { app, keys } = await world(t, smtpEnv(smtp))
  await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com', 'ceo@example.com'] } })
  const answer = await app.call('POST', '/demo-request', { json: DEMO })
  t.equal(answer.status, 200)
  t.same(await jsonOf(answer), { message: 'OK' })
  const duplicate = await app.call('POST', '/demo-request', { json: DEMO })
  t.same([duplicate.status, await jsonOf(duplicate)], [409, { message: 'Already registered' }], 'a duplicate is not notified')
  const [mail] = await smtp.waitFor(1)
  t.same(mail!.to, ['sales@example.com', 'ceo@example.com'])
  t.equal(mail!.from, 'leads@example.com')
  t.equal(mail!.headers.from, 'Steward <leads@example.com>')
  t.equal(mail!.headers['reply-to'], 'Ada@example.com', 'the requester (nodemailer lower-cases the domain)')
  t.equal(mail!.headers.subject, 'New demo request: Ada Lovelace, Analytical Engines')
  t.notOk('list-unsubscribe' in mail!.headers, 'a notification goes to staff, not to a subscriber')
  t.match(mail!.headers['content-type'], /^text\/plain/)
  t.equal(
    mail!.text.trim(),
    [
      `A new demo request arrived at ${new Date(app.clock.now).toISOString()}.`,
      '',
      'First name:   Ada',
      'Last name:    Lovelace',
      'Email:        Ada@Example.com',
      'Company:      Analytical Engines',
      'LinkedIn:     https://www.linkedin.com/in/ada',
      'Phone:        +44 20 7946 0000',
      'Source:       pricing',
      'Analytics id: (none)',
      '',
      'Reply to this mail to write to Ada@Example.com.',
    ].join('\n'),
  )
  await until(async () => (await jsonOf(await app.call('GET', '/leads/outbox', { token: keys.owner }))).mails[0]?.status === 'sent')
  const outbox = await jsonOf(await app.call('GET', '/leads/outbox', { token: keys.admin }))
  t.equal(outbox.mails.length, 1)
  const [row] = outbox.mails
  t.same({ ...row, log: row.log.map((entry: any) => ({ ...entry, detail: typeof entry.detail })) }, {
    id: row.id,
    kind: 'notification',
    list: 'demo-requests',
    recipients: ['sales@example.com', 'ceo@example.com'],
    subject: 'New demo request: Ada Lovelace, Analytical Engines',
    status: 'sent',
    attempts: 1,
    created_at: new Date(app.clock.now).toISOString(),
    next_attempt_at: null,
    sent_at: new Date(app.clock.now).toISOString(),
    last_error: null,
    log: [{ attempt: 1, at: new Date(app.clock.now).toISOString(), ok: true, detail: 'string' }],
  })
  t.equal(smtp.mails.length, 1, 'sent once')
  // Kept 90 days (it copies personal data), then deleted with its attempts.
  app.clock.advance(89 * 86_400_000)
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.equal((await jsonOf(await app.call('GET', '/leads/outbox', { token: keys.owner }))).mails.length, 1, 'kept for 89 days')
  app.clock.advance(2 * 86_400_000)
  await until(async () => (await jsonOf(await app.call('GET', '/leads/outbox', { token: keys.owner }))).mails.length === 0)
  t.same(await app.db.selectFrom('lead_mail_attempts').selectAll().execute(), [], 'its attempts went with it')
})

t.test('SMTP down: the form answers 200 at once, the mail waits in the outbox and goes when SMTP is back', async (t) => {
  const smtp = await startSmtp()
  const { app, keys, clock } = await world(t, smtpEnv(smtp))
  await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com'] } })
  await smtp.stop()
  const answers = await Promise.all([1, 2, 3].map((n) => app.call('POST', '/demo-request', { json: { ...DEMO, email: `down${n}@example.com` } })))
  t.same(answers.map((a) => a.status), [200, 200, 200])
  const outbox = async (status?: string) => (await jsonOf(await app.call('GET', `/leads/outbox${status ? `?status=${status}` : ''}`, { token: keys.owner }))).mails
  await until(async () => (await outbox()).every((mail: any) => mail.attempts === 1))
  const failed = await outbox('pending')
  t.equal(failed.length, 3, 'all three wait, none lost')
  for (const mail of failed) {
    t.equal(mail.log.length, 1)
    t.equal(mail.log[0].ok, false)
    t.match(mail.last_error, /ECONNREFUSED/)
    t.equal(mail.next_attempt_at, new Date(clock.now + 30_000).toISOString(), 'the first retry 30 s later')
  }
  // Still down at the first retry: the next one doubles.
  clock.advance(30_000)
  await until(async () => (await outbox()).every((mail: any) => mail.attempts === 2))
  t.same((await outbox()).map((mail: any) => mail.next_attempt_at), Array(3).fill(new Date(clock.now + 60_000).toISOString()))

  await smtp.restart()
  t.teardown(() => smtp.stop())
  clock.advance(60_000)
  await smtp.waitFor(3)
  t.same(smtp.mails.map((mail) => mail.headers['reply-to']).sort(), ['down1@example.com', 'down2@example.com', 'down3@example.com'])
  await until(async () => (await outbox('sent')).length === 3)
  for (const mail of await outbox('sent')) t.same(mail.log.map((entry: any) => entry.ok), [false, false, true])
  t.same(await outbox('pending'), [])
})

t.test('the outbox API: bad query is 400, pages follow next_cursor', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const { app, keys } = await world(t, smtpEnv(smtp))
  await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com'] } })
  for (const n of [1, 2, 3]) await app.call('POST', '/demo-request', { json: { ...DEMO, email: `page${n}@example.com` } })
  await smtp.waitFor(3)
  const first = await jsonOf(await app.call('GET', '/leads/outbox?limit=2', { token: keys.owner }))
  t.equal(first.mails.length, 2)
  const second = await jsonOf(await app.call('GET', `/leads/outbox?limit=2&cursor=${first.next_cursor}`, { token: keys.owner }))
  t.equal(second.mails.length, 1)
  t.equal(second.next_cursor, null)
  for (const query of ['status=lost', 'limit=0', 'cursor=nope']) t.equal((await app.call('GET', `/leads/outbox?${query}`, { token: keys.owner })).status, 400, query)
})

t.test('with LEADS_ORGANIZATION_ID: the lead, its lead.created event and its mail in one statement; a duplicate has none', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const { app, keys, holder } = await world(t, smtpEnv(smtp), true)
  await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com'] } })
  await app.call('PATCH', '/leads/lists/newsletter', { token: keys.owner, json: { notify: ['growth@example.com'] } })
  t.equal((await app.call('POST', '/demo-request', { json: DEMO })).status, 200)
  t.equal((await app.call('POST', '/newsletter', { json: { email: 'news@example.com', source: 'footer' } })).status, 200)
  t.equal((await app.call('POST', '/newsletter', { json: { email: 'NEWS@example.com' } })).status, 409)
  const events = await app.db.selectFrom('audit_events').select(['organization_id', 'data']).where('type', '=', 'lead.created').orderBy('event_id').execute()
  t.same(events.map((e) => [e.organization_id, (e.data as any).list, (e.data as any).email_domain]), [[holder.id, 'demo', 'example.com'], [holder.id, 'newsletter', 'example.com']])
  const mails = await smtp.waitFor(2)
  const news = mails.find((mail) => mail.to[0] === 'growth@example.com')!
  t.equal(news.headers.subject, 'New newsletter subscription: news@example.com')
  t.equal(news.headers['reply-to'], 'news@example.com')
  t.match(news.text, 'Status:       active')
  t.match(news.text, 'Source:       footer')
  const queued = await app.db.selectFrom('lead_mail_outbox').select(['list', 'lead_id', 'email_normalized']).orderBy('id').execute()
  t.same(queued.map((q) => [q.list, q.email_normalized, typeof q.lead_id]), [['demo-requests', 'ada@example.com', 'number'], ['newsletter', 'news@example.com', 'number']])
})

t.test('a field with line breaks cannot pass for another field in the notification, nor break the subject', async (t) => {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const { app, keys } = await world(t, smtpEnv(smtp))
  await app.call('PATCH', '/leads/lists/demo-requests', { token: keys.owner, json: { notify: ['sales@example.com'] } })
  const sneaky = { ...DEMO, email: 'eve@example.com', company: 'Evil\nEmail:        ceo@victim.example', last_name: 'Doe\r\nBcc: x@example.com' }
  t.equal((await app.call('POST', '/demo-request', { json: sneaky })).status, 200)
  const [mail] = await smtp.waitFor(1)
  t.equal(mail!.headers.subject, 'New demo request: Ada Doe Bcc: x@example.com, Evil Email: ceo@victim.example')
  t.notOk('bcc' in mail!.headers)
  t.same(mail!.to, ['sales@example.com'])
  t.match(mail!.text, 'Company:      Evil\n              Email:        ceo@victim.example\n')
  t.same(mail!.text.split('\n').filter((line) => line.startsWith('Email:')), ['Email:        eve@example.com'], 'one Email line, the requester\'s')
})
