// CORS, rate limiting and lead capture (docs/api.md): the marketing website posts
// from another origin, reads every answer (errors included), and one client cannot flood the forms.
import t from 'tap'
import { createTestApp, FakeClock, openTestDatabase, type TestApp } from '../support/helpers.ts'
import { nextEmail } from '../support/helpers.ts'

const database = await openTestDatabase(t)

const uniqueEmail = (prefix = 'cors'): string => nextEmail(prefix)

const SITE = 'https://www.example.com'
const EXPOSED = ['Retry-After', 'Deprecation', 'Sunset', 'Link']

function exposed(response: Response): string[] {
  return (response.headers.get('access-control-expose-headers') ?? '').split(',').map((name) => name.trim().toLowerCase())
}

function preflightOf(app: TestApp, path: string, origin: string, requestHeaders = 'content-type, service-api-version'): Promise<Response> {
  return app.request(path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': requestHeaders },
  })
}

t.test('CORS with any origin (the default)', async (t) => {
  const app = await createTestApp(t, { database, env: { LEAD_RATE_LIMIT: '3/60' } })

  t.test('a preflight answers 204 with Allow-Origin *, Allow-Methods, Allow-Headers and Max-Age', async (t) => {
    for (const path of ['/newsletter', '/demo-request', '/waitlist']) {
      const response = await preflightOf(app, path, SITE)
      t.equal(response.status, 204, path)
      t.equal(await response.text(), '')
      t.equal(response.headers.get('access-control-allow-origin'), '*')
      t.equal(response.headers.get('access-control-allow-methods'), 'POST, OPTIONS')
      const allowed = (response.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim().toLowerCase())
      t.ok(allowed.includes('content-type'), 'Content-Type allowed')
      t.ok(allowed.includes('service-api-version'), 'Service-Api-Version allowed')
      t.equal(response.headers.get('access-control-max-age'), '7200')
      t.equal(response.headers.get('access-control-allow-credentials'), null)
    }
  })

  t.test('a preflight without Access-Control-Request-Headers still allows Content-Type and Service-Api-Version', async (t) => {
    const response = await app.request('/newsletter', { method: 'OPTIONS', headers: { origin: SITE, 'access-control-request-method': 'POST' } })
    t.equal(response.status, 204)
    const allowed = (response.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim().toLowerCase())
    t.ok(allowed.includes('content-type'))
    t.ok(allowed.includes('service-api-version'))
  })

  t.test('preflights are not counted by the rate limit', async (t) => {
    for (let i = 0; i < 10; i++) t.equal((await preflightOf(app, '/newsletter', SITE, 'content-type')).status, 204)
  })

  t.test('a plain OPTIONS (no preflight) answers 204 with Allow', async (t) => {
    const response = await app.request('/newsletter', { method: 'OPTIONS' })
    t.equal(response.status, 204)
    t.equal(response.headers.get('allow'), 'POST, OPTIONS')
  })

  t.test('a successful POST carries Allow-Origin * and exposes Retry-After, Deprecation, Sunset and Link', async (t) => {
    const response = await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() }, headers: { origin: SITE }, conn: { remoteAddress: '192.0.2.1' } })
    t.equal(response.status, 200)
    t.equal(response.headers.get('access-control-allow-origin'), '*')
    for (const name of EXPOSED) t.ok(exposed(response).includes(name.toLowerCase()), `${name} exposed`)
    t.equal(response.headers.get('access-control-allow-credentials'), null)
  })

  t.test('error responses 400, 404, 405, 413, 415 and 429 carry Allow-Origin', async (t) => {
    const conn = { remoteAddress: '192.0.2.2' }
    const headers = { origin: SITE }
    const bigBody = JSON.stringify({ email: uniqueEmail(), pad: 'x'.repeat(17 * 1024) })
    const responses: Array<[number, Response]> = [
      [400, await app.request('/newsletter', { method: 'POST', json: { email: 'bad' }, headers, conn })],
      [413, await app.request('/newsletter', { method: 'POST', body: bigBody, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(bigBody.length) }, conn })],
      [415, await app.request('/newsletter', { method: 'POST', body: 'email=x', headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' }, conn })],
      [429, await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() }, headers, conn })],
      [404, await app.request('/nowhere', { method: 'POST', json: {}, headers, conn })],
      [405, await app.request('/newsletter', { method: 'GET', headers, conn })],
    ]
    for (const [status, response] of responses) {
      t.equal(response.status, status)
      t.equal(response.headers.get('access-control-allow-origin'), '*', `${status} carries Allow-Origin`)
      t.ok(exposed(response).includes('retry-after'), `${status} exposes Retry-After`)
      t.equal(response.headers.get('access-control-allow-credentials'), null)
    }
  })

  t.test('/waitlist exposes its lifecycle headers to the page', async (t) => {
    const response = await app.request('/waitlist', { method: 'POST', json: { email: uniqueEmail() }, headers: { origin: SITE }, conn: { remoteAddress: '192.0.2.3' } })
    t.equal(response.status, 200)
    t.equal(response.headers.get('access-control-allow-origin'), '*')
    for (const name of ['deprecation', 'sunset', 'link']) {
      t.ok(response.headers.get(name), `${name} present`)
      t.ok(exposed(response).includes(name), `${name} exposed`)
    }
  })
})

t.test('CORS with an allow-list (CORS_ORIGINS)', async (t) => {
  const app = await createTestApp(t, { database, env: { CORS_ORIGINS: `${SITE}, https://app.example.com` } })

  t.test('an allowed origin is echoed with Vary: Origin on the preflight and the POST', async (t) => {
    const pre = await preflightOf(app, '/newsletter', SITE)
    t.equal(pre.status, 204)
    t.equal(pre.headers.get('access-control-allow-origin'), SITE)
    t.match(pre.headers.get('vary'), /\bOrigin\b/)
    t.equal(pre.headers.get('access-control-allow-methods'), 'POST, OPTIONS')
    const post = await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() }, headers: { origin: SITE } })
    t.equal(post.status, 200)
    t.equal(post.headers.get('access-control-allow-origin'), SITE)
    t.match(post.headers.get('vary'), /\bOrigin\b/)
    t.ok(exposed(post).includes('retry-after'))
    const error = await app.request('/newsletter', { method: 'POST', json: {}, headers: { origin: 'https://app.example.com' } })
    t.equal(error.status, 400)
    t.equal(error.headers.get('access-control-allow-origin'), 'https://app.example.com')
    t.equal(pre.headers.get('access-control-allow-credentials'), null)
    t.equal(post.headers.get('access-control-allow-credentials'), null)
  })

  t.test('another origin gets no Allow-Origin (but Vary: Origin), on the preflight and the POST', async (t) => {
    for (const origin of ['https://evil.example.net', 'https://www.example.com.evil.net', 'null', 'http://www.example.com']) {
      const pre = await preflightOf(app, '/newsletter', origin)
      t.equal(pre.headers.get('access-control-allow-origin'), null, origin)
      t.equal(pre.headers.get('access-control-allow-methods'), null)
      t.match(pre.headers.get('vary'), /\bOrigin\b/)
      const post = await app.request('/newsletter', { method: 'POST', json: { email: 'bad' }, headers: { origin } })
      t.equal(post.headers.get('access-control-allow-origin'), null, origin)
      t.match(post.headers.get('vary'), /\bOrigin\b/)
      t.equal(post.headers.get('access-control-allow-credentials'), null)
    }
  })

  t.test('a request without Origin gets no Allow-Origin', async (t) => {
    const response = await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() } })
    t.equal(response.status, 200)
    t.equal(response.headers.get('access-control-allow-origin'), null)
  })
})

t.test('rate limit per client (LEAD_RATE_LIMIT=3/60)', async (t) => {
  const clock = new FakeClock()
  const app = await createTestApp(t, { database, clock, env: { LEAD_RATE_LIMIT: '3/60' } })
  const send = (address: string, path = '/newsletter') =>
    app.request(path, { method: 'POST', json: { email: uniqueEmail('rl') }, conn: { remoteAddress: address } })

  t.test('three submissions pass with RateLimit headers; the fourth answers 429 with Retry-After', async (t) => {
    const remaining: string[] = []
    for (let i = 0; i < 3; i++) {
      const response = await send('198.51.100.1')
      t.equal(response.status, 200)
      t.equal(response.headers.get('ratelimit-policy'), '"leads";q=3;w=60')
      t.equal(response.headers.get('retry-after'), null)
      remaining.push(response.headers.get('ratelimit') ?? '')
    }
    t.same(remaining, ['"leads";r=2;t=60', '"leads";r=1;t=60', '"leads";r=0;t=60'])
    clock.advance(15_000)
    const refused = await send('198.51.100.1')
    t.equal(refused.status, 429)
    t.equal(await refused.text(), JSON.stringify({ error: 'Too many submissions from this client; retry later' }))
    t.equal(refused.headers.get('content-type'), 'application/json; charset=utf-8')
    const retryAfter = refused.headers.get('retry-after')
    t.match(retryAfter, /^\d+$/)
    t.ok(Number(retryAfter) >= 1)
    t.equal(retryAfter, '45')
    t.equal(refused.headers.get('ratelimit'), '"leads";r=0;t=45')
    t.equal(refused.headers.get('ratelimit-policy'), '"leads";q=3;w=60')
    t.equal(refused.headers.get('access-control-allow-origin'), '*')
    // A flood's refusal needs no waiting (the body is never read): answered at once.
    const atOnce = app.app.fetch(
      new Request('http://localhost/newsletter', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: uniqueEmail('rl') }) }),
      { remoteAddress: '198.51.100.1' },
    )
    t.ok(atOnce instanceof Response, 'a Response, not a promise')
    t.equal((atOnce as Response).status, 429)
    await (atOnce as Response).body?.cancel()
  })

  t.test('the limit is shared by /demo-request, /newsletter and /waitlist, and a refused submission is not stored', async (t) => {
    const email = uniqueEmail('refused')
    const response = await app.request('/demo-request', {
      method: 'POST',
      json: { first_name: 'A', last_name: 'B', email, company: 'C', linkedin: 'x' },
      conn: { remoteAddress: '198.51.100.1' },
    })
    t.equal(response.status, 429)
    t.equal((await send('198.51.100.1', '/waitlist')).status, 429)
    t.equal((await app.db.selectFrom('demo_requests').select('id').where('email_normalized', '=', email).execute()).length, 0)
  })

  t.test('another client address is unaffected', async (t) => {
    t.equal((await send('198.51.100.2')).status, 200)
    t.equal((await send('2001:db8::1')).status, 200)
  })

  t.test('the window resets: after it ends the client may submit again', async (t) => {
    clock.advance(44_999)
    t.equal((await send('198.51.100.1')).status, 429, 'one millisecond before the reset')
    clock.advance(1)
    const again = await send('198.51.100.1')
    t.equal(again.status, 200)
    t.equal(again.headers.get('ratelimit'), '"leads";r=2;t=60')
  })

  t.test('Retry-After is at least 1 in the last second of a window', async (t) => {
    for (let i = 0; i < 3; i++) await send('198.51.100.9')
    clock.advance(59_900)
    const refused = await send('198.51.100.9')
    t.equal(refused.status, 429)
    t.equal(refused.headers.get('retry-after'), '1')
  })

  t.test('X-Forwarded-For from an untrusted peer is ignored', async (t) => {
    clock.advance(60_000)
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) {
      const response = await app.request('/newsletter', {
        method: 'POST',
        json: { email: uniqueEmail('xff') },
        headers: { 'x-forwarded-for': `203.0.113.${i}` },
        conn: { remoteAddress: '198.51.100.50' },
      })
      statuses.push(response.status)
    }
    t.same(statuses, [200, 200, 200, 429])
  })
})

t.test('TRUST_PROXY: X-Forwarded-For is honoured only from a trusted peer', async (t) => {
  const clock = new FakeClock()
  const app = await createTestApp(t, { database, clock, env: { LEAD_RATE_LIMIT: '3/60', TRUST_PROXY: '10.0.0.1' } })
  const send = (peer: string, forwarded: string) =>
    app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail('proxy') }, headers: { 'x-forwarded-for': forwarded }, conn: { remoteAddress: peer } })

  t.test('through the trusted proxy, each forwarded client has its own quota', async (t) => {
    for (let i = 0; i < 3; i++) t.equal((await send('10.0.0.1', '203.0.113.7')).status, 200)
    t.equal((await send('10.0.0.1', '203.0.113.7')).status, 429)
    t.equal((await send('10.0.0.1', '203.0.113.8')).status, 200, 'another forwarded client')
  })

  t.test('the last (proxy-appended) address counts, not one a client forged in front of it', async (t) => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await send('10.0.0.1', `1.2.3.${i}, 203.0.113.20`)).status)
    t.same(statuses, [200, 200, 200, 429])
  })

  t.test('from an untrusted peer the header is ignored and the peer is limited', async (t) => {
    const statuses: number[] = []
    for (let i = 0; i < 4; i++) statuses.push((await send('10.0.0.2', `203.0.113.${100 + i}`)).status)
    t.same(statuses, [200, 200, 200, 429])
  })
})
