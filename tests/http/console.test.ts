// The console's server side: static files under /console/ (types, CSP, caching, 304, 404, 405,
// traversal over the fetch handler and over a raw socket) and the leads read API it uses
// (authorization, isolation, search, pagination, bad input, the OpenAPI document).
import { BY_OPERATOR } from '../../storage/audit.ts'
import { readdirSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ConfigError, loadConfig } from '../../config.ts'
import { serve } from '../../cli/serve.ts'
import { apiBase, consoleCsp } from '../../routes/console.ts'
import { LEADS_FORBIDDEN } from '../../routes/lead-lists.ts'
import { CURSOR_INVALID, encodeCursor } from '../../routes/input.ts'
import { createApiKey } from '../../storage/keys.ts'
import { createOrganization } from '../../storage/organizations.ts'
import { createTestApp, FakeClock, openTestDatabase } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { freePort } from '../../bench/lib.ts'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'console')
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self' https://api.example.com; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

const app = await createTestApp(t)
const get = (path: string, headers: Record<string, string> = {}) => app.request(path, { headers })

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]))
}

t.test('static files', async (t) => {
  t.test('GET /console/ answers index.html with the strict CSP, no-cache and an ETag', async (t) => {
    const response = await get('/console/')
    t.equal(response.status, 200)
    t.equal(response.headers.get('content-type'), 'text/html; charset=utf-8')
    t.equal(response.headers.get('content-security-policy'), CSP)
    t.equal(response.headers.get('cache-control'), 'no-cache')
    t.match(response.headers.get('etag'), /^"[A-Za-z0-9_-]{24}"$/)
    t.equal(response.headers.get('x-content-type-options'), 'nosniff')
    t.equal(response.headers.get('referrer-policy'), 'no-referrer')
    t.equal(response.headers.get('cross-origin-opener-policy'), 'same-origin')
    const html = await response.text()
    t.match(html, '<meta name="steward-api" content="https://api.example.com">', 'the product API URL is filled in')
    t.match(html, '<script type="module" src="js/main.js"></script>', 'one module script, from a file')
    t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
    t.notMatch(html, /<style|\sstyle=|\son[a-z]+=/i, 'no inline style or handler')
  })

  t.test('/console/index.html is the same document; /console redirects to /console/ with 308', async (t) => {
    const [slash, index] = await Promise.all([get('/console/'), get('/console/index.html')])
    t.equal(await index.text(), await slash.text())
    t.equal(index.headers.get('etag'), slash.headers.get('etag'))
    const bare = await get('/console')
    t.equal(bare.status, 308)
    t.equal(bare.headers.get('location'), '/console/')
  })

  t.test('every file in console/ is served with its media type, no-cache and an ETag', async (t) => {
    const types: Record<string, string> = { html: 'text/html; charset=utf-8', css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8', svg: 'image/svg+xml', txt: 'text/plain; charset=utf-8' }
    const files = filesUnder(ROOT)
    t.ok(files.length >= 12, 'the console has its pages')
    for (const file of files) {
      const name = relative(ROOT, file).split('\\').join('/')
      const response = await get(`/console/${name}`)
      t.equal(response.status, 200, name)
      t.equal(response.headers.get('content-type'), types[name.slice(name.lastIndexOf('.') + 1)], name)
      t.equal(response.headers.get('cache-control'), 'no-cache', name)
      t.ok(response.headers.get('etag'), name)
      const body = await response.text()
      if (name !== 'index.html') t.equal(body, readFileSync(file, 'utf8'), `${name} as stored`)
      if (name.endsWith('.js')) t.notMatch(body, /\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function|localStorage\.|sessionStorage\.|document\.cookie/, `${name} never builds HTML from strings nor stores tokens`)
    }
  })

  t.test('assets other than HTML carry the API policy (nothing in them may load)', async (t) => {
    const response = await get('/console/app.css')
    t.equal(response.headers.get('content-security-policy'), "default-src 'none'; frame-ancestors 'none'")
  })

  t.test('If-None-Match with the ETag answers 304 without a body; a weak or listed tag matches too', async (t) => {
    const first = await get('/console/js/main.js')
    const etag = first.headers.get('etag')!
    for (const header of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
      const again = await get('/console/js/main.js', { 'if-none-match': header })
      t.equal(again.status, 304, header)
      t.equal(await again.text(), '', header)
      t.equal(again.headers.get('etag'), etag)
      t.equal(again.headers.get('cache-control'), 'no-cache')
    }
    const other = await get('/console/js/main.js', { 'if-none-match': '"other"' })
    t.equal(other.status, 200)
  })

  t.test('HEAD answers the headers without the body', async (t) => {
    const response = await app.request('/console/app.css', { method: 'HEAD' })
    t.equal(response.status, 200)
    t.equal(response.headers.get('content-type'), 'text/css; charset=utf-8')
    t.equal(await response.text(), '')
  })

  t.test('an unknown console path answers 404: JSON for API clients, HTML for browsers', async (t) => {
    const response = await get('/console/nope.js')
    t.equal(response.status, 404)
    t.same(await response.json(), { error: 'No resource at /console/nope.js' })
    t.equal(response.headers.get('vary')?.includes('Accept'), true)
    const page = await get('/console/settings', { accept: 'text/html,application/xhtml+xml' })
    t.equal(page.status, 404)
    t.equal(page.headers.get('content-type'), 'text/html; charset=utf-8')
    t.equal(page.headers.get('content-security-policy'), CSP)
    const html = await page.text()
    t.match(html, '<h1>Not found</h1>')
    t.notMatch(html, 'settings', 'the path is not echoed into HTML')
  })

  t.test('other methods answer 405 with Allow', async (t) => {
    const response = await app.request('/console/', { method: 'POST', body: '{}' })
    t.equal(response.status, 405)
    t.equal(response.headers.get('allow'), 'GET, HEAD, OPTIONS')
  })

  t.test('on the same origin, the page holds only the API path: it works under any host name', async (t) => {
    const same = await createTestApp(t, { database: app.database, env: { APP_URL: 'https://steward.example.com', PRODUCT_API_URL: 'https://steward.example.com' } })
    const response = await same.request('/console/')
    t.match(await response.text(), '<meta name="steward-api" content="">')
    t.match(response.headers.get('content-security-policy'), "connect-src 'self';")
    t.equal(apiBase({ appUrl: 'https://a.example', productApiUrl: 'https://a.example/api/' }), '/api')
    t.equal(apiBase({ appUrl: 'https://a.example', productApiUrl: 'https://b.example/api' }), 'https://b.example/api')
  })

  t.test('the CSP names the product API only when it lives on another origin', async (t) => {
    t.equal(consoleCsp({ appUrl: 'http://localhost:8080', productApiUrl: 'http://localhost:8080' }).includes("connect-src 'self';"), true)
    t.equal(consoleCsp({ appUrl: 'https://app.example.com', productApiUrl: 'https://api.example.com/v1' }).includes("connect-src 'self' https://api.example.com;"), true)
  })
})

const TRAVERSALS = [
  '/console/../server.ts',
  '/console/%2e%2e/server.ts',
  '/console/%2E%2E/package.json',
  '/console/..%2fserver.ts',
  '/console/..%2Fserver.ts',
  '/console/%2e%2e%2fserver.ts',
  '/console/js/..%2f..%2fserver.ts',
  '/console/js/%2e%2e/%2e%2e/server.ts',
  '/console/..%5cserver.ts',
  '/console/..\\server.ts',
  '/console/%252e%252e/server.ts',
  '/console/index.html%00.js',
  '/console//etc/passwd',
  '/console/.%2e/config.ts',
]

function leaked(body: string): boolean {
  return /createHandler|loadConfig|"name": "steward"|root:x:0/.test(body)
}

t.test('a CORS preflight to a path the server lacks is answered, so the 404 reaches a cross-origin console', async (t) => {
  const origin = { origin: 'https://app.example.com' }
  const preflight = await app.request('/not-a-route?status=pending', { method: 'OPTIONS', headers: { ...origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } })
  t.equal(preflight.status, 204)
  t.equal(preflight.headers.get('access-control-allow-origin'), '*')
  t.equal(preflight.headers.get('access-control-allow-headers'), 'authorization')
  t.equal(preflight.headers.get('access-control-allow-methods'), 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS')
  const answer = await app.request('/not-a-route?status=pending', { headers: origin })
  t.equal(answer.status, 404)
  t.equal(answer.headers.get('access-control-allow-origin'), '*')
  const plain = await app.request('/not-a-route', { method: 'OPTIONS' })
  t.equal(plain.status, 404, 'a plain OPTIONS on an unknown path is still 404')
})

t.test('no directory traversal through the fetch handler', async (t) => {
  for (const path of TRAVERSALS) {
    const response = await get(path)
    const body = await response.text()
    t.equal(response.status, 404, path)
    t.notOk(leaked(body), `${path} reveals no file`)
  }
})

t.test('no directory traversal over a raw socket (paths the runtime does not normalize)', async (t) => {
  const port = await freePort()
  const served = await serve(app.app, { ...app.config, port, host: '127.0.0.1' })
  t.teardown(() => served.close())
  const raw = (path: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.end(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`))
      let text = ''
      socket.on('data', (chunk) => (text += chunk.toString('latin1')))
      socket.on('end', () => resolve(text))
      socket.on('error', reject)
    })
  for (const path of TRAVERSALS) {
    const answer = await raw(path)
    t.notMatch(answer.split('\r\n')[0], /^HTTP\/1\.1 2/, `${path} is not served`)
    t.notOk(leaked(answer), `${path} reveals no file`)
  }
  t.match((await raw('/console/')).split('\r\n')[0], 'HTTP/1.1 200')
})

t.test('leads read API', async (t) => {
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  // The organization created first holds the leads by default.
  const holder = await createOrganization(database.db, 'Installation', new Date(clock.now - 60_000))
  const keyOf = async (role: 'owner' | 'admin' | 'manager' | 'viewer') =>
    (await createApiKey(database.db, { organizationId: holder.id, name: role, role, createdByUserId: null, createdByKeyId: null, expiresAt: null }, new Date(clock.now), BY_OPERATOR)).secret
  const holderKeys = { owner: await keyOf('owner'), admin: await keyOf('admin'), manager: await keyOf('manager'), viewer: await keyOf('viewer') }
  const world = await productApp(t, { database, clock })
  const { vars } = world

  for (let i = 0; i < 5; i++) {
    const lead = { first_name: `Ada${i}`, last_name: 'Lovelace', email: `ada${i}@example.com`, company: i === 3 ? 'Engines 100%_Co' : 'Analytical Engines', linkedin: 'https://www.linkedin.com/in/ada' }
    t.equal((await world.call('POST', '/demo-request', { json: lead })).status, 200)
    t.equal((await world.call('POST', '/newsletter', { json: { email: `news${i}@example.com`, source: i === 1 ? 'Launch' : 'site' } })).status, 200)
  }

  t.test('Owners and Admins of the organization holding the leads read both lists, newest first', async (t) => {
    for (const token of [holderKeys.owner, holderKeys.admin]) {
      const demo = await world.call('GET', '/leads/demo-requests', { token })
      t.equal(demo.status, 200)
      t.equal(demo.headers.get('cache-control'), 'no-store')
      const body = await jsonOf(demo)
      t.same(body.leads.map((l: any) => l.email), ['ada4@example.com', 'ada3@example.com', 'ada2@example.com', 'ada1@example.com', 'ada0@example.com'])
      t.equal(body.next_cursor, null)
      t.same(Object.keys(body.leads[0]), ['id', 'email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id', 'received_at'])
      t.equal(body.leads[0].received_at, new Date(clock.now).toISOString())
      const news = await jsonOf(await world.call('GET', '/leads/newsletter', { token }))
      t.same(news.leads[0], { id: news.leads[0].id, email: 'news4@example.com', source: 'site', analytics_distinct_id: null, received_at: new Date(clock.now).toISOString(), via: '/newsletter', status: 'active', unsubscribe_url: news.leads[0].unsubscribe_url })
      t.match(news.leads[0].unsubscribe_url, /^https:\/\/api\.example\.com\/leads\/unsubscribe\?token=u\.\d+\.0\.[\w-]{43}$/)
    }
  })

  t.test('lower roles of that organization get 403 for the missing permission', async (t) => {
    for (const role of ['manager', 'viewer'] as const) {
      const response = await world.call('GET', '/leads/demo-requests', { token: holderKeys[role] })
      t.equal(response.status, 403)
      t.same(await jsonOf(response), { status: 'Forbidden', error: `This credential's role (${role}) lacks the members:manage permission` })
    }
  })

  t.test('Owners and Admins of any other organization get 403: leads are not theirs', async (t) => {
    for (const token of [vars.OWNER_KEY_A!, vars.ADMIN_KEY_A!, vars.OWNER_KEY_B!]) {
      for (const path of ['/leads/demo-requests', '/leads/newsletter', '/leads/newsletter?q=news']) {
        const response = await world.call('GET', path, { token })
        t.equal(response.status, 403, path)
        t.same(await jsonOf(response), { status: 'Forbidden', error: LEADS_FORBIDDEN })
      }
    }
  })

  t.test('no credential is 401; a credential in the URL is 400', async (t) => {
    t.equal((await world.call('GET', '/leads/demo-requests')).status, 401)
    t.equal((await world.call('GET', `/leads/demo-requests?api_key=${holderKeys.admin}`, { token: holderKeys.admin })).status, 400)
  })

  t.test('LEADS_ORGANIZATION_ID names the holder instead of the oldest organization', async (t) => {
    const named = await createTestApp(t, { database, clock, env: { LEADS_ORGANIZATION_ID: vars.ORG_B!.toUpperCase() } })
    const as = (token: string) => named.request('/leads/demo-requests', { headers: { authorization: `Bearer ${token}` } })
    t.equal((await as(vars.ADMIN_KEY_B!)).status, 200)
    t.equal((await as(holderKeys.admin)).status, 403)
    t.equal((await as(vars.ADMIN_KEY_A!)).status, 403)
    t.equal((await as(vars.VIEWER_KEY_B!)).status, 403)
  })

  t.test('q searches email, names, company and source, case-insensitively, with % and _ taken literally', async (t) => {
    const find = async (path: string, q: string) =>
      (await jsonOf(await world.call('GET', `${path}?q=${encodeURIComponent(q)}`, { token: holderKeys.admin }))).leads.map((l: any) => l.email)
    t.same(await find('/leads/demo-requests', 'ADA2@'), ['ada2@example.com'])
    t.same(await find('/leads/demo-requests', 'ada1'), ['ada1@example.com'])
    t.same(await find('/leads/demo-requests', '100%_'), ['ada3@example.com'])
    t.same(await find('/leads/demo-requests', '%'), ['ada3@example.com'], '% matches only a literal %')
    t.same(await find('/leads/demo-requests', 'lovelace').then((l: string[]) => l.length), 5)
    t.same(await find('/leads/newsletter', 'launch'), ['news1@example.com'])
    t.same(await find('/leads/newsletter', 'nobody'), [])
    t.same(await find('/leads/newsletter', '   ').then((l: string[]) => l.length), 5, 'a blank q is no filter')
  })

  t.test('pages follow next_cursor without gaps or repeats', async (t) => {
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const path: string = `/leads/newsletter?limit=2${cursor ? `&cursor=${cursor}` : ''}`
      const body: any = await jsonOf(await world.call('GET', path, { token: holderKeys.admin }))
      t.ok(body.leads.length <= 2)
      seen.push(...body.leads.map((l: any) => l.email))
      cursor = body.next_cursor
      pages++
    } while (cursor)
    t.equal(pages, 3)
    t.same(seen, ['news4@example.com', 'news3@example.com', 'news2@example.com', 'news1@example.com', 'news0@example.com'])
  })

  t.test('bad input answers 400 with a message, never 500', async (t) => {
    const cases: Array<[string, string]> = [
      ['limit=0', 'limit must be a whole number from 1 to 100'],
      ['limit=101', 'limit must be a whole number from 1 to 100'],
      ['limit=abc', 'limit must be a whole number from 1 to 100'],
      ['limit=-1', 'limit must be a whole number from 1 to 100'],
      ['cursor=%%%', CURSOR_INVALID],
      ['cursor=bm9wZQ', CURSOR_INVALID],
      [`cursor=${encodeCursor(['abc'])}`, CURSOR_INVALID],
      [`cursor=${encodeCursor(['0'])}`, CURSOR_INVALID],
      [`cursor=${encodeCursor(['1', '2'])}`, CURSOR_INVALID],
      [`cursor=${'A'.repeat(600)}`, CURSOR_INVALID],
      [`q=${'x'.repeat(201)}`, 'q is longer than 200 characters'],
      ['q=a%00b', 'q holds a NUL character or an unpaired surrogate'],
    ]
    for (const [query, error] of cases) {
      const response = await world.call('GET', `/leads/demo-requests?${query}`, { token: holderKeys.admin })
      t.equal(response.status, 400, query)
      t.same(await jsonOf(response), { status: 'Bad Request', error }, query)
    }
  })

  t.test('other methods are 405', async (t) => {
    const response = await world.call('POST', '/leads/demo-requests', { token: holderKeys.admin, json: {} })
    t.equal(response.status, 405)
  })
})

t.test('the OpenAPI document publishes the leads routes and leaves the console out', async (t) => {
  const doc = await jsonOf(await get('/openapi.json'))
  for (const [path, id] of [['/leads/demo-requests', 'listDemoRequestLeads'], ['/leads/newsletter', 'listNewsletterLeads']]) {
    const operation = doc.paths[path!]?.get
    t.equal(operation?.operationId, id)
    t.same(operation?.security, [{ bearerAuth: ['members:manage'] }])
    t.ok(operation?.responses['403'])
    t.same(operation?.parameters.map((p: any) => p.name).sort(), ['cursor', 'limit', 'q'])
  }
  t.notOk(Object.keys(doc.paths).some((path) => path.startsWith('/console')))
})

t.test('LEADS_ORGANIZATION_ID must be a UUID', async (t) => {
  t.throws(() => loadConfig({ LEADS_ORGANIZATION_ID: 'acme' }), ConfigError)
  t.equal(loadConfig({ LEADS_ORGANIZATION_ID: 'AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE' }).leadsOrganizationId, 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee')
  t.equal(loadConfig({}).leadsOrganizationId, null)
})
