// Spam defence of the lead forms (docs/leads.md, "Spam defence"): per-list settings, the honeypot
// (a hit answers byte for byte as a stored lead and is never a lead), CAPTCHA verification against
// a local stub (valid, invalid, reused, missing tokens; the provider down in both fail modes), the
// spam list and its restore, and the purge. PGlite, or PostgreSQL with TEST_DATABASE_URL.
import t from 'tap'
import { sql } from 'kysely'
import { memoryLogger, nextEmail } from '../support/helpers.ts'
import { jsonOf } from '../support/product-support.ts'
import { downUrl, leadsApp, startCaptchaStub } from '../support/lead-spam-support.ts'
import { streamLeads } from '../../storage/leads.ts'
import { startSpamPurge } from '../../jobs/lead-spam-purge.ts'
import { fanOut } from '../../storage/webhook-fanout.ts'
import { webhookPayloads } from '../../services/webhook-payloads.ts'
import { CAPTCHA_FAILED, CAPTCHA_MISSING, CAPTCHA_UNAVAILABLE } from '../../services/lead-spam.ts'

const app = await leadsApp(t)
const OWNER = app.vars.OWNER_KEY_A!
const ADMIN = app.vars.ADMIN_KEY_A!
const VIEWER = app.vars.VIEWER_KEY_A!
const OWNER_B = app.vars.OWNER_KEY_B!
const FORBIDDEN = 'Leads belong to the installation: only Owners and Admins of the organization that holds them (LEADS_ORGANIZATION_ID) may read them'

function demo(email: string, extra: Record<string, unknown> = {}) {
  return { first_name: 'Ada', last_name: 'Lovelace', email, company: 'Engines', linkedin: 'https://www.linkedin.com/in/ada', ...extra }
}

let clients = 0

/** Each post from a client address of its own, so two answers carry the same rate-limit count. */
async function post(path: string, json: unknown) {
  clients++
  const conn = { remoteAddress: `10.9.${clients >> 8}.${clients & 255}` }
  const response = await app.request(path, { method: 'POST', json, headers: { origin: 'https://www.example.com' }, conn })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

async function patch(list: string, json: unknown, token = OWNER) {
  return app.call('PATCH', `/leads/lists/${list}/spam`, { token, json })
}

/** Every header but the two that differ on any two answers. */
function comparable(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {}
  headers.forEach((value, name) => {
    if (name !== 'x-request-id' && name !== 'date') out[name] = value
  })
  return out
}

async function leadEvents(): Promise<number> {
  const row = await app.db.selectFrom('audit_events').select((eb) => eb.fn.countAll<number>().as('n')).where('type', '=', 'lead.created').executeTakeFirstOrThrow()
  return Number(row.n)
}

const inList = async (table: 'demo_requests' | 'newsletter_subscriptions', email: string) =>
  (await app.db.selectFrom(table).select('id').where('email_normalized', '=', email.toLowerCase()).execute()).length

t.test('settings: everything off by default; read by Owners and Admins of the holder, changed by Owners only', async (t) => {
  const read = await app.call('GET', '/leads/lists/newsletter/spam', { token: ADMIN })
  t.equal(read.status, 200)
  t.same(await jsonOf(read), {
    list: 'newsletter',
    honeypot_field: null,
    captcha_provider: null,
    captcha_secret_set: false,
    captcha_token_field: null,
    captcha_verify_url: null,
    captcha_fail_mode: 'closed',
    retention_days: null,
    retention_days_effective: 30,
    updated_at: null,
  })
  for (const [token, path, who] of [
    [VIEWER, '/leads/lists/newsletter/spam', 'a Viewer'],
    [OWNER_B, '/leads/lists/newsletter/spam', "another organization's Owner"],
    [OWNER_B, '/leads/spam', "another organization's Owner (spam list)"],
    [VIEWER, '/leads/spam', 'a Viewer (spam list)'],
  ] as const) {
    const response = await app.call('GET', path, { token })
    t.equal(response.status, 403, who)
  }
  const b = await app.call('GET', '/leads/lists/newsletter/spam', { token: OWNER_B })
  t.same(await jsonOf(b), { status: 'Forbidden', error: FORBIDDEN })
  const byAdmin = await patch('newsletter', { honeypot_field: 'website' }, ADMIN)
  t.equal(byAdmin.status, 403)
  t.same(await jsonOf(byAdmin), { status: 'Forbidden', error: "Only Owners change the lead lists' spam settings" })
  t.equal((await patch('newsletter', { honeypot_field: 'website' }, OWNER_B)).status, 403)
  t.equal((await app.call('GET', '/leads/lists/nope/spam', { token: OWNER })).status, 404)
  const refusals: [unknown, string][] = [
    [{}, 'Request body names no field to change'],
    [{ honeypot_field: 'email' }, 'Field honeypot_field cannot be email: the form or a CAPTCHA widget uses that field'],
    [{ honeypot_field: '1bad name' }, 'Field honeypot_field must be a form field name: a letter or _, then letters, digits, _ . or -, at most 64'],
    [{ captcha_provider: 'turnstile' }, 'Field captcha_secret is required while captcha_provider is set'],
    [{ captcha_provider: 'other' }, 'Field captcha_provider must be turnstile, hcaptcha, recaptcha or null'],
    [{ retention_days: 0 }, 'Field retention_days must be a whole number from 1 to 3650 or null'],
    [{ captcha_verify_url: 'ftp://x.example' }, 'Field captcha_verify_url must be an absolute http(s) URL'],
    [{ captcha_secret_set: true }, 'Field captcha_secret_set is read-only'],
  ]
  for (const [body, error] of refusals) {
    const response = await patch('newsletter', body)
    t.same({ status: response.status, body: await jsonOf(response) }, { status: 400, body: { status: 'Bad Request', error } }, JSON.stringify(body))
  }
})

t.test('honeypot: a hit answers exactly as a stored lead, is kept as spam, never a lead, an event or a mail', async (t) => {
  for (const list of ['newsletter', 'demo-requests']) t.equal((await patch(list, { honeypot_field: 'website' })).status, 200)
  const hook = await app.call('POST', '/webhooks', { token: OWNER, json: { url: 'https://hooks.example.com/leads', event_types: ['lead.created'] } })
  t.equal(hook.status, 201)
  const webhookId = (await jsonOf(hook)).webhook_id
  const events = await leadEvents()
  const real = nextEmail('real')
  const bot = nextEmail('bot')
  const cases = [
    ['/newsletter', { email: real }, { email: bot, website: 'http://spam.example' }],
    ['/waitlist', { email: nextEmail('real') }, { email: nextEmail('bot'), website: 'x' }],
    ['/demo-request', demo(nextEmail('real')), demo(nextEmail('bot'), { website: 'yes' })],
  ] as const
  for (const [path, person, spam] of cases) {
    const human = await post(path, person)
    const caught = await post(path, spam)
    t.same({ status: caught.status, text: caught.text, headers: comparable(caught.headers) }, { status: human.status, text: human.text, headers: comparable(human.headers) }, `${path}: the same answer`)
    t.equal(caught.status, 200)
    t.equal(caught.text, '{"message":"OK"}')
  }
  // A registered email: a real repeat answers 409, and so does a hit.
  const repeat = await post('/newsletter', { email: real })
  const repeatCaught = await post('/newsletter', { email: real, website: 'x' })
  t.same({ status: repeatCaught.status, text: repeatCaught.text, headers: comparable(repeatCaught.headers) }, { status: repeat.status, text: repeat.text, headers: comparable(repeat.headers) })
  t.equal(repeat.status, 409)
  // An empty honeypot is a person.
  const blank = nextEmail('blank')
  t.equal((await post('/newsletter', { email: blank, website: '  ' })).status, 200)
  t.equal(await inList('newsletter_subscriptions', blank), 1)

  t.equal(await leadEvents(), events + 4, 'lead.created only for the three people and the blank honeypot')
  // Fan the events out to the webhook (the server's own pass may do it first). On PostgreSQL a pass stops
  // below the oldest transaction still running anywhere on the server, so wait for the last person's
  // event (the blank honeypot, posted after every bot): by then a bot's event would be there too.
  const deliveries = async () => app.db.selectFrom('webhook_deliveries').select(['type', 'payload']).where('webhook_id', '=', webhookId).execute()
  for (let tries = 0; tries < 100 && (await deliveries()).length < 4; tries++) {
    await fanOut(app.db, new Date(app.clock.now), webhookPayloads('https://api.example.com'))
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const delivered = await deliveries()
  t.equal(delivered.length, 4, 'a webhook delivery for each person, none for a bot')
  const ids = new Set((await app.db.selectFrom('newsletter_subscriptions').select('id').where('email_normalized', 'like', 'bot-%').execute()).map((row) => Number(row.id)))
  t.equal(ids.size, 0)
  t.ok(delivered.every((delivery) => delivery.type === 'lead.created' && !delivery.payload.includes('bot-')))
  t.equal((await app.call('DELETE', `/webhooks/${webhookId}`, { token: OWNER })).status, 204)
  t.equal(await inList('newsletter_subscriptions', bot), 0)
  const exported: string[] = []
  for (const list of ['demo', 'newsletter'] as const) for await (const lead of streamLeads(app.db, list)) exported.push(lead.email)
  t.notOk(exported.some((email) => email.startsWith('bot-')), 'no bot in the export')
  const listed = await jsonOf(await app.call('GET', '/leads/newsletter?limit=100', { token: OWNER }))
  t.notOk(listed.leads.some((lead: { email: string }) => lead.email.startsWith('bot-')), 'no bot in the console list')
  const mails = await app.db.selectFrom('lead_mail_outbox').select('id').where('email_normalized', 'like', 'bot-%').execute()
  t.equal(mails.length, 0, 'no notification or confirmation mail')
  const spam = await app.db.selectFrom('lead_spam').selectAll().where('email_normalized', '=', bot).executeTakeFirstOrThrow()
  t.match(spam, { list: 'newsletter', reason: 'honeypot', via: '/newsletter', fields: { email: bot } })
  t.notOk('website' in (spam.fields as object), 'the honeypot value is not kept')
  for (const list of ['newsletter', 'demo-requests']) await patch(list, { honeypot_field: null })
})

t.test('CAPTCHA: valid, invalid, reused and missing tokens against a local stub', async (t) => {
  const stub = await startCaptchaStub(t)
  const set = await patch('newsletter', { captcha_provider: 'turnstile', captcha_secret: 'stub-secret-1', captcha_verify_url: stub.url })
  t.equal(set.status, 200)
  t.match(await jsonOf(set), { captcha_provider: 'turnstile', captcha_secret_set: true, captcha_token_field: 'cf-turnstile-response', captcha_verify_url: stub.url, captcha_fail_mode: 'closed' })
  const stored = await app.db.selectFrom('lead_spam_settings').select('captcha_secret_sealed').where('list', '=', 'newsletter').executeTakeFirstOrThrow()
  t.notMatch(stored.captcha_secret_sealed, /stub-secret-1/, 'sealed at rest')
  t.notMatch(JSON.stringify(await jsonOf(await app.call('GET', '/leads/lists/newsletter/spam', { token: OWNER }))), /stub-secret-1/, 'never shown')

  const missing = await post('/newsletter', { email: nextEmail('captcha') })
  t.same({ status: missing.status, text: missing.text }, { status: 400, text: JSON.stringify({ error: CAPTCHA_MISSING }) })
  const invalidEmail = nextEmail('captcha')
  const invalid = await post('/newsletter', { email: invalidEmail, 'cf-turnstile-response': 'bad-token' })
  t.same({ status: invalid.status, text: invalid.text }, { status: 400, text: JSON.stringify({ error: CAPTCHA_FAILED }) })
  t.equal(await inList('newsletter_subscriptions', invalidEmail), 0)

  const email = nextEmail('captcha')
  const valid = await post('/newsletter', { email, 'cf-turnstile-response': 'good-1' })
  t.same({ status: valid.status, text: valid.text }, { status: 200, text: '{"message":"OK"}' })
  t.equal(await inList('newsletter_subscriptions', email), 1)
  t.same(stub.calls.at(-1), { secret: 'stub-secret-1', response: 'good-1', remoteip: `10.9.${clients >> 8}.${clients & 255}` })

  const calls = stub.calls.length
  const reused = await post('/newsletter', { email: nextEmail('captcha'), 'cf-turnstile-response': 'good-1' })
  t.same({ status: reused.status, text: reused.text }, { status: 400, text: JSON.stringify({ error: CAPTCHA_FAILED }) })
  t.equal(stub.calls.length, calls, 'a reused token is refused without asking the provider')
  // Two racing posts of one token: exactly one passes.
  const race = await Promise.all([1, 2].map(() => post('/newsletter', { email: nextEmail('race'), 'cf-turnstile-response': 'good-race' })))
  t.same(race.map((answer) => answer.status).sort(), [200, 400])

  // The other providers read their own field.
  const hc = await patch('demo-requests', { captcha_provider: 'hcaptcha', captcha_secret: 'h-secret', captcha_verify_url: stub.url })
  t.match(await jsonOf(hc), { captcha_token_field: 'h-captcha-response' })
  t.equal((await post('/demo-request', demo(nextEmail('hc'), { 'cf-turnstile-response': 'good-hc-wrong-field' }))).status, 400)
  t.equal((await post('/demo-request', demo(nextEmail('hc'), { 'h-captcha-response': 'good-hc' }))).status, 200)
  const rc = await patch('demo-requests', { captcha_provider: 'recaptcha', captcha_verify_url: null })
  t.match(await jsonOf(rc), { captcha_token_field: 'g-recaptcha-response', captcha_verify_url: 'https://www.google.com/recaptcha/api/siteverify' })
  await patch('demo-requests', { captcha_provider: null, captcha_secret: null })
})

t.test('CAPTCHA provider down: fail closed (default) refuses with 503 and gives the token back; fail open keeps the submission as spam', async (t) => {
  const stub = await startCaptchaStub(t)
  const down = await downUrl(t)
  await patch('newsletter', { captcha_provider: 'turnstile', captcha_secret: 'stub-secret-2', captcha_verify_url: down, captcha_fail_mode: 'closed' })
  const email = nextEmail('closed')
  const refused = await post('/newsletter', { email, 'cf-turnstile-response': 'good-down' })
  t.same({ status: refused.status, text: refused.text, retry: refused.headers.get('retry-after') }, { status: 503, text: JSON.stringify({ error: CAPTCHA_UNAVAILABLE }), retry: '30' })
  t.equal(await inList('newsletter_subscriptions', email), 0)
  t.equal((await app.db.selectFrom('lead_spam').select('id').where('email_normalized', '=', email).execute()).length, 0)
  t.ok(app.logs.some((line) => line.message === 'CAPTCHA provider unavailable'))
  // The provider back: the same token goes through (it was given back, not spent).
  await patch('newsletter', { captcha_verify_url: stub.url })
  t.equal((await post('/newsletter', { email, 'cf-turnstile-response': 'good-down' })).status, 200)

  await patch('newsletter', { captcha_verify_url: down, captcha_fail_mode: 'open' })
  const openEmail = nextEmail('open')
  const kept = await post('/newsletter', { email: openEmail, 'cf-turnstile-response': 'good-open' })
  t.same({ status: kept.status, text: kept.text }, { status: 200, text: '{"message":"OK"}' })
  t.equal(await inList('newsletter_subscriptions', openEmail), 0, 'not a lead')
  const spam = await app.db.selectFrom('lead_spam').selectAll().where('email_normalized', '=', openEmail).executeTakeFirstOrThrow()
  t.equal(spam.reason, 'captcha_unavailable')
  // Fail open still refuses what the provider can judge: a missing token.
  t.equal((await post('/newsletter', { email: nextEmail('open') })).status, 400)
  await patch('newsletter', { captcha_provider: null, captcha_secret: null, captcha_verify_url: null, captcha_fail_mode: 'closed' })
})

t.test('spam list and restore: Owners and Admins of the holder; the duplicate rule holds', async (t) => {
  await patch('newsletter', { honeypot_field: 'website' })
  const a = nextEmail('restore')
  const b = nextEmail('dup')
  await post('/newsletter', { email: a, website: 'x' })
  await post('/newsletter', { email: b, website: 'x' })
  await post('/newsletter', { email: b })
  const page = await app.call('GET', '/leads/spam?list=newsletter&limit=2', { token: ADMIN })
  t.equal(page.status, 200)
  const body = await jsonOf(page)
  t.equal(body.spam.length, 2)
  t.match(body.spam[0], { list: 'newsletter', email: b, reason: 'honeypot', via: '/newsletter', fields: { email: b } })
  t.equal(body.spam[1].email, a)
  t.equal(body.spam[0].purge_after, new Date(Date.parse(body.spam[0].received_at) + 30 * 86_400_000).toISOString())
  t.type(body.next_cursor, 'string')
  const next = await jsonOf(await app.call('GET', `/leads/spam?list=newsletter&limit=2&cursor=${encodeURIComponent(body.next_cursor)}`, { token: ADMIN }))
  t.notOk(next.spam.some((row: { id: number }) => row.id === body.spam[0].id || row.id === body.spam[1].id), 'the next page goes on')
  t.equal((await app.call('GET', '/leads/spam?list=other', { token: ADMIN })).status, 400)

  const [idB, idA] = [body.spam[0].id, body.spam[1].id]
  for (const token of [VIEWER, OWNER_B]) t.equal((await app.call('POST', `/leads/spam/${idA}/restore`, { token })).status, 403)
  const restored = await app.call('POST', `/leads/spam/${idA}/restore`, { token: ADMIN })
  t.equal(restored.status, 200)
  const answer = await jsonOf(restored)
  t.match(answer, { restored: true, list: 'newsletter' })
  t.equal(await inList('newsletter_subscriptions', a), 1, 'now a lead')
  const event = await app.db.selectFrom('audit_events').selectAll().where('type', '=', 'lead.created').where('target_id', '=', `newsletter:${answer.lead_id}`).executeTakeFirstOrThrow()
  t.notMatch(JSON.stringify(event.data), new RegExp(a.split('@')[0]!), 'the event holds no address')
  t.same((await app.call('POST', `/leads/spam/${idA}/restore`, { token: ADMIN })).status, 404, 'gone from the spam')

  const dup = await app.call('POST', `/leads/spam/${idB}/restore`, { token: OWNER })
  t.same({ status: dup.status, body: await jsonOf(dup) }, { status: 409, body: { status: 'Conflict', error: 'This email is already on the list; the spam submission was kept' } })
  t.equal((await app.db.selectFrom('lead_spam').select('id').where('id', '=', idB).execute()).length, 1)
  for (const id of ['999999999', 'abc', '0']) t.equal((await app.call('POST', `/leads/spam/${id}/restore`, { token: OWNER })).status, 404, id)
  await patch('newsletter', { honeypot_field: null })
})

t.test('purge: spam older than its list retention goes, the rest stays; used tokens are forgotten after their lifetime', async (t) => {
  const now = app.clock.now
  const day = 86_400_000
  await app.db.deleteFrom('lead_spam').execute()
  await app.db.deleteFrom('lead_spam_captcha_tokens').execute()
  await patch('demo-requests', { retention_days: 60 })
  const insert = (list: 'newsletter' | 'demo-requests', email: string, ageDays: number) =>
    app.db.insertInto('lead_spam').values({ list, email, email_normalized: email, fields: JSON.stringify({ email }), reason: 'honeypot', via: '/x', received_at: new Date(now - ageDays * day) }).execute()
  await insert('newsletter', 'old@example.com', 31)
  await insert('newsletter', 'young@example.com', 29)
  await insert('demo-requests', 'kept-longer@example.com', 31)
  await insert('demo-requests', 'too-old@example.com', 61)
  await app.db.insertInto('lead_spam_captcha_tokens').values([{ token_sha256: 'a'.repeat(64), expires_at: new Date(now - 1) }, { token_sha256: 'b'.repeat(64), expires_at: new Date(now + 60_000) }]).execute()
  const purge = startSpamPurge(app.db, () => now, memoryLogger(), 30, 3_600_000)
  t.teardown(() => purge.stop())
  t.same(await purge.run(), { spam: 2, tokens: 1 })
  const left = await sql<{ email: string }>`select email from lead_spam order by email`.execute(app.db)
  t.same(left.rows.map((row) => row.email), ['kept-longer@example.com', 'young@example.com'])
  const tokens = await app.db.selectFrom('lead_spam_captcha_tokens').select('token_sha256').execute()
  t.same(tokens.map((row) => row.token_sha256), ['b'.repeat(64)])
  await patch('demo-requests', { retention_days: null })
})

t.test('the verify URL goes through the SSRF guard unless CAPTCHA_ALLOW_PRIVATE=true', async (t) => {
  const guarded = await leadsApp(t, { CAPTCHA_ALLOW_PRIVATE: 'false' })
  const owner = guarded.vars.OWNER_KEY_A!
  const stub = await startCaptchaStub(t)
  const refusals: [string, string][] = [
    [stub.url, 'Field captcha_verify_url must be an https URL (plain http only with CAPTCHA_ALLOW_PRIVATE=true)'],
    ['https://127.0.0.1/siteverify', 'Field captcha_verify_url is refused: 127.0.0.1 is a loopback address (allowed only with CAPTCHA_ALLOW_PRIVATE=true)'],
    ['https://10.1.2.3/siteverify', 'Field captcha_verify_url is refused: 10.1.2.3 is a private address (allowed only with CAPTCHA_ALLOW_PRIVATE=true)'],
  ]
  for (const [url, error] of refusals) {
    const response = await guarded.call('PATCH', '/leads/lists/newsletter/spam', { token: owner, json: { captcha_provider: 'turnstile', captcha_secret: 's', captcha_verify_url: url } })
    t.same({ status: response.status, body: await jsonOf(response) }, { status: 400, body: { status: 'Bad Request', error } }, url)
  }
  // A name that resolves to loopback passes the check when set (it may not resolve yet) but never connects:
  // the provider counts as down, so the default fail mode refuses.
  const named = stub.url.replace('http://127.0.0.1', 'https://localhost')
  const set = await guarded.call('PATCH', '/leads/lists/newsletter/spam', { token: owner, json: { captcha_provider: 'turnstile', captcha_secret: 's' } })
  t.equal(set.status, 200)
  await guarded.db.updateTable('lead_spam_settings').set({ captcha_verify_url: named }).where('list', '=', 'newsletter').execute()
  const calls = stub.calls.length
  const answer = await guarded.request('/newsletter', { method: 'POST', json: { email: nextEmail('ssrf'), 'cf-turnstile-response': 'good-ssrf' } })
  t.equal(answer.status, 503)
  t.equal(stub.calls.length, calls, 'the stub was never reached')
  t.ok(guarded.logs.some((line) => line.message === 'CAPTCHA provider unavailable' && /refused: localhost resolves to/.test(String(line.fields?.error))))
})
