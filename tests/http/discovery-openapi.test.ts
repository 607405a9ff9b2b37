// The OpenAPI 3.1 document: accepted by two independent validators, complete (every route in the
// router is in the document and vice versa), and unable to drift from the request validators.
import SwaggerParser from '@apidevtools/swagger-parser'
import { Validator } from '@seriousme/openapi-schema-validator'
import Ajv2020 from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import t from 'tap'
import * as v from 'valibot'
import { validateInput } from '../../http/body.ts'
import { DemoRequestSchema, NewsletterRequestSchema } from '../../routes/leads.ts'
import { openApiPath } from '../../wellknown/openapi.ts'
import { bodyOf, createTestApp } from '../support/helpers.ts'
import { createLeadSurface } from '../../routes/leads.ts'
import { createProductSurface } from '../../routes/product.ts'
import { createDiscoverySurface } from '../../routes/discovery.ts'

type Operation = {
  operationId: string
  security?: unknown[]
  deprecated?: boolean
  parameters?: Array<{ $ref?: string; name?: string; in?: string }>
  requestBody?: { content: Record<string, { schema: { $ref?: string } }> }
  responses: Record<string, { description?: string }>
  servers?: unknown
  'x-undocumented'?: boolean
}
type Document = {
  openapi: string
  info: { title: string; version: string }
  servers: Array<{ url: string }>
  paths: Record<string, Record<string, Operation> & { servers?: Array<{ url: string }> }>
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, { type: string; scheme: string }>; parameters: Record<string, { name: string; in: string }> }
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete']
const env = { BASE_URL: 'https://leads.example.net', PRODUCT_API_URL: 'https://api.example.net/v1', APP_URL: 'https://console.example.net' }
const app = await createTestApp(t, { env })
const response = await app.request('/openapi.json')
const document = (await bodyOf(response)) as Document

function operations(doc: Document): Array<[string, string, Operation]> {
  const out: Array<[string, string, Operation]> = []
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of METHODS) if (item[method]) out.push([path, method, item[method] as Operation])
  }
  return out
}

t.test('GET /openapi.json and /.well-known/openapi.json answer 200 with the same JSON document', async (t) => {
  t.equal(response.status, 200)
  t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  const wellKnown = await app.request('/.well-known/openapi.json')
  t.equal(wellKnown.status, 200)
  t.same(await bodyOf(wellKnown), document)
})

t.test('the document passes @seriousme/openapi-schema-validator (OpenAPI 3.1 schema)', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(document) as Record<string, unknown>)
  t.same(result.errors ?? [], [], 'no errors')
  t.equal(result.valid, true)
  t.equal(validator.version, '3.1')
})

t.test('the document passes @apidevtools/swagger-parser validation, $refs resolved', async (t) => {
  const api = (await SwaggerParser.validate(structuredClone(document) as never)) as unknown as Document
  t.equal(api.openapi, '3.1.0')
})

t.test('info, servers and security schemes follow docs/api.md', async (t) => {
  t.match(document.openapi, /^3\.1\.\d+$/)
  t.equal(document.info.title, 'Steward API')
  t.equal(document.info.version, '1.0.0')
  t.same(document.servers, [{ url: env.BASE_URL }, { url: env.PRODUCT_API_URL }, { url: env.APP_URL }])
  t.same(document.components.securitySchemes.bearerAuth, {
    type: 'http',
    scheme: 'bearer',
    description: `Organization API key or access token from ${env.PRODUCT_API_URL}/auth/login, sent as "Authorization: Bearer <token>".`,
  })
  t.same(document.components.parameters.ServiceApiVersion!.name, 'Service-Api-Version')
  t.same(document.components.parameters.ServiceApiVersion!.in, 'header')
})

t.test('lead operations are public, take Service-Api-Version and are served from BASE_URL', async (t) => {
  for (const path of ['/demo-request', '/newsletter', '/waitlist']) {
    const item = document.paths[path]!
    const post = item.post as Operation
    t.same(post.security, [], `${path} is public`)
    t.same(post.parameters, [{ $ref: '#/components/parameters/ServiceApiVersion' }], `${path} documents the version header`)
    t.equal(item.servers, undefined, `${path} uses the first server (BASE_URL)`)
  }
  t.equal((document.paths['/demo-request']!.post as Operation).operationId, 'createDemoRequest')
  t.equal((document.paths['/newsletter']!.post as Operation).operationId, 'subscribeNewsletter')
  t.same(document.paths['/openapi.json']!.servers, [{ url: env.APP_URL }], 'discovery paths name APP_URL')
})

t.test('/waitlist is deprecated and documents its lifecycle headers and 410', async (t) => {
  const post = document.paths['/waitlist']!.post as Operation & { responses: Record<string, { headers?: Record<string, unknown> }> }
  t.equal(post.deprecated, true)
  t.ok(post.responses['200']!.headers!.Deprecation)
  t.ok(post.responses['200']!.headers!.Sunset)
  t.ok(post.responses['410'])
  t.equal((document.paths['/newsletter']!.post as Operation).deprecated, undefined)
})

t.test('operationIds are unique, every response has a description, security is explicit', async (t) => {
  const ids = operations(document).map(([, , op]) => op.operationId)
  t.equal(new Set(ids).size, ids.length, 'unique operationIds')
  for (const [path, method, op] of operations(document)) {
    for (const [status, response] of Object.entries(op.responses)) {
      t.type(response.description, 'string', `${method} ${path} ${status} has a description`)
    }
    if (op['x-undocumented']) continue
    t.ok(Array.isArray(op.security), `${method} ${path} states its security`)
    for (const requirement of op.security ?? []) t.same(Object.keys(requirement as object), ['bearerAuth'], `${method} ${path} uses the bearer scheme`)
  }
})

t.test('every valibot schema converted completely (no x-conversion-error)', async (t) => {
  const flagged = JSON.stringify(document).match(/"x-conversion-error":"[^"]*"/g) ?? []
  t.same(flagged, [])
})

t.test('every route of every surface is in the document, and every operation is a route', async (t) => {
  const config = app.config
  const leads = createLeadSurface(config)
  const product = createProductSurface(config, { db: app.db, clock: app.clock.read, logger: { log() {} } } as never)
  const discovery = createDiscoverySurface(config, [leads, product])
  const routes = [leads, product, discovery].flatMap((surface) => surface.routes.map((route) => `${route.method.toLowerCase()} ${openApiPath(route.path)}`))
  const documented = operations(document).map(([path, method]) => `${method} ${path}`)
  t.same([...documented].sort(), [...routes].sort())
  for (const [path] of operations(document)) t.notMatch(path, /:/, `${path} uses {name} templates, not :name`)
  const undocumented = operations(document).filter(([, , op]) => op['x-undocumented']).map(([path, method]) => `${method.toUpperCase()} ${path}`)
  t.same(undocumented, [], 'every route carries an OperationDoc')
  await Promise.all([leads, product, discovery].map((surface) => surface.close?.()))
})

// The JSON Schema the document publishes and the valibot schema the handler runs must agree.
const ajv = new Ajv2020({ strict: false, allErrors: true })
addFormats.default(ajv)
function documentSchema(operationPath: string) {
  const ref = (document.paths[operationPath]!.post as Operation).requestBody!.content['application/json']!.schema.$ref!
  return ajv.compile({ $ref: ref, components: { schemas: document.components.schemas } })
}

const SAMPLES: Record<string, { schema: v.GenericSchema; valid: unknown[]; invalid: unknown[] }> = {
  '/demo-request': {
    schema: DemoRequestSchema,
    valid: [
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company: 'Analytical', linkedin: 'https://linkedin.com/in/ada' },
      { first_name: 'Seán', last_name: "O'Brien", email: "o'brien@example.com", company: 'X', linkedin: 'x', phone: '+353 1', source: 'web', extra: 1 },
      { first_name: 'A', last_name: 'B', email: 'a+tag@example.co.uk', company: 'C', linkedin: 'D', analytics_distinct_id: 'abc' },
    ],
    invalid: [
      {},
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company: 'Analytical' },
      { first_name: '', last_name: 'Lovelace', email: 'ada@example.com', company: 'Analytical', linkedin: 'x' },
      { first_name: '   ', last_name: 'Lovelace', email: 'ada@example.com', company: 'Analytical', linkedin: 'x' },
      { first_name: 'Ada', last_name: 'Lovelace', email: 'not-an-email', company: 'Analytical', linkedin: 'x' },
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company: 'Analytical', linkedin: 'x', phone: 5 },
      { first_name: 'x'.repeat(201), last_name: 'L', email: 'ada@example.com', company: 'C', linkedin: 'x' },
    ],
  },
  '/newsletter': {
    schema: NewsletterRequestSchema,
    valid: [{ email: 'news@example.com' }, { email: 'n@example.org', source: 'footer', analytics_distinct_id: 'id', unknown: true }],
    invalid: [{}, { email: '' }, { email: 'a@b' }, { email: 'two@@example.com' }, { email: 'x@example.com', source: 7 }, { email: 42 }],
  },
}

for (const [path, { schema, valid, invalid }] of Object.entries(SAMPLES)) {
  t.test(`POST ${path}: the published JSON Schema, the valibot schema and the handler agree`, async (t) => {
    const check = documentSchema(path)
    for (const [expected, bodies] of [[true, valid], [false, invalid]] as const) {
      for (const body of bodies) {
        const label = `${expected ? 'valid' : 'invalid'} ${JSON.stringify(body).slice(0, 80)}`
        t.equal(check(body), expected, `JSON Schema: ${label}`)
        let accepted = true
        try {
          validateInput({ schema, mediaTypes: ['application/json'], required: true, nullIsAbsent: true }, body as Record<string, unknown>)
        } catch {
          accepted = false
        }
        t.equal(accepted, expected, `valibot: ${label}`)
        const answer = await app.request(path, { method: 'POST', json: body })
        await answer.arrayBuffer()
        if (expected) t.ok(answer.status === 200 || answer.status === 409, `handler accepts ${label} (${answer.status})`)
        else t.equal(answer.status, 400, `handler refuses ${label}`)
      }
    }
  })
}

t.test('for every operation with a body, the published schema and its valibot schema agree on generic samples', async (t) => {
  const config = app.config
  const leads = createLeadSurface(config)
  const product = createProductSurface(config, { db: app.db, clock: app.clock.read, logger: { log() {} } } as never)
  let checked = 0
  for (const route of [...leads.routes, ...product.routes]) {
    if (!route.doc?.body) continue
    const operation = document.paths[openApiPath(route.path)]![route.method.toLowerCase()] as Operation
    const mediaType = route.doc.body.mediaTypes[0]!
    const published = operation.requestBody!.content[mediaType]!.schema
    const check = ajv.compile({ ...published, components: { schemas: document.components.schemas } })
    for (const sample of [{}, { unknown: 1 }, { email: '' }, { name: '   ' }, { name: 5 }]) {
      const valibot = v.safeParse(route.doc.body.schema, sample).success
      t.equal(check(sample), valibot, `${route.method} ${route.path} ${JSON.stringify(sample)}: JSON Schema and valibot agree`)
    }
    // Non-objects never reach valibot (whose object() also takes arrays): the body reader refuses them.
    for (const sample of [42, 'text', null, []]) t.equal(check(sample), false, `${route.method} ${route.path} ${JSON.stringify(sample)}: refused`)
    checked++
  }
  t.ok(checked >= 3, `${checked} operations with a body checked`)
  await Promise.all([leads, product].map((surface) => surface.close?.()))
})

t.test('an email the handler refuses is refused by the published format too', async (t) => {
  const check = documentSchema('/newsletter')
  for (const email of ['a b@example.com', 'a@example', '.a@example.com', 'a..b@example.com', 'a@-example.com']) {
    t.equal(check({ email }), false, `JSON Schema refuses ${email}`)
    const answer = await app.request('/newsletter', { method: 'POST', json: { email } })
    t.equal(answer.status, 400, `handler refuses ${email}`)
  }
})
