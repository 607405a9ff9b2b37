// RFC 9727 api-catalog (linkset, media type, HEAD, Link), ai-plugin.json, agents.json and
// llms.txt, each checked against the rules of docs/api.md.
import t from 'tap'
import { bodyOf, createTestApp } from '../support/helpers.ts'

const env = { BASE_URL: 'https://www.example.io/forms', PRODUCT_API_URL: 'https://api.example.io', APP_URL: 'https://app.example.io' }
const app = await createTestApp(t, { env })
const CATALOG_TYPE = 'application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"'
const CATALOG_LINK = '<https://app.example.io/.well-known/api-catalog>; rel="api-catalog"'

function isAbsolute(href: unknown): boolean {
  if (typeof href !== 'string') return false
  try {
    return /^https?:$/.test(new URL(href).protocol)
  } catch {
    return false
  }
}

t.test('GET /.well-known/api-catalog: 200, the RFC 9727 media type and the api-catalog Link', async (t) => {
  const response = await app.request('/.well-known/api-catalog')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), CATALOG_TYPE)
  t.equal(response.headers.get('link'), CATALOG_LINK)
  t.equal(response.headers.get('access-control-allow-origin'), '*')
  t.equal(response.headers.get('cache-control'), 'public, max-age=3600')
  t.match(response.headers.get('etag'), /^"[A-Za-z0-9_-]{43}"$/)
})

t.test('HEAD /.well-known/api-catalog: same status and headers, no body', async (t) => {
  const get = await app.request('/.well-known/api-catalog')
  const head = await app.request('/.well-known/api-catalog', { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(await head.text(), '')
  for (const name of ['content-type', 'link', 'etag', 'cache-control', 'access-control-allow-origin']) {
    t.equal(head.headers.get(name), get.headers.get(name), `HEAD ${name} equals GET ${name}`)
  }
  t.equal(head.headers.get('link'), CATALOG_LINK)
})

t.test('the catalog body is an RFC 9264 linkset: one member, context objects, arrays of targets', async (t) => {
  const body = (await bodyOf(await app.request('/.well-known/api-catalog'))) as { linkset: Array<Record<string, unknown>> }
  t.same(Object.keys(body), ['linkset'], 'exactly one top-level member')
  t.ok(Array.isArray(body.linkset) && body.linkset.length > 0)
  for (const context of body.linkset) {
    t.ok(isAbsolute(context.anchor), `anchor ${String(context.anchor)} is absolute`)
    for (const [relation, targets] of Object.entries(context)) {
      if (relation === 'anchor') continue
      t.ok(Array.isArray(targets), `${relation} is an array`)
      for (const target of targets as Array<Record<string, unknown>>) {
        t.ok(isAbsolute(target.href), `${relation} href ${String(target.href)} is absolute`)
        if ('hreflang' in target) t.ok(Array.isArray(target.hreflang), 'hreflang is an array')
        if ('type' in target) t.type(target.type, 'string')
        if ('title' in target) t.type(target.title, 'string')
      }
    }
  }
  t.same(body.linkset.map((context) => context.anchor), ['https://www.example.io/forms', 'https://api.example.io'], 'one context per API URL')
  const product = body.linkset[1]!
  t.same((product['service-desc'] as Array<{ href: string }>).map((target) => target.href), ['https://app.example.io/openapi.json'])
  t.same((product.status as Array<{ href: string }>).map((target) => target.href), ['https://api.example.io/health'])
  t.ok((product['service-doc'] as unknown[]).length > 0, 'service-doc present')
  t.same((product['service-meta'] as Array<{ href: string }>).map((target) => target.href).slice(0, 2), [
    'https://app.example.io/.well-known/oauth-protected-resource',
    'https://app.example.io/.well-known/oauth-authorization-server',
  ])
})

t.test('every catalog target is served by this server with 200', async (t) => {
  const body = (await bodyOf(await app.request('/.well-known/api-catalog'))) as { linkset: Array<Record<string, unknown>> }
  const hrefs = new Set<string>()
  for (const context of body.linkset) for (const [relation, targets] of Object.entries(context)) if (relation !== 'anchor') for (const target of targets as Array<{ href: string }>) hrefs.add(target.href)
  for (const href of hrefs) {
    const response = await app.request(new URL(href).pathname)
    await response.arrayBuffer()
    t.equal(response.status, 200, `${href} answers 200`)
  }
})

t.test('one API URL for both surfaces gives one context object', async (t) => {
  const single = await createTestApp(t, { env: { BASE_URL: 'https://one.example.io', PRODUCT_API_URL: 'https://one.example.io', APP_URL: 'https://one.example.io' } })
  const body = (await bodyOf(await single.request('/.well-known/api-catalog'))) as { linkset: Array<Record<string, unknown>> }
  t.same(body.linkset.map((context) => context.anchor), ['https://one.example.io'])
})

t.test('/.well-known/ai-plugin.json follows the plugin manifest v1 field rules', async (t) => {
  const response = await app.request('/.well-known/ai-plugin.json')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  const body = (await bodyOf(response)) as Record<string, unknown>
  t.equal(body.schema_version, 'v1')
  t.type(body.name_for_human, 'string')
  t.ok((body.name_for_human as string).length <= 20, 'name_for_human ≤ 20 characters')
  t.match(body.name_for_model, /^[A-Za-z0-9_]{1,50}$/, 'name_for_model ≤ 50, letters/digits/underscore')
  t.ok((body.description_for_human as string).length <= 100, 'description_for_human ≤ 100 characters')
  t.ok((body.description_for_model as string).length > 0)
  t.same(body.auth, { type: 'user_http', authorization_type: 'bearer' })
  t.same(body.api, { type: 'openapi', url: 'https://app.example.io/openapi.json' })
  t.equal(body.logo_url, 'https://app.example.io/logo.svg')
  t.equal(body.contact_email, 'security@example.com')
  t.ok(isAbsolute(body.legal_info_url))
  const logo = await app.request('/logo.svg')
  t.equal(logo.status, 200)
  t.equal(logo.headers.get('content-type'), 'image/svg+xml')
  t.match(await logo.text(), /^<svg /)
})

t.test('/agents.json and /.well-known/agents.json: the same document, every operationId exists in the OpenAPI', async (t) => {
  const response = await app.request('/agents.json')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  const body = (await bodyOf(response)) as {
    agentsJson: string
    info: Record<string, string>
    sources: Array<{ id: string; path: string }>
    flows: Array<{ id: string; title: string; description: string; actions: Array<{ id: string; sourceId: string; operationId: string }>; fields: unknown }>
  }
  t.same(await bodyOf(await app.request('/.well-known/agents.json')), body)
  t.match(body.agentsJson, /^\d+\.\d+\.\d+$/, 'agentsJson is a semantic version')
  t.same(Object.keys(body.info).sort(), ['description', 'title', 'version'])
  t.same(body.sources, [{ id: 'steward_api', path: 'https://app.example.io/openapi.json' }])
  const openapi = (await bodyOf(await app.request('/openapi.json'))) as { paths: Record<string, Record<string, { operationId?: string }>> }
  const operationIds = new Set(Object.values(openapi.paths).flatMap((item) => Object.values(item).map((op) => op.operationId)))
  t.ok(body.flows.length >= 2)
  const sources = new Set(body.sources.map((source) => source.id))
  for (const flow of body.flows) {
    t.match(flow.id, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `flow id ${flow.id} is snake_case`)
    t.type(flow.title, 'string')
    t.type(flow.description, 'string')
    t.same(flow.fields, { parameters: [], responses: { success: {} } })
    for (const action of flow.actions) {
      t.match(action.id, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `action id ${action.id} is snake_case`)
      t.ok(sources.has(action.sourceId), `${action.id} names a declared source`)
      t.ok(operationIds.has(action.operationId), `${action.operationId} exists in the OpenAPI document`)
    }
  }
  const ids = body.flows.map((flow) => flow.id)
  t.ok(ids.includes('create_demo_request'))
  t.ok(ids.includes('subscribe_newsletter'))
  t.notOk(ids.includes('join_waitlist'), 'the deprecated alias is no agent flow')
})

t.test('/llms.txt follows the llmstxt.org structure line by line', async (t) => {
  const response = await app.request('/llms.txt')
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'text/plain; charset=utf-8')
  const text = await response.text()
  t.ok(text.endsWith('\n'))
  const lines = text.replace(/\n$/, '').split('\n')
  t.match(lines[0], /^# \S/, 'line 1: # Title')
  t.equal(lines[1], '', 'line 2: blank')
  t.match(lines[2], /^> \S/, 'line 3: > summary')
  t.equal(lines[3], '', 'line 4: blank')
  t.match(lines[4], /^[^#>\-\s]/, 'line 5: a plain paragraph')
  let index = 5
  while (index < lines.length && !lines[index]!.startsWith('## ')) {
    t.notMatch(lines[index], /^(#|- \[)/, `line ${index + 1} is paragraph text`)
    index++
  }
  const sections: string[] = []
  for (; index < lines.length; index++) {
    const line = lines[index]!
    if (line.startsWith('## ')) {
      sections.push(line.slice(3))
      continue
    }
    if (line === '') continue
    const match = /^- \[([^\]]+)\]\(([^)\s]+)\): (.+)$/.exec(line)
    t.ok(match, `line ${index + 1} is "- [name](url): note": ${line}`)
    if (match) t.ok(isAbsolute(match[2]), `${match[2]} is an absolute URL`)
  }
  t.ok(sections.length >= 2, 'at least one section besides Optional')
  t.equal(sections.indexOf('Optional'), sections.length - 1, '## Optional comes last')
  t.match(text, /\]\(https:\/\/www\.example\.io\/forms\/demo-request\): POST \/demo-request/, 'lead operations link to BASE_URL')
})
