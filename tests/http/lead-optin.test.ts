// Newsletter double opt-in and unsubscribe through a real SMTP server: the confirmation mail and
// its headers, confirming (recorded time, address, consent version), expiry on an injected clock,
// forged and replayed links, re-send throttling, RFC 8058 one-click unsubscribe with and without
// a body, and a later signup of an unsubscribed address as a new consent. The 200/409 answers
// stay as published throughout.
import t, { type Test } from 'tap'
import { BY_OPERATOR } from '../../storage/audit.ts'
import { createApiKey } from '../../storage/keys.ts'
import { createOrganization } from '../../storage/organizations.ts'
import { FakeClock, openTestDatabase } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { startSmtp, type ReceivedMail } from '../support/smtp-support.ts'
import { createLeadLinks } from '../../services/lead-links.ts'
import { unsubscribeUrls } from '../../services/lead-mail.ts'
import { createSecrets } from '../../services/secrets.ts'
import { webhookPayload } from '../../services/webhook-payloads.ts'
import type { OutboxEvent } from '../../storage/webhook-fanout.ts'

async function world(t: Test) {
  const smtp = await startSmtp()
  t.teardown(() => smtp.stop())
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  const holder = await createOrganization(database.db, 'Installation', new Date(clock.now - 60_000))
  const owner = (await createApiKey(database.db, { organizationId: holder.id, name: 'owner', role: 'owner', createdByUserId: null, createdByKeyId: null, expiresAt: null }, new Date(clock.now), BY_OPERATOR)).secret
  const app = await productApp(t, { database, clock, env: { LEAD_MAIL_POLL_MS: '50', SMTP_URL: `smtp://127.0.0.1:${smtp.port}`, SMTP_FROM: 'news@example.com' } })
  const saved = await app.call('PATCH', '/leads/lists/newsletter', { token: owner, json: { double_opt_in: true, consent_text: 'Monthly product news; unsubscribe at any time.', consent_version: 'v3', confirm_ttl_seconds: 7200 } })
  t.equal(saved.status, 200)
  const subscribe = async (email: string) => {
    const answer = await app.call('POST', '/newsletter', { json: { email } })
    return [answer.status, await jsonOf(answer)]
  }
  const subscribers = async () => (await jsonOf(await app.call('GET', '/leads/newsletter', { token: owner }))).leads
  return { smtp, app, clock, owner, subscribe, subscribers, db: database.db }
}

const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/** The confirm link in a confirmation mail, as a path on the server. */
function linkIn(mail: ReceivedMail, path: string): string {
  const match = new RegExp(`https://api\\.example\\.com(${path.replace('/', '\\/')}\\?token=[\\w.%-]+)`).exec(mail.text)
  if (!match) throw new Error(`no ${path} link in: ${mail.text}`)
  return match[1]!
}

const unsubscribePath = (mail: ReceivedMail) => /^<https:\/\/api\.example\.com(\/leads\/unsubscribe\?token=[\w.%-]+)>$/.exec(mail.headers['list-unsubscribe'] ?? '')![1]!

t.test('signup, confirmation mail, confirm: pending then active, consent recorded; the link is idempotent', async (t) => {
  const { smtp, app, clock, subscribe, subscribers, db } = await world(t)
  t.same(await subscribe('Grace@example.com'), [200, { message: 'OK' }])
  const [mail] = await smtp.waitFor(1)
  t.same(mail!.to, ['Grace@example.com'])
  t.equal(mail!.headers.subject, 'Confirm your newsletter subscription')
  t.match(mail!.headers['list-unsubscribe'], /^<https:\/\/api\.example\.com\/leads\/unsubscribe\?token=u\.\d+\.0\.[\w-]{43}>$/)
  t.equal(mail!.headers['list-unsubscribe-post'], 'List-Unsubscribe=One-Click')
  const confirm = linkIn(mail!, '/leads/confirm')
  t.match(confirm, /^\/leads\/confirm\?token=c\.\d+\.\d+\.[\w-]{43}$/)
  t.equal(
    mail!.text.trim(),
    [
      'Someone, hopefully you, asked to subscribe Grace@example.com to our newsletter.',
      '',
      'Monthly product news; unsubscribe at any time.',
      '',
      'To confirm, open this link within 2 hours:',
      '',
      `https://api.example.com${confirm}`,
      '',
      'If you did not ask for this, ignore this mail: without confirmation you are not subscribed, and the address is forgotten.',
      `To stop it at once: https://api.example.com${unsubscribePath(mail!)}`,
    ].join('\n'),
  )
  t.same((await subscribers()).map((s: any) => [s.email, s.status]), [['Grace@example.com', 'pending']])

  clock.advance(60_000)
  // Opening the link (as a mail scanner does, HEAD included) changes nothing: its page has the button.
  for (const method of ['GET', 'HEAD']) {
    const opened = await app.call(method, confirm, { conn: { remoteAddress: '192.0.2.9' } })
    t.equal(opened.status, 200, `${method} answers the page`)
  }
  const opened = await (await app.call('GET', confirm)).text()
  t.match(opened, `<form method="post" action="${confirm.replace('/leads/', '')}"><button type="submit">Confirm my subscription</button></form>`)
  t.same((await subscribers()).map((s: any) => [s.email, s.status]), [['Grace@example.com', 'pending']], 'still pending after the link was opened')
  // What the page's form posts: a form-encoded body (empty), from a browser without credentials.
  const page = await app.call('POST', confirm, { body: '', headers: { 'content-type': 'application/x-www-form-urlencoded' }, conn: { remoteAddress: '203.0.113.7' } })
  t.equal(page.status, 200)
  t.match(page.headers.get('content-type'), 'text/html; charset=utf-8')
  t.match(await page.text(), '<h1>Subscription confirmed</h1>')
  t.same((await subscribers()).map((s: any) => [s.email, s.status]), [['Grace@example.com', 'active']])
  const row = await db.selectFrom('lead_subscriptions').selectAll().executeTakeFirstOrThrow()
  t.same([row.status, row.confirmed_at?.toISOString(), row.confirmed_ip, row.consent_version], ['active', new Date(clock.now).toISOString(), '203.0.113.7', 'v3'])

  // Replayed: the same answer, nothing recorded again.
  clock.advance(60_000)
  const again = await app.call('POST', confirm, { conn: { remoteAddress: '198.51.100.1' } })
  t.equal(again.status, 200)
  t.match(await again.text(), 'already confirmed')
  const after = await db.selectFrom('lead_subscriptions').selectAll().executeTakeFirstOrThrow()
  t.same([after.confirmed_at?.toISOString(), after.confirmed_ip], [row.confirmed_at?.toISOString(), '203.0.113.7'])
  t.same(await subscribe('grace@example.com'), [409, { message: 'Already registered' }], 'an active subscriber is a duplicate')
})

t.test('forged, altered and foreign links are refused with 400; nothing changes', async (t) => {
  const { smtp, app, subscribe, subscribers } = await world(t)
  await subscribe('forge@example.com')
  const [mail] = await smtp.waitFor(1)
  const confirm = linkIn(mail!, '/leads/confirm')
  const token = decodeURIComponent(confirm.split('token=')[1]!)
  const [, id, expiry, mac] = token.split('.')
  const unsubscribeToken = decodeURIComponent(unsubscribePath(mail!).split('token=')[1]!)
  const forged = [
    '',
    'garbage',
    `c.${Number(id) + 1}.${expiry}.${mac}`,
    `c.${id}.${Number(expiry) + 86_400}.${mac}`,
    `c.${id}.${expiry}.${mac!.slice(0, -1)}${mac!.endsWith('A') ? 'B' : 'A'}`,
    // The same 32 bytes spelled otherwise (base64url's last character has spare bits): still refused.
    ...[1, 2, 3].map((bits) => `c.${id}.${expiry}.${mac!.slice(0, -1)}${B64URL[B64URL.indexOf(mac!.at(-1)!) ^ bits]}`),
    `c.${id}.${expiry}.${mac!.slice(1)}${mac![0]}`,
    `u.${id}.${expiry}.${mac}`,
    unsubscribeToken,
  ]
  for (const bad of forged) {
    for (const method of ['GET', 'POST']) {
      const answer = await app.call(method, `/leads/confirm?token=${encodeURIComponent(bad)}`)
      t.equal(answer.status, 400, `${method} confirm ${bad}`)
      t.match(await answer.text(), '<h1>This link is not valid</h1>')
    }
  }
  for (const bad of [token, `u.${id}.0.${mac}`, unsubscribeToken.slice(0, -2)]) {
    t.equal((await app.call('GET', `/leads/unsubscribe?token=${encodeURIComponent(bad)}`)).status, 400, `unsubscribe page ${bad}`)
    t.equal((await app.call('POST', `/leads/unsubscribe?token=${encodeURIComponent(bad)}`, { body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status, 400, `unsubscribe ${bad}`)
  }
  t.same((await subscribers()).map((s: any) => s.status), ['pending'])
})

t.test('a repeat signup of a pending email answers 409 and re-sends at most once an hour', async (t) => {
  const { smtp, clock, subscribe } = await world(t)
  t.same(await subscribe('repeat@example.com'), [200, { message: 'OK' }])
  await smtp.waitFor(1)
  t.same(await subscribe('repeat@example.com'), [409, { message: 'Already registered' }])
  clock.advance(59 * 60_000)
  t.same(await subscribe('Repeat@Example.com'), [409, { message: 'Already registered' }])
  clock.advance(60_000)
  const both = await Promise.all([subscribe('repeat@example.com'), subscribe('repeat@example.com')])
  t.same(both, [[409, { message: 'Already registered' }], [409, { message: 'Already registered' }]])
  await smtp.waitFor(2)
  clock.advance(10 * 60_000)
  t.same(await subscribe('repeat@example.com'), [409, { message: 'Already registered' }])
  // Give a wrongly queued third mail the time to arrive before counting.
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(smtp.mails.length, 2, 'one re-send in the hour, however many repeats')
  t.not(linkIn(smtp.mails[1]!, '/leads/confirm'), linkIn(smtp.mails[0]!, '/leads/confirm'), 'the re-sent link is fresh')
})

t.test('unconfirmed subscriptions expire: the link stops working, the address is forgotten, a new signup is new', async (t) => {
  const { smtp, app, clock, subscribe, subscribers, db } = await world(t)
  await subscribe('late@example.com')
  const [mail] = await smtp.waitFor(1)
  clock.advance(7200 * 1000)
  for (const method of ['GET', 'POST']) {
    const expired = await app.call(method, linkIn(mail!, '/leads/confirm'))
    t.equal(expired.status, 410, method)
    t.match(await expired.text(), 'This link has expired')
  }
  // The job expires it at its next pass (LEAD_MAIL_POLL_MS is 50 ms here).
  while ((await subscribers()).length > 0) await new Promise((resolve) => setTimeout(resolve, 20))
  const row = await db.selectFrom('lead_subscriptions').selectAll().executeTakeFirstOrThrow()
  t.same([row.status, row.email, row.email_normalized, row.lead_id], ['expired', null, null, null])
  t.same(await db.selectFrom('lead_mail_outbox').selectAll().execute(), [], 'its confirmation mail is gone with it')
  t.same(await subscribe('late@example.com'), [200, { message: 'OK' }], 'a later signup is stored anew')
  await smtp.waitFor(2)
})

t.test('unsubscribe: GET shows a button and changes nothing; one-click POST with or without a body; idempotent', async (t) => {
  const { smtp, app, subscribe, subscribers, db } = await world(t)
  await subscribe('one@example.com')
  await subscribe('two@example.com')
  await smtp.waitFor(2)
  const byAddress = new Map(smtp.mails.map((mail) => [mail.to[0], mail]))
  const one = unsubscribePath(byAddress.get('one@example.com')!)
  const two = unsubscribePath(byAddress.get('two@example.com')!)
  await app.call('POST', linkIn(byAddress.get('one@example.com')!, '/leads/confirm'))

  const page = await app.call('GET', one)
  t.equal(page.status, 200)
  const html = await page.text()
  t.match(html, `<form method="post" action="${one.replace('/leads/', '')}">`, 'relative to the page: right under any path prefix')
  t.equal(page.headers.get('content-security-policy'), "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
  t.equal(page.headers.get('referrer-policy'), 'no-referrer')
  t.match(html, '<input type="hidden" name="List-Unsubscribe" value="One-Click">')
  t.same((await subscribers()).map((s: any) => s.email).sort(), ['one@example.com', 'two@example.com'], 'a GET unsubscribes nobody')
  const listed = (await subscribers()).find((s: any) => s.email === 'one@example.com')
  t.equal(listed.unsubscribe_url, `https://api.example.com${one}`, 'the export carries the same URL as the mail')

  // RFC 8058: form-encoded body, no cookie, no credential.
  const post = await app.call('POST', one, { body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(post.status, 200)
  t.match(await post.text(), '<h1>You are unsubscribed</h1>')
  const bare = await app.call('POST', two)
  t.equal(bare.status, 200, 'no body at all')
  t.same(await subscribers(), [], 'both left the list')
  const again = await app.call('POST', one, { body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(again.status, 200)
  t.match(await again.text(), 'already unsubscribed')
  const rows = await db.selectFrom('lead_subscriptions').select(['email', 'status', 'unsubscribed_at']).orderBy('id').execute()
  t.same(rows.map((r) => [r.email, r.status, r.unsubscribed_at !== null]), [['one@example.com', 'unsubscribed', true], ['two@example.com', 'unsubscribed', true]])
  t.same((await db.selectFrom('lead_mail_outbox').select('status').where('status', '=', 'pending').execute()).length, 0)

  // A later signup is a new consent: 200, a new pending subscription, a new confirmation.
  t.same(await subscribe('one@example.com'), [200, { message: 'OK' }])
  await smtp.waitFor(3)
  t.same((await subscribers()).map((s: any) => [s.email, s.status]), [['one@example.com', 'pending']])
  t.equal((await db.selectFrom('lead_subscriptions').select('id').where('email_normalized', '=', 'one@example.com').execute()).length, 2, 'both consents are on record')
  t.equal((await app.call('POST', linkIn(smtp.mails[0]!.to[0] === 'one@example.com' ? smtp.mails[0]! : smtp.mails[1]!, '/leads/confirm'))).status, 410, "the old subscription's link does not revive it")
})

t.test('with double opt-in off, subscribers are active at once and can still unsubscribe in one click', async (t) => {
  const { app, owner, subscribe, subscribers } = await world(t)
  await app.call('PATCH', '/leads/lists/newsletter', { token: owner, json: { double_opt_in: false } })
  t.same(await subscribe('plain@example.com'), [200, { message: 'OK' }])
  const [lead] = await subscribers()
  t.same([lead.status, typeof lead.unsubscribe_url], ['active', 'string'])
  const answer = await app.call('POST', new URL(lead.unsubscribe_url).pathname + new URL(lead.unsubscribe_url).search, { body: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(answer.status, 200)
  t.same(await subscribers(), [])
  t.same(await subscribe('plain@example.com'), [200, { message: 'OK' }])
})

t.test('the lead.created webhook payload of a signup carries the same unsubscribe URL as the export', async (t) => {
  const { app, owner, subscribe, subscribers } = await world(t)
  await app.call('PATCH', '/leads/lists/newsletter', { token: owner, json: { double_opt_in: false } })
  await subscribe('hook@example.com')
  const [lead] = await subscribers()
  const urls = unsubscribeUrls(app.config, createLeadLinks(createSecrets(app.config)))
  const event = (data: Record<string, unknown>): OutboxEvent => ({ kind: 'event', event_id: 1, organization_id: '00000000-0000-4000-8000-000000000000', occurred_at: new Date(app.clock.now), actor_type: 'system', actor_id: null, type: 'lead.created', target_type: 'lead', target_id: `newsletter:${lead.id}`, data, approval: null })
  const payload = JSON.parse(webhookPayload(event({ lead_id: lead.id, list: 'newsletter', form: '/newsletter', email_domain: 'example.com' }), 'https://api.example.com', urls))
  t.equal(payload.data.unsubscribe_url, lead.unsubscribe_url)
  const demo = JSON.parse(webhookPayload(event({ lead_id: 1, list: 'demo', form: '/demo-request', email_domain: 'example.com' }), 'https://api.example.com', urls))
  t.notOk('unsubscribe_url' in demo.data, 'a demo request has no unsubscribe link')
})
