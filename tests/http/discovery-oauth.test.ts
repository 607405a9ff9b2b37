// RFC 9728 protected resource metadata and RFC 8414 authorization server metadata, checked field
// by field and through oauth4webapi, a strict independent client.
import * as oauth from 'oauth4webapi'
import t from 'tap'
import { bodyOf, createTestApp } from '../support/helpers.ts'

// Deliberately unlike the defaults: three hosts, a path on the product API, a port on the app.
const env = {
  BASE_URL: 'https://leads.example.org',
  PRODUCT_API_URL: 'https://api.example.org/steward/v1',
  APP_URL: 'https://console.example.org:8443',
}
const app = await createTestApp(t, { env })
const SCOPES = ['policies:read', 'policies:write', 'keys:manage', 'members:manage', 'agents:read', 'agents:write', 'decisions:read', 'decisions:check', 'audit:read', 'webhooks:manage', 'mcp:read', 'mcp:manage']

/** A member with no value (null, "", [], {}) must be omitted (RFC 9728 §2, RFC 8414 §3.2). */
function emptyMembers(body: Record<string, unknown>, allowed: string[] = []): string[] {
  return Object.entries(body)
    .filter(([key]) => !allowed.includes(key))
    .filter(([, value]) => value === null || value === '' || (Array.isArray(value) && value.length === 0) || (typeof value === 'object' && value !== null && Object.keys(value).length === 0))
    .map(([key]) => key)
}

t.test('RFC 9728 root document: resource is PRODUCT_API_URL byte for byte', async (t) => {
  const response = await app.request('/.well-known/oauth-protected-resource')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  t.equal(response.headers.get('location'), null, 'no redirect')
  const body = (await bodyOf(response)) as Record<string, unknown>
  t.equal(body.resource, 'https://api.example.org/steward/v1')
  t.same(body.authorization_servers, ['https://console.example.org:8443'])
  t.same(body.bearer_methods_supported, ['header'])
  t.same(body.scopes_supported, SCOPES)
  t.equal(body.resource_name, 'Steward product API')
  t.equal(body.resource_documentation, 'https://console.example.org:8443/llms.txt')
  t.same(emptyMembers(body), [])
})

t.test('RFC 9728 §3.1: the path-suffixed URL of the product API base echoes that resource', async (t) => {
  const response = await app.request('/.well-known/oauth-protected-resource/steward/v1')
  t.equal(response.status, 200)
  t.equal(((await bodyOf(response)) as { resource: string }).resource, 'https://api.example.org/steward/v1')
})

t.test('RFC 9728 §3.1: a protected path of the product API echoes its own URL as resource', async (t) => {
  for (const path of ['/policies', '/keys']) {
    const response = await app.request(`/.well-known/oauth-protected-resource/steward/v1${path}`)
    t.equal(response.status, 200, `${path} → 200`)
    const metadata = await oauth.processResourceDiscoveryResponse(new URL(`${env.PRODUCT_API_URL}${path}`), response)
    t.equal(metadata.resource, `https://api.example.org/steward/v1${path}`)
    t.same(metadata.authorization_servers, [env.APP_URL])
  }
})

t.test('RFC 9728 §3.1: a suffix that is not a protected resource answers 404, never another resource', async (t) => {
  for (const suffix of ['/unknown', '/steward', '/steward/v1/', '/steward/v1/auth/login', '/steward/v1/health', '/demo-request']) {
    const response = await app.request(`/.well-known/oauth-protected-resource${suffix}`)
    const body = (await bodyOf(response)) as Record<string, unknown>
    t.equal(response.status, 404, `${suffix} → 404`)
    t.equal(body.resource, undefined, `${suffix} names no resource`)
  }
})

t.test('RFC 9728 §3.3: oauth4webapi accepts the root document for the product API URL', async (t) => {
  const resource = new URL(env.PRODUCT_API_URL)
  const response = await app.request('/.well-known/oauth-protected-resource')
  const metadata = await oauth.processResourceDiscoveryResponse(resource, response)
  t.equal(metadata.resource, env.PRODUCT_API_URL)
  t.same(metadata.authorization_servers, [env.APP_URL])
})

t.test('RFC 9728: oauth4webapi builds the well-known URL a server on the resource origin must answer', async (t) => {
  // The client inserts the well-known path between host and path (RFC 9728 §3.1).
  let requested = ''
  const response = await oauth.resourceDiscoveryRequest(new URL(env.PRODUCT_API_URL), {
    [oauth.customFetch]: async (url: string, init: RequestInit) => {
      requested = url
      const { pathname } = new URL(url)
      return app.request(pathname, { method: init.method, headers: init.headers })
    },
  })
  t.equal(requested, 'https://api.example.org/.well-known/oauth-protected-resource/steward/v1')
  const metadata = await oauth.processResourceDiscoveryResponse(new URL(env.PRODUCT_API_URL), response)
  t.equal(metadata.resource, env.PRODUCT_API_URL)
})

t.test('RFC 8414 document: issuer, token endpoint, grant types and no password grant', async (t) => {
  const response = await app.request('/.well-known/oauth-authorization-server')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  const body = (await bodyOf(response)) as Record<string, unknown>
  t.equal(body.issuer, 'https://console.example.org:8443')
  t.equal(body.token_endpoint, 'https://api.example.org/steward/v1/auth/login')
  t.same(body.grant_types_supported, ['client_credentials', 'refresh_token'])
  t.notOk((body.grant_types_supported as string[]).includes('password'), 'never the password grant (RFC 9700)')
  t.same(body.token_endpoint_auth_methods_supported, ['client_secret_post', 'client_secret_basic'])
  t.same(body.scopes_supported, SCOPES)
  // REQUIRED member kept, truthfully empty: there is no authorization endpoint (see the README).
  t.same(body.response_types_supported, [])
  t.equal(body.authorization_endpoint, undefined)
  t.equal(body.registration_endpoint, undefined)
  t.equal(body.service_documentation, 'https://console.example.org:8443/llms.txt')
  t.same(emptyMembers(body, ['response_types_supported']), [])
  const issuer = new URL(body.issuer as string)
  t.equal(issuer.search, '', 'issuer has no query')
  t.equal(issuer.hash, '', 'issuer has no fragment')
})

t.test('RFC 9728 §2: the first authorization server is the RFC 8414 issuer', async (t) => {
  const prm = (await bodyOf(await app.request('/.well-known/oauth-protected-resource'))) as { authorization_servers: string[] }
  const as = (await bodyOf(await app.request('/.well-known/oauth-authorization-server'))) as { issuer: string }
  t.equal(prm.authorization_servers[0], as.issuer)
})

t.test('RFC 8414 §3: oauth4webapi discovers the issuer from its own well-known URL and accepts the document', async (t) => {
  const issuer = new URL(env.APP_URL)
  let requested = ''
  const response = await oauth.discoveryRequest(issuer, {
    algorithm: 'oauth2',
    [oauth.customFetch]: async (url: string, init: RequestInit) => {
      requested = url
      return app.request(new URL(url).pathname, { method: init.method, headers: init.headers })
    },
  })
  t.equal(requested, 'https://console.example.org:8443/.well-known/oauth-authorization-server')
  const as = await oauth.processDiscoveryResponse(issuer, response)
  t.equal(as.issuer, env.APP_URL)
  t.equal(as.token_endpoint, `${env.PRODUCT_API_URL}/auth/login`)
})

t.test('oauth4webapi refuses the document for another issuer (the check is real)', async (t) => {
  const response = await app.request('/.well-known/oauth-authorization-server')
  await t.rejects(oauth.processDiscoveryResponse(new URL('https://other.example.org'), response))
})

t.test('the metadata is static and cacheable: ETag, 304 on If-None-Match, Cache-Control, any origin', async (t) => {
  for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-authorization-server']) {
    const first = await app.request(path, { headers: { origin: 'https://elsewhere.example' } })
    const etag = first.headers.get('etag')
    t.match(etag, /^"[A-Za-z0-9_-]{43}"$/, `${path} has a strong ETag`)
    t.equal(first.headers.get('cache-control'), 'public, max-age=3600')
    t.equal(first.headers.get('access-control-allow-origin'), '*')
    const again = await app.request(path)
    t.equal(again.headers.get('etag'), etag, 'same bytes, same ETag')
    t.equal(await again.text(), await first.text())
    const cached = await app.request(path, { headers: { 'if-none-match': `W/"other", ${etag}` } })
    t.equal(cached.status, 304)
    t.equal(await cached.text(), '')
    t.equal(cached.headers.get('etag'), etag)
    const stale = await app.request(path, { headers: { 'if-none-match': '"stale"' } })
    t.equal(stale.status, 200)
    await stale.arrayBuffer()
  }
})

t.test('another method on a metadata URL answers 405 with Allow', async (t) => {
  const response = await app.request('/.well-known/oauth-authorization-server', { method: 'POST' })
  t.equal(response.status, 405)
  t.equal(response.headers.get('allow'), 'GET, HEAD, OPTIONS')
})

t.test('default URLs: every document is built from the server origin when nothing is configured', async (t) => {
  const local = await createTestApp(t, { env: { BASE_URL: '', PRODUCT_API_URL: '', APP_URL: '', PORT: '9090' } })
  const prm = (await bodyOf(await local.request('/.well-known/oauth-protected-resource'))) as { resource: string }
  const as = (await bodyOf(await local.request('/.well-known/oauth-authorization-server'))) as { issuer: string; token_endpoint: string }
  t.equal(prm.resource, 'http://localhost:9090')
  t.equal(as.issuer, 'http://localhost:9090')
  t.equal(as.token_endpoint, 'http://localhost:9090/auth/login')
})
