// The lead-capture rules of docs/api.md: every rule of the public lead surface,
// checked through the handler (no port) on a real database (PGlite, or TEST_DATABASE_URL).
import t from 'tap'
import { createTestApp, DATABASE_KIND, type TestApp } from '../support/helpers.ts'
import { nextEmail } from '../support/helpers.ts'

const app = await createTestApp(t)

/** A fresh address per test: the file shares one database. */
const uniqueEmail = (prefix = 'lead'): string => nextEmail(prefix)

function demo(email: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    first_name: 'Ada',
    last_name: 'Lovelace',
    email,
    company: 'Analytical Engines',
    linkedin: 'https://www.linkedin.com/in/ada',
    ...extra,
  }
}

async function post(path: string, json: unknown, headers: Record<string, string> = {}, on: TestApp = app): Promise<{ status: number; text: string; headers: Headers }> {
  const response = await on.request(path, { method: 'POST', json, headers })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

async function demoRow(email: string) {
  return app.db.selectFrom('demo_requests').selectAll().where('email_normalized', '=', email.trim().toLowerCase()).execute()
}

async function newsletterRows(email: string) {
  return app.db.selectFrom('newsletter_subscriptions').selectAll().where('email_normalized', '=', email.trim().toLowerCase()).execute()
}

const OK = '{"message":"OK"}'
const ALREADY = '{"message":"Already registered"}'
const MISSING = '{"error":"Missing required fields"}'
const INVALID = '{"error":"Invalid email"}'

t.test('happy path', async (t) => {
  t.test('POST /demo-request answers 200 {"message":"OK"} as JSON for a new submission', async (t) => {
    const response = await post('/demo-request', demo(uniqueEmail()))
    t.equal(response.status, 200)
    t.equal(response.text, OK)
    t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  })

  t.test('POST /newsletter answers 200 {"message":"OK"} for a new email', async (t) => {
    const response = await post('/newsletter', { email: uniqueEmail('news') })
    t.equal(response.status, 200)
    t.equal(response.text, OK)
    t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  })

  t.test('POST /demo-request stores every field trimmed, with source, analytics id and the clock time', async (t) => {
    const email = uniqueEmail('Stored')
    const at = app.clock.now
    const response = await post(
      '/demo-request',
      demo(`  ${email.toUpperCase()}\t`, {
        first_name: '  Ada ',
        last_name: ' Lovelace  ',
        company: '\nAnalytical Engines ',
        linkedin: ' https://www.linkedin.com/in/ada ',
        phone: ' +44 20 7946 0000 ',
        source: ' pricing-page ',
        analytics_distinct_id: ' ph_123 ',
      }),
    )
    t.equal(response.status, 200)
    const rows = await demoRow(email)
    t.equal(rows.length, 1)
    const row = rows[0]!
    t.equal(row.email, email.toUpperCase())
    t.equal(row.email_normalized, email.toLowerCase())
    t.equal(row.first_name, 'Ada')
    t.equal(row.last_name, 'Lovelace')
    t.equal(row.company, 'Analytical Engines')
    t.equal(row.linkedin, 'https://www.linkedin.com/in/ada')
    t.equal(row.phone, '+44 20 7946 0000')
    t.equal(row.source, 'pricing-page')
    t.equal(row.analytics_distinct_id, 'ph_123')
    t.equal(new Date(row.received_at).toISOString(), new Date(at).toISOString())
  })

  t.test('POST /demo-request stores absent, null and empty optional fields as null', async (t) => {
    const a = uniqueEmail()
    const b = uniqueEmail()
    t.equal((await post('/demo-request', demo(a))).status, 200)
    t.equal((await post('/demo-request', demo(b, { phone: null, source: '   ', analytics_distinct_id: '' }))).status, 200)
    for (const email of [a, b]) {
      const [row] = await demoRow(email)
      t.equal(row?.phone, null)
      t.equal(row?.source, null)
      t.equal(row?.analytics_distinct_id, null)
    }
  })

  t.test('POST /newsletter stores the email trimmed, source, analytics id, the path and the clock time', async (t) => {
    const email = uniqueEmail('news')
    app.clock.advance(1234)
    const response = await post('/newsletter', { email: ` ${email} `, source: ' footer ', analytics_distinct_id: ' ph_9 ' })
    t.equal(response.status, 200)
    const rows = await newsletterRows(email)
    t.equal(rows.length, 1)
    t.equal(rows[0]!.email, email)
    t.equal(rows[0]!.source, 'footer')
    t.equal(rows[0]!.analytics_distinct_id, 'ph_9')
    t.equal(rows[0]!.via, '/newsletter')
    t.equal(new Date(rows[0]!.received_at).toISOString(), new Date(app.clock.now).toISOString())
  })

  t.test('POST /newsletter ignores unknown fields', async (t) => {
    const email = uniqueEmail('news')
    const response = await post('/newsletter', { email, first_name: 'Ada', utm_campaign: 'x', nested: { a: [1, 2] }, consent: true })
    t.equal(response.status, 200)
    t.equal(response.text, OK)
    const [row] = await newsletterRows(email)
    t.equal(row?.email, email)
  })

  t.test('POST /demo-request ignores unknown fields', async (t) => {
    const response = await post('/demo-request', demo(uniqueEmail(), { job_title: 'CTO', employees: 500, tags: ['a'] }))
    t.equal(response.status, 200)
    t.equal(response.text, OK)
  })

  t.test('text/plain holding JSON is accepted, as websites send it to avoid a preflight', async (t) => {
    const email = uniqueEmail('plain')
    const response = await app.request('/newsletter', { method: 'POST', body: JSON.stringify({ email }), headers: { 'content-type': 'text/plain;charset=UTF-8' } })
    t.equal(response.status, 200)
    t.equal(await response.text(), OK)
    const demoResponse = await app.request('/demo-request', { method: 'POST', body: JSON.stringify(demo(email)), headers: { 'content-type': 'text/plain' } })
    t.equal(demoResponse.status, 200)
  })

  t.test('application/json with a charset parameter and in upper case is accepted', async (t) => {
    const response = await post('/newsletter', { email: uniqueEmail('charset') }, { 'content-type': 'Application/JSON; charset=utf-8' })
    t.equal(response.status, 200)
  })

  t.test('a query string (e.g. UTM tags) on a lead path changes nothing', async (t) => {
    const response = await post('/newsletter?utm_source=site&utm_campaign=spring', { email: uniqueEmail('utm') })
    t.equal(response.status, 200)
    t.equal(response.text, OK)
  })

  t.test('Service-Api-Version with any value changes nothing', async (t) => {
    for (const version of ['1.0.0', 'v1', 'v2', '99.1.0', 'nonsense', '']) {
      const newsletter = await post('/newsletter', { email: uniqueEmail('version') }, { 'service-api-version': version })
      t.equal(newsletter.status, 200, `newsletter with ${JSON.stringify(version)}`)
      t.equal(newsletter.text, OK)
      t.equal(newsletter.headers.get('deprecation'), null)
      const email = uniqueEmail('version')
      const first = await post('/demo-request', demo(email), { 'service-api-version': version })
      t.equal(first.status, 200, `demo with ${JSON.stringify(version)}`)
      const again = await post('/demo-request', demo(email), { 'service-api-version': version })
      t.equal(again.status, 409)
      t.equal(again.text, ALREADY)
      const bad = await post('/demo-request', demo('nope'), { 'service-api-version': version })
      t.equal(bad.text, INVALID)
    }
  })
})

t.test('duplicates', async (t) => {
  t.test('POST /newsletter answers 409 for the same email in another case', async (t) => {
    const email = uniqueEmail('dup')
    t.equal((await post('/newsletter', { email })).status, 200)
    const again = await post('/newsletter', { email: `  ${email.toUpperCase()} ` })
    t.equal(again.status, 409)
    t.equal(again.text, ALREADY)
    t.equal(again.headers.get('content-type'), 'application/json; charset=utf-8')
    t.equal((await newsletterRows(email)).length, 1)
  })

  t.test('POST /demo-request answers 409 for the same email with other details, and keeps the first', async (t) => {
    const email = uniqueEmail('dup')
    t.equal((await post('/demo-request', demo(email))).status, 200)
    const again = await post('/demo-request', demo(email.replace('dup', 'DUP'), { first_name: 'Grace', company: 'Navy' }))
    t.equal(again.status, 409)
    t.equal(again.text, ALREADY)
    const rows = await demoRow(email)
    t.equal(rows.length, 1)
    t.equal(rows[0]!.first_name, 'Ada')
  })

  t.test('the demo list and the newsletter list are separate', async (t) => {
    const email = uniqueEmail('both')
    t.equal((await post('/demo-request', demo(email))).status, 200)
    t.equal((await post('/newsletter', { email })).status, 200)
    t.equal((await post('/newsletter', { email })).status, 409)
    t.equal((await post('/demo-request', demo(email))).status, 409)
  })

  t.test('POST /waitlist shares the newsletter list in both directions', async (t) => {
    const first = uniqueEmail('wait')
    t.equal((await post('/waitlist', { email: first })).status, 200)
    const again = await post('/newsletter', { email: first.toUpperCase() })
    t.equal(again.status, 409)
    t.equal(again.text, ALREADY)
    const [row] = await newsletterRows(first)
    t.equal(row?.via, '/waitlist')

    const second = uniqueEmail('wait')
    t.equal((await post('/newsletter', { email: second })).status, 200)
    const viaWaitlist = await post('/waitlist', { email: second })
    t.equal(viaWaitlist.status, 409)
    t.equal(viaWaitlist.text, ALREADY)
  })

  t.test(`50 concurrent identical submissions give exactly one 200, 49 × 409 and one row (${DATABASE_KIND})`, async (t) => {
    for (const [path, body, rows] of [
      ['/demo-request', (email: string) => demo(email), demoRow],
      ['/newsletter', (email: string) => ({ email }), newsletterRows],
    ] as const) {
      const email = uniqueEmail('race')
      const responses = await Promise.all(Array.from({ length: 50 }, () => post(path, body(email))))
      const statuses = responses.map((r) => r.status)
      t.equal(statuses.filter((s) => s === 200).length, 1, `${path}: one 200`)
      t.equal(statuses.filter((s) => s === 409).length, 49, `${path}: 49 × 409`)
      t.equal(responses.filter((r) => r.text === ALREADY).length, 49)
      t.equal((await rows(email)).length, 1, `${path}: one row`)
    }
  })
})

t.test('POST /waitlist, the legacy alias', async (t) => {
  const DEPRECATION = '@1767225599'
  const SUNSET = 'Sun, 31 Jan 2027 23:59:59 GMT'
  const LINK = '<https://app.example.com/openapi.json>; rel="deprecation", <https://app.example.com/openapi.json>; rel="sunset"'

  t.test('answers 200 with Deprecation, Sunset and Link headers', async (t) => {
    const response = await post('/waitlist', { email: uniqueEmail('wait') })
    t.equal(response.status, 200)
    t.equal(response.text, OK)
    t.equal(response.headers.get('deprecation'), DEPRECATION)
    t.equal(response.headers.get('sunset'), SUNSET)
    t.equal(response.headers.get('link'), LINK)
  })

  t.test('carries the lifecycle headers on 400 and 409 too', async (t) => {
    const email = uniqueEmail('wait')
    await post('/waitlist', { email })
    for (const [response, status] of [
      [await post('/waitlist', { email }), 409],
      [await post('/waitlist', { email: 'bad' }), 400],
    ] as const) {
      t.equal(response.status, status)
      t.equal(response.headers.get('deprecation'), DEPRECATION)
      t.equal(response.headers.get('sunset'), SUNSET)
      t.equal(response.headers.get('link'), LINK)
    }
  })

  t.test('/newsletter and /demo-request carry no lifecycle headers', async (t) => {
    for (const response of [await post('/newsletter', { email: uniqueEmail() }), await post('/demo-request', demo(uniqueEmail()))]) {
      t.equal(response.headers.get('deprecation'), null)
      t.equal(response.headers.get('sunset'), null)
      t.equal(response.headers.get('link'), null)
    }
  })

  t.test('answers 410 naming /newsletter once the sunset has passed, and stores nothing', async (t) => {
    const late = await createTestApp(t, { database: app.database })
    late.clock.now = Date.parse('2027-02-01T00:00:00Z')
    const email = uniqueEmail('late')
    const response = await post('/waitlist', { email }, {}, late)
    t.equal(response.status, 410)
    t.equal(response.text, JSON.stringify({ error: 'This endpoint was retired on Sun, 31 Jan 2027 23:59:59 GMT; use /newsletter instead' }))
    t.equal(response.headers.get('sunset'), SUNSET)
    t.equal((await newsletterRows(email)).length, 0)
    t.equal((await post('/newsletter', { email }, {}, late)).status, 200)
  })
})

t.test('validation errors', async (t) => {
  t.test('POST /demo-request answers "Missing required fields" for each missing required field', async (t) => {
    for (const field of ['first_name', 'last_name', 'email', 'company', 'linkedin']) {
      const body = demo(uniqueEmail())
      delete body[field]
      const response = await post('/demo-request', body)
      t.equal(response.status, 400, `without ${field}`)
      t.equal(response.text, MISSING, `without ${field}`)
      t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
    }
  })

  t.test('POST /demo-request counts empty, whitespace-only and null required strings as missing', async (t) => {
    for (const field of ['first_name', 'last_name', 'email', 'company', 'linkedin']) {
      for (const value of ['', '   ', '\t\n', null]) {
        const response = await post('/demo-request', demo(uniqueEmail(), { [field]: value }))
        t.equal(response.text, MISSING, `${field} = ${JSON.stringify(value)}`)
        t.equal(response.status, 400)
      }
    }
  })

  t.test('POST /demo-request: "Missing required fields" wins over "Invalid email"', async (t) => {
    const response = await post('/demo-request', { first_name: 'Ada', email: 'not-an-email' })
    t.equal(response.status, 400)
    t.equal(response.text, MISSING)
    const blank = await post('/demo-request', demo('two@@example.com', { company: '  ' }))
    t.equal(blank.text, MISSING)
  })

  t.test('POST /demo-request answers "Invalid email" when only the email is bad', async (t) => {
    const response = await post('/demo-request', demo('ada at example.com'))
    t.equal(response.status, 400)
    t.equal(response.text, INVALID)
  })

  t.test('POST /demo-request with an empty object answers "Missing required fields"', async (t) => {
    const response = await post('/demo-request', {})
    t.equal(response.status, 400)
    t.equal(response.text, MISSING)
  })

  t.test('POST /newsletter answers "Invalid email" when the email is missing, empty, blank or null', async (t) => {
    for (const body of [{}, { email: '' }, { email: '   ' }, { email: null }, { source: 'x' }]) {
      const response = await post('/newsletter', body)
      t.equal(response.status, 400, JSON.stringify(body))
      t.equal(response.text, INVALID, JSON.stringify(body))
    }
  })

  t.test('nothing is stored for a refused submission', async (t) => {
    const email = uniqueEmail('refused')
    await post('/demo-request', demo(email, { company: '' }))
    t.equal((await demoRow(email)).length, 0)
  })
})

t.test('email rules', async (t) => {
  const local64 = 'a'.repeat(64)
  const domainFor254 = (local: string) => {
    // labels of 63 characters, then a tail, so the whole address is exactly 254 characters
    const remaining = 254 - local.length - 1
    const labels: string[] = []
    let left = remaining
    while (left > 64 + 4) {
      labels.push('b'.repeat(63))
      left -= 64
    }
    labels.push('c'.repeat(left - 4), 'com')
    return labels.join('.')
  }
  const exactly254 = `${'x'.repeat(60)}@${domainFor254('x'.repeat(60))}`
  const exactly255 = `${'x'.repeat(61)}@${domainFor254('x'.repeat(60))}`

  t.equal(exactly254.length, 254, 'the 254-character address is built right')
  // Test names in ASCII: a raw U+2028 in a TAP line would split it.
  const shown = (email: string) => JSON.stringify(email).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  t.equal(exactly255.length, 255)

  const valid = [
    "o'brien@example.com",
    'a+tag@example.com',
    'first.last@sub.example.co.uk',
    'UPPER@EXAMPLE.COM',
    `${local64}@example.com`,
    exactly254,
    'x@example.io',
  ]
  const invalid = [
    'plainaddress',
    '@example.com',
    'user@',
    'user@localhost',
    'two@@example.com',
    'a@b@example.com',
    'sp ace@example.com',
    'user@exa mple.com',
    'tab\there@example.com',
    'bell\u0007@example.com',
    'del\u007f@example.com',
    'c1\u0085control@example.com',
    'c1\u009fcontrol@example.com',
    'nbsp\u00a0@example.com',
    'zero\u2028sep@example.com',
    'new\nline@example.com',
    `${local64}a@example.com`,
    exactly255,
    '.lead@example.com',
    'trail.@example.com',
    'dou..ble@example.com',
    'user@-example.com',
    'user@example..com',
    'user@example.c',
    'user@example.123',
  ]

  t.test('valid addresses are accepted by both lists', async (t) => {
    for (const email of valid) {
      // Make each address unique without changing its shape: the demo and newsletter lists are separate.
      const d = await post('/demo-request', demo(email))
      t.ok(d.status === 200 || d.status === 409, `demo accepts ${shown(email)} (${d.status} ${d.text})`)
      const n = await post('/newsletter', { email })
      t.ok(n.status === 200 || n.status === 409, `newsletter accepts ${shown(email)} (${n.status} ${n.text})`)
    }
  })

  t.test('o\'brien@example.com and a+tag@example.com are stored as given', async (t) => {
    t.equal((await demoRow("o'brien@example.com")).length, 1)
    t.equal((await newsletterRows('a+tag@example.com'))[0]?.email, 'a+tag@example.com')
  })

  t.test('invalid addresses answer 400 "Invalid email" on both lists', async (t) => {
    for (const email of invalid) {
      const d = await post('/demo-request', demo(email))
      t.equal(d.status, 400, `demo refuses ${shown(email)}`)
      t.equal(d.text, INVALID, `demo refuses ${shown(email)}`)
      const n = await post('/newsletter', { email })
      t.equal(n.status, 400, `newsletter refuses ${shown(email)}`)
      t.equal(n.text, INVALID, `newsletter refuses ${shown(email)}`)
    }
  })

  t.test('an email that is not a string answers "Invalid email"', async (t) => {
    for (const email of [42, true, { a: 1 }, ['a@example.com']]) {
      t.equal((await post('/newsletter', { email })).text, INVALID, JSON.stringify(email))
      t.equal((await post('/demo-request', demo(email as never))).text, INVALID, JSON.stringify(email))
    }
  })
})

t.test('content types', async (t) => {
  t.test('another content type answers 415 with a JSON error', async (t) => {
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/html', 'application/xml']) {
      const response = await app.request('/newsletter', { method: 'POST', body: 'email=a%40example.com', headers: { 'content-type': type } })
      t.equal(response.status, 415, type)
      const media = type.split(';')[0]
      t.equal(await response.text(), JSON.stringify({ error: `Content-Type ${media} is not supported; send application/json` }))
      t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
    }
  })

  t.test('a form-encoded demo request answers 415 and stores nothing', async (t) => {
    const email = uniqueEmail('form')
    const response = await app.request('/demo-request', {
      method: 'POST',
      body: new URLSearchParams(demo(email) as Record<string, string>),
    })
    t.equal(response.status, 415)
    t.equal((await demoRow(email)).length, 0)
  })
})
