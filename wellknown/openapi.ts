// OpenAPI 3.1 document generated from the OperationDocs beside each route, converting the very
// valibot schemas the handlers validate with (@valibot/to-json-schema), so the document cannot
// drift from the code. Nothing here is hand-written JSON Schema.
import { toJsonSchema, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema'
import type { GenericSchema } from 'valibot'
import type { Config } from '../config.ts'
import type { LifecycleEntry } from '../domain/lifecycle.ts'
import type { OperationDoc, PublishedRoute as Route, PublishedSurface as Surface, ResponseDoc } from '../http/pipeline.ts'

export const OPENAPI_VERSION = '3.1.0'
export const API_VERSION = '1.0.0'
export const BEARER_SCHEME = 'bearerAuth'
export const VERSION_HEADER = 'Service-Api-Version'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type JsonObject = { [key: string]: Json }

/** Marks a string schema whose value is trimmed before later pipe actions run (see convert()). */
const TRIMMED = Symbol('trimmed')

function conversion(typeMode: 'input' | 'output'): ConversionConfig {
  return {
    target: 'draft-2020-12',
    typeMode,
    // Anything the converter cannot express must fail the build, not vanish from the document;
    // the two actions below are the deliberate exceptions.
    errorMode: 'throw',
    overrideAction({ valibotAction, jsonSchema, errors }) {
      switch (valibotAction.type) {
        // A custom check describes itself through v.metadata() in the same pipe (e.g. the email
        // check of routes/leads.ts carries { format: 'email' }).
        case 'check':
          return jsonSchema
        // Trimming widens what the client may send; the constraints after it are the ones that
        // matter, and "non-empty after trim" means "holds a non-whitespace character".
        case 'trim':
          return Object.assign({ ...jsonSchema }, { [TRIMMED]: true })
        case 'non_empty':
          return (jsonSchema as { [TRIMMED]?: boolean })[TRIMMED] ? withPattern(jsonSchema, '\\S') : undefined
        // JSON Schema has one `pattern` per schema; a second one must hold as well (allOf).
        case 'regex': {
          const requirement = (valibotAction as unknown as { requirement: RegExp }).requirement
          const conflict = errors !== undefined && jsonSchema.pattern !== undefined && jsonSchema.pattern !== requirement.source
          return conflict && requirement.flags === '' ? withPattern(jsonSchema, requirement.source) : undefined
        }
        default:
          return undefined
      }
    },
  }
}

function withPattern(jsonSchema: JsonSchema, pattern: string): JsonSchema {
  if (jsonSchema.pattern === undefined) return { ...jsonSchema, pattern }
  return { ...jsonSchema, allOf: [...(jsonSchema.allOf ?? []), { pattern }] }
}

/**
 * The JSON Schema of a valibot schema, as plain JSON (conversion markers dropped). A schema the
 * converter cannot express fully is still published, converted leniently and flagged with
 * `x-conversion-error`, rather than stopping the server; the test suite refuses any such flag.
 */
export function convert(schema: GenericSchema, typeMode: 'input' | 'output'): JsonObject {
  let converted: JsonSchema & { $schema?: string; 'x-conversion-error'?: string }
  try {
    converted = toJsonSchema(schema, conversion(typeMode))
  } catch (error) {
    converted = { ...toJsonSchema(schema, { ...conversion(typeMode), errorMode: 'ignore' }), 'x-conversion-error': (error as Error).message }
  }
  const { $schema: _dialect, ...rest } = converted
  // The document's jsonSchemaDialect is 2020-12 already; a JSON round trip drops the symbol markers.
  return JSON.parse(JSON.stringify(rest)) as JsonObject
}

/** itty-router pattern → OpenAPI path template: "/policies/:policy_id" → "/policies/{policy_id}". */
export function openApiPath(pattern: string): string {
  return pattern.replace(/:(\w+)\+?/g, '{$1}')
}

export function pathParameters(pattern: string): string[] {
  return [...pattern.matchAll(/:(\w+)\+?/g)].map((match) => match[1]!)
}

/** Which public URL serves a surface (docs/api.md). */
export function surfaceUrl(config: Config, surface: Surface): string {
  if (surface.name === 'product') return config.productApiUrl
  if (surface.name === 'discovery') return config.appUrl
  return config.baseUrl
}

class ComponentSchemas {
  readonly schemas: Record<string, JsonObject> = {}
  /** A titled schema becomes a named component; an equal title with another shape stays inline. */
  ref(schema: JsonObject): Json {
    const title = typeof schema.title === 'string' && /^[A-Za-z0-9._-]+$/.test(schema.title) ? schema.title : null
    if (!title) return schema
    const existing = this.schemas[title]
    if (existing && JSON.stringify(existing) !== JSON.stringify(schema)) return schema
    this.schemas[title] = schema
    return { $ref: `#/components/schemas/${title}` }
  }
}

function responseObject(doc: ResponseDoc, components: ComponentSchemas, lifecycle: LifecycleEntry | null): JsonObject {
  const out: JsonObject = { description: doc.description }
  const headers: JsonObject = {}
  for (const [name, description] of Object.entries(doc.headers ?? {})) headers[name] = { description, schema: { type: 'string' } }
  if (lifecycle) Object.assign(headers, lifecycleHeaderDocs(lifecycle))
  if (Object.keys(headers).length > 0) out.headers = headers
  if (doc.schema) out.content = { [doc.mediaType ?? 'application/json']: { schema: components.ref(convert(doc.schema, 'output')) } }
  else if (doc.mediaType) out.content = { [doc.mediaType]: {} }
  return out
}

function lifecycleHeaderDocs(entry: LifecycleEntry): JsonObject {
  const headers: JsonObject = {
    Deprecation: { description: 'RFC 9745: when this operation was deprecated (structured-field date, "@" + epoch seconds).', schema: { type: 'string' } },
  }
  if (entry.sunset) headers.Sunset = { description: 'RFC 8594: when this operation stops working (HTTP-date).', schema: { type: 'string' } }
  if (entry.deprecationLink || entry.sunsetLink) {
    headers.Link = { description: 'Links with rel="deprecation" and rel="sunset" to human documentation.', schema: { type: 'string' } }
  }
  return headers
}

function operationObject(route: Route, doc: OperationDoc, config: Config, components: ComponentSchemas): JsonObject {
  const lifecycle = config.lifecycle.routes[route.path] ?? null
  const parameters: Json[] = []
  for (const name of pathParameters(route.path)) parameters.push({ name, in: 'path', required: true, schema: { type: 'string' } })
  if (doc.query) {
    const query = convert(doc.query, 'input')
    const properties = (query.properties ?? {}) as Record<string, JsonObject>
    const required = new Set((query.required ?? []) as string[])
    for (const [name, schema] of Object.entries(properties)) {
      const { description, ...rest } = schema
      const parameter: JsonObject = { name, in: 'query', required: required.has(name), schema: rest }
      if (typeof description === 'string') parameter.description = description
      parameters.push(parameter)
    }
  }
  for (const [name, description] of Object.entries(doc.headers ?? {})) {
    if (name.toLowerCase() === VERSION_HEADER.toLowerCase()) parameters.push({ $ref: `#/components/parameters/ServiceApiVersion` })
    else parameters.push({ name, in: 'header', required: false, description, schema: { type: 'string' } })
  }

  const operation: JsonObject = { operationId: doc.operationId, summary: doc.summary }
  if (doc.description) operation.description = doc.description
  if (doc.tags.length > 0) operation.tags = [...doc.tags]
  // An empty list overrides any default: the operation is public (OpenAPI 3.1 §4.8.10).
  operation.security = doc.scopes === null ? [] : [{ [BEARER_SCHEME]: [...doc.scopes] }]
  if (parameters.length > 0) operation.parameters = parameters
  if (doc.body) {
    const schema = components.ref(convert(doc.body.schema, 'input'))
    const content: JsonObject = {}
    for (const type of doc.body.mediaTypes) content[type] = { schema }
    operation.requestBody = { required: doc.body.required, content }
  }
  const responses: JsonObject = {}
  for (const [status, response] of Object.entries(doc.responses)) responses[status] = responseObject(response, components, lifecycle)
  if (lifecycle?.sunset && !responses['410']) {
    responses['410'] = { description: `Retired on ${lifecycle.sunset.toUTCString()}; the body names the replacement.` }
  }
  operation.responses = responses
  if (doc.deprecated || lifecycle) operation.deprecated = true
  return operation
}

export interface OpenApiOptions {
  readonly title?: string
  readonly description?: string
}

/** Builds the document once, from every surface's routes. Throws on a duplicate operationId. */
export function buildOpenApi(config: Config, surfaces: readonly Surface[], options: OpenApiOptions = {}): JsonObject {
  const components = new ComponentSchemas()
  const serverUrls = [...new Set(surfaces.map((surface) => surfaceUrl(config, surface)))]
  if (serverUrls.length === 0) serverUrls.push(config.baseUrl)
  const paths: Record<string, JsonObject> = {}
  const operationIds = new Set<string>()
  const tags = new Set<string>()

  for (const surface of surfaces) {
    const url = surfaceUrl(config, surface)
    for (const route of surface.routes) {
      const operation = operationObject(route, route.doc, config, components)
      const id = operation.operationId as string
      if (operationIds.has(id)) throw new Error(`OpenAPI: operationId ${id} is used twice (${route.method} ${route.path})`)
      operationIds.add(id)
      for (const tag of route.doc.tags) tags.add(tag)
      const path = openApiPath(route.path)
      const item = (paths[path] ??= {})
      // A path served from another public URL than the first server says so (OpenAPI 3.1 §4.8.9).
      if (url !== serverUrls[0]) item.servers = [{ url }]
      item[route.method.toLowerCase()] = operation
    }
  }

  return {
    openapi: OPENAPI_VERSION,
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: options.title ?? 'Steward API',
      version: API_VERSION,
      description:
        options.description ??
        'Public lead capture (demo requests, newsletter) and the bearer-token product API that governs autonomous AI agents.',
      contact: { email: config.contactEmail },
    },
    servers: serverUrls.map((url) => ({ url })),
    tags: [...tags].map((name) => ({ name })),
    paths,
    components: {
      schemas: components.schemas,
      parameters: {
        ServiceApiVersion: {
          name: VERSION_HEADER,
          in: 'header',
          required: false,
          description: 'API version: a semantic version such as 1.0.0 or a major alias such as v1. Defaults to v1; informational only.',
          schema: { type: 'string', default: 'v1', examples: ['v1', '1.0.0'] },
        },
      },
      securitySchemes: {
        [BEARER_SCHEME]: {
          type: 'http',
          scheme: 'bearer',
          description: `Organization API key or access token from ${config.productApiUrl}/auth/login, sent as "Authorization: Bearer <token>".`,
        },
      },
    },
  }
}
