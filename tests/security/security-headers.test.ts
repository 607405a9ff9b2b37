// Security tests: no answer of ours can be framed or run anything. Every answer of every surface
// (success, client error, 404, 405, preflight, 500, 503) carries Content-Security-Policy
// `default-src 'none'; frame-ancestors 'none'` (nothing we serve is HTML) and nosniff.
import { Kysely, PostgresDialect, sql } from 'kysely'
import t, { type Test } from 'tap'
import { reply } from '../../http/reply.ts'
import { setSecurityHeaders } from '../../http/security.ts'
import { createHandler } from '../../server.ts'
import { createPostgresPool } from '../../database/connect.ts'
import type { Database } from '../../database/schema.ts'
import { FakeClock, memoryLogger, testConfig } from '../support/helpers.ts'
import { productApp } from '../support/product-support.ts'

const CSP = "default-src 'none'; frame-ancestors 'none'"
const SITE = 'https://www.example.com'
const app = await productApp(t, { env: { CORS_ORIGINS: SITE } })
const key = app.vars.OWNER_KEY_A!

interface Case {
  readonly label: string
  readonly status: number
  readonly send: () => Promise<Response>
}

function checkAll(t: Test, cases: readonly Case[]): Promise<void> {
  return (async () => {
    for (const { label, status, send } of cases) {
      const response = await send()
      await response.arrayBuffer()
      t.equal(response.status, status, label)
      t.equal(response.headers.get('content-security-policy'), CSP, `${label}: CSP`)
      t.equal(response.headers.get('x-content-type-options'), 'nosniff', `${label}: nosniff`)
    }
  })()
}

const preflight = { method: 'OPTIONS', headers: { origin: SITE, 'access-control-request-method': 'POST' } }

t.test('lead capture answers', (t) =>
  checkAll(t, [
    { label: 'POST /newsletter', status: 200, send: () => app.request('/newsletter', { method: 'POST', json: { email: 'csp@example.com' } }) },
    { label: 'a bad email', status: 400, send: () => app.request('/newsletter', { method: 'POST', json: { email: 'nope' } }) },
    { label: 'GET /newsletter', status: 405, send: () => app.request('/newsletter') },
    { label: 'a preflight', status: 204, send: () => app.request('/newsletter', preflight) },
    { label: 'an unknown path', status: 404, send: () => app.request('/nope') },
    { label: 'the leads surface alone, unknown path', status: 404, send: async () => app.app.leads.fetch(new Request('http://localhost/nope')) },
  ]))

t.test('product API answers', (t) =>
  checkAll(t, [
    { label: 'GET /policies', status: 200, send: () => app.call('GET', `/policies?organization_id=${app.vars.ORG_A}`, { token: key }) },
    { label: 'no credential', status: 401, send: () => app.call('GET', '/policies') },
    { label: 'an unknown policy', status: 404, send: () => app.call('GET', `/policies/${crypto.randomUUID()}`, { token: key }) },
    { label: 'DELETE /policies', status: 405, send: () => app.call('DELETE', '/policies', { token: key }) },
    { label: 'a preflight', status: 204, send: () => app.request('/policies', preflight) },
    { label: 'GET /health', status: 200, send: () => app.request('/health') },
    { label: 'the product surface alone, unknown path', status: 404, send: async () => app.app.product.fetch(new Request('http://localhost/nope')) },
  ]))

t.test('discovery documents (JSON, linkset, llms.txt, SVG) answers', (t) =>
  checkAll(t, [
    { label: 'openapi.json', status: 200, send: () => app.request('/openapi.json') },
    { label: 'api-catalog', status: 200, send: () => app.request('/.well-known/api-catalog') },
    { label: 'HEAD api-catalog', status: 200, send: () => app.request('/.well-known/api-catalog', { method: 'HEAD' }) },
    { label: 'protected resource metadata', status: 200, send: () => app.request('/.well-known/oauth-protected-resource') },
    { label: 'llms.txt', status: 200, send: () => app.request('/llms.txt') },
    { label: 'logo.svg', status: 200, send: () => app.request('/logo.svg') },
    { label: 'POST openapi.json', status: 405, send: () => app.request('/openapi.json', { method: 'POST' }) },
    { label: 'a preflight', status: 204, send: () => app.request('/openapi.json', preflight) },
    { label: 'the discovery surface alone, unknown path', status: 404, send: async () => app.app.discovery.fetch(new Request('http://localhost/nope')) },
  ]))

t.test('a 500 carries it', async (t) => {
  await sql`alter table newsletter_subscriptions rename to newsletter_subscriptions_away`.execute(app.db)
  try {
    await checkAll(t, [{ label: 'a broken table', status: 500, send: () => app.request('/newsletter', { method: 'POST', json: { email: 'csp500@example.com' } }) }])
  } finally {
    await sql`alter table newsletter_subscriptions_away rename to newsletter_subscriptions`.execute(app.db)
  }
})

t.test('503s on every surface carry it', async (t) => {
  const logger = memoryLogger()
  const pool = await createPostgresPool('postgres://postgres@127.0.0.1:1/test', logger, 2)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  t.teardown(() => db.destroy())
  const down = createHandler(testConfig(), { db, clock: new FakeClock().read, logger, listenUrl: null })
  t.teardown(() => down.close())
  const send = (path: string, init: RequestInit = {}) => async () => down.fetch(new Request(`http://localhost${path}`, init), { remoteAddress: '127.0.0.1' })
  await checkAll(t, [
    { label: 'lead capture', status: 503, send: send('/newsletter', { method: 'POST', body: '{"email":"down@example.com"}', headers: { 'content-type': 'application/json' } }) },
    { label: 'product health', status: 503, send: send('/health') },
    { label: 'a product key lookup', status: 503, send: send('/policies', { headers: { authorization: `Bearer ${key}` } }) },
  ])
})

t.test('an HTML answer, were there one, may not be framed but keeps its own sources', async (t) => {
  const html = reply(200, '<p>hi</p>', { 'Content-Type': 'text/html; charset=utf-8' })
  setSecurityHeaders(html)
  t.equal(html.headers['content-security-policy'], "frame-ancestors 'none'")
  const bodiless = reply(204, null)
  setSecurityHeaders(bodiless)
  t.equal(bodiless.headers['content-security-policy'], CSP)
})
