// Deprecation (RFC 9745) and Sunset (RFC 8594) from the one lifecycle configuration: header
// syntax checked with a real structured-field parser, 410 after a sunset on a fake clock,
// per-version headers, and a server that refuses to start on a sunset before its deprecation.
import { PassThrough } from 'node:stream'
import { parseItem } from 'structured-headers'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { ConfigError, loadConfig, parseLifecycle } from '../../config.ts'
import { versionAlias } from '../../http/lifecycle.ts'
import { bodyOf, createTestApp, FakeClock } from '../support/helpers.ts'

const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/
const WAITLIST_DEPRECATION = Date.parse('2025-12-31T23:59:59Z')
const WAITLIST_SUNSET = Date.parse('2027-01-31T23:59:59Z')

function deprecationDate(header: string | null): Date {
  const [value, parameters] = parseItem(header ?? '')
  if (!(value instanceof Date)) throw new Error(`Deprecation is not a structured-field Date: ${header}`)
  if (parameters.size !== 0) throw new Error('Deprecation carries parameters')
  return value
}

/** Link header values, split on the commas between link-values (RFC 8288 §3). */
function links(header: string | null): Array<{ href: string; rel: string }> {
  return (header ?? '')
    .split(/,(?=\s*<)/)
    .map((part) => /^\s*<([^>]*)>\s*;\s*rel="([^"]+)"\s*$/.exec(part))
    .filter((match): match is RegExpExecArray => match !== null)
    .map((match) => ({ href: match[1]!, rel: match[2]! }))
}

t.test('POST /waitlist ships deprecated: Deprecation, Sunset and Link from the default lifecycle', async (t) => {
  const app = await createTestApp(t)
  const response = await app.request('/waitlist', { method: 'POST', json: { email: 'wait@example.com' } })
  t.equal(response.status, 200)
  t.same(await bodyOf(response), { message: 'OK' })
  t.equal(response.headers.get('deprecation'), '@1767225599')
  t.equal(deprecationDate(response.headers.get('deprecation')).getTime(), WAITLIST_DEPRECATION)
  const sunset = response.headers.get('sunset')
  t.equal(sunset, 'Sun, 31 Jan 2027 23:59:59 GMT')
  t.match(sunset, IMF_FIXDATE, 'Sunset is an IMF-fixdate ending in GMT')
  t.equal(Date.parse(sunset!), WAITLIST_SUNSET)
  t.ok(Date.parse(sunset!) >= WAITLIST_DEPRECATION, 'sunset does not precede deprecation')
  t.same(links(response.headers.get('link')), [
    { href: 'https://app.example.com/openapi.json', rel: 'deprecation' },
    { href: 'https://app.example.com/openapi.json', rel: 'sunset' },
  ])
})

t.test('the lifecycle headers are exposed to cross-origin pages, errors included', async (t) => {
  const app = await createTestApp(t)
  const response = await app.request('/waitlist', { method: 'POST', json: { email: 'bad' }, headers: { origin: 'https://www.example.com' } })
  t.equal(response.status, 400)
  t.equal(response.headers.get('deprecation'), '@1767225599')
  t.equal(response.headers.get('access-control-allow-origin'), '*')
  const exposed = (response.headers.get('access-control-expose-headers') ?? '').split(',').map((name) => name.trim().toLowerCase())
  for (const name of ['deprecation', 'sunset', 'link']) t.ok(exposed.includes(name), `${name} is exposed`)
})

t.test('POST /newsletter, the replacement, carries no lifecycle headers', async (t) => {
  const app = await createTestApp(t)
  const response = await app.request('/newsletter', { method: 'POST', json: { email: 'current@example.com' } })
  t.equal(response.status, 200)
  t.equal(response.headers.get('deprecation'), null)
  t.equal(response.headers.get('sunset'), null)
  t.equal(response.headers.get('link'), null)
})

t.test('after its sunset /waitlist answers 410 with a JSON body naming /newsletter', async (t) => {
  const clock = new FakeClock(WAITLIST_SUNSET - 1000)
  const app = await createTestApp(t, { clock })
  const before = await app.request('/waitlist', { method: 'POST', json: { email: 'late@example.com' } })
  t.equal(before.status, 200, 'one second before the sunset it still works')
  clock.advance(1000)
  const after = await app.request('/waitlist', { method: 'POST', json: { email: 'later@example.com' } })
  t.equal(after.status, 410)
  t.equal(after.headers.get('content-type'), 'application/json; charset=utf-8')
  t.same(await bodyOf(after), { error: 'This endpoint was retired on Sun, 31 Jan 2027 23:59:59 GMT; use /newsletter instead' })
  t.equal(after.headers.get('deprecation'), '@1767225599')
  t.equal(after.headers.get('sunset'), 'Sun, 31 Jan 2027 23:59:59 GMT')
  const replacement = await app.request('/newsletter', { method: 'POST', json: { email: 'later@example.com' } })
  t.equal(replacement.status, 200, 'the replacement stores what the retired route refused')
})

t.test('the server refuses to start on a sunset earlier than its deprecation', async (t) => {
  const lifecycle = JSON.stringify({ routes: { '/waitlist': { deprecation: '2026-06-01T00:00:00Z', sunset: '2026-05-31T23:59:59Z' } } })
  t.throws(() => loadConfig({ LIFECYCLE: lifecycle }), ConfigError)
  t.throws(
    () => parseLifecycle({ versions: { v1: { deprecation: '2026-06-01T00:00:00Z', sunset: '2026-01-01T00:00:00Z' } } }),
    { name: 'ConfigError', message: /lifecycle\.versions\["v1"\]: sunset \(2026-01-01T00:00:00\.000Z\) precedes deprecation \(2026-06-01T00:00:00\.000Z\)/ },
  )
  const stderr = new PassThrough()
  const stdout = new PassThrough()
  let written = ''
  stderr.on('data', (chunk: Buffer) => (written += chunk.toString()))
  const code = await runCli(['start'], { DATABASE_URL: 'memory://', LIFECYCLE: lifecycle }, { stdout, stderr })
  t.equal(code, 2, 'start exits 2 without listening')
  t.match(written, /^configuration error: lifecycle\.routes\["\/waitlist"\]: sunset .* precedes deprecation/)
})

t.test('a sunset equal to the deprecation, or none at all, is accepted', async (t) => {
  const same = parseLifecycle({ routes: { '/x': { deprecation: '2026-01-01T00:00:00Z', sunset: '2026-01-01T00:00:00Z' } } })
  t.equal(same.routes['/x']!.sunset!.getTime(), Date.parse('2026-01-01T00:00:00Z'))
  const open = parseLifecycle({ routes: { '/x': { deprecation: '2026-01-01T00:00:00Z' } } })
  t.equal(open.routes['/x']!.sunset, null)
})

t.test('Service-Api-Version values map to their major alias', async (t) => {
  t.equal(versionAlias('v1'), 'v1')
  t.equal(versionAlias('V1'), 'v1')
  t.equal(versionAlias('1'), 'v1')
  t.equal(versionAlias('1.0.0'), 'v1')
  t.equal(versionAlias(' 1.2 '), 'v1')
  t.equal(versionAlias('2.0.0-beta.1'), 'v2')
  t.equal(versionAlias('latest'), null)
  t.equal(versionAlias(''), null)
  t.equal(versionAlias(null), null)
})

t.test('a deprecated version announces itself to requests naming it, and still works', async (t) => {
  const LIFECYCLE = JSON.stringify({
    routes: {},
    versions: { v1: { deprecation: '2026-09-01T00:00:00Z', sunset: '2027-03-01T00:00:00Z', deprecationLink: 'https://app.example.com/changelog#v1' } },
  })
  const app = await createTestApp(t, { env: { LIFECYCLE } })
  for (const [index, version] of ['v1', '1.0.0', 'V1'].entries()) {
    const response = await app.request('/newsletter', { method: 'POST', json: { email: `version-${index}@example.com` }, headers: { 'Service-Api-Version': version } })
    t.equal(response.status, 200, `${version}: informational, still served`)
    t.equal(deprecationDate(response.headers.get('deprecation')).getTime(), Date.parse('2026-09-01T00:00:00Z'), `${version}: Deprecation`)
    t.equal(response.headers.get('sunset'), 'Mon, 01 Mar 2027 00:00:00 GMT', `${version}: Sunset`)
    t.same(links(response.headers.get('link')), [{ href: 'https://app.example.com/changelog#v1', rel: 'deprecation' }])
  }
  for (const version of [null, 'v2', 'banana']) {
    const headers: Record<string, string> = version === null ? {} : { 'Service-Api-Version': version }
    const response = await app.request('/newsletter', { method: 'POST', json: { email: `other-${version}@example.com` }, headers })
    t.equal(response.status, 200)
    t.equal(response.headers.get('deprecation'), null, `${version ?? 'no header'}: no Deprecation`)
  }
})

t.test("a route's own lifecycle wins over its version's", async (t) => {
  const LIFECYCLE = JSON.stringify({
    routes: { '/waitlist': { deprecation: '2025-12-31T23:59:59Z', sunset: '2027-01-31T23:59:59Z', replacement: '/newsletter' } },
    versions: { v1: { deprecation: '2026-09-01T00:00:00Z' } },
  })
  const app = await createTestApp(t, { env: { LIFECYCLE } })
  const response = await app.request('/waitlist', { method: 'POST', json: { email: 'both@example.com' }, headers: { 'Service-Api-Version': 'v1' } })
  t.equal(response.headers.get('deprecation'), '@1767225599')
  t.equal(response.headers.get('sunset'), 'Sun, 31 Jan 2027 23:59:59 GMT')
  t.equal(response.headers.get('link'), null, 'no links configured for the route')
})

t.test('a wrong method and a preflight on the deprecated /waitlist carry its Deprecation and Sunset', async (t) => {
  const { request } = await createTestApp(t)
  const wrong = await request('/waitlist', { method: 'GET' })
  t.equal(wrong.status, 405)
  t.equal(wrong.headers.get('deprecation'), '@1767225599')
  t.equal(wrong.headers.get('sunset'), 'Sun, 31 Jan 2027 23:59:59 GMT')
  const preflight = await request('/waitlist', {
    method: 'OPTIONS',
    headers: { Origin: 'https://www.example.com', 'Access-Control-Request-Method': 'POST' },
  })
  t.equal(preflight.status, 204)
  t.equal(preflight.headers.get('deprecation'), '@1767225599')
  const current = await request('/newsletter', { method: 'GET' })
  t.equal(current.status, 405)
  t.equal(current.headers.get('deprecation'), null, 'a current path carries none')
})
