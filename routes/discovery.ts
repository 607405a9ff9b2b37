// The discovery surface (docs/api.md): every document is built once, on its first request (not at
// start, where the OpenAPI document alone cost about 0.1 s of every server start), from the
// configured public URLs and the other surfaces' routes, and then served as the same static bytes
// with a strong ETag. Public, cacheable, readable from any origin, never redirected.
import { createHash } from 'node:crypto'
import type { IRequest } from 'itty-router'
import type { Config } from '../config.ts'
import { buildAgentsJson } from '../wellknown/agents.ts'
import { buildAiPlugin } from '../wellknown/ai-plugin.ts'
import { API_CATALOG_CONTENT_TYPE, API_CATALOG_PATH, apiCatalogLinkHeader, buildApiCatalog } from '../wellknown/api-catalog.ts'
import { buildLlmsTxt } from '../wellknown/llms.ts'
import { LOGO_SVG } from '../wellknown/logo.ts'
import { buildAuthorizationServerMetadata } from '../wellknown/oauth-authorization-server.ts'
import { buildProtectedResourceMetadata, protectedResourceSuffixes } from '../wellknown/oauth-protected-resource.ts'
import { API_VERSION, buildOpenApi } from '../wellknown/openapi.ts'
import { HttpError } from '../http/errors.ts'
import { JSON_TYPE, reply, type Reply } from '../http/reply.ts'
import type { OperationDoc, PublishedSurface, ResponseDoc } from '../http/pipeline.ts'
import type { Route, Surface } from './deps.ts'

const CACHE_CONTROL = 'public, max-age=3600'

export interface StaticDocument {
  readonly body: string
  readonly headers: Readonly<Record<string, string>>
  readonly etag: string
}

function staticDocument(body: string, contentType: string, extra: Record<string, string> = {}): StaticDocument {
  // A strong validator over the exact bytes (RFC 9110 §8.8.3): SHA-256, base64url. node:crypto
  // (on Node, Bun and Deno) hashes the documents in well under a millisecond where a JavaScript
  // SHA-256, cold at start-up, took over 100 ms.
  const etag = `"${createHash('sha256').update(body).digest('base64url')}"`
  return Object.freeze({
    body,
    etag,
    headers: Object.freeze({
      'Content-Type': contentType,
      ETag: etag,
      'Cache-Control': CACHE_CONTROL,
      // Public metadata: any web client may read it (no credentials are involved).
      'Access-Control-Allow-Origin': '*',
      'Access-Control-Expose-Headers': 'ETag, Link, Deprecation, Sunset',
      ...extra,
    }),
  })
}

function jsonDocument(value: unknown, extra: Record<string, string> = {}, contentType = JSON_TYPE): StaticDocument {
  return staticDocument(JSON.stringify(value, null, 2) + '\n', contentType, extra)
}

/** RFC 9110 §13.1.2: If-None-Match matches "*" or any listed tag by weak comparison. */
function notModified(request: Request, etag: string): boolean {
  const header = request.headers.get('if-none-match')
  if (header === null) return false
  if (header.trim() === '*') return true
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
}

function serveDocument(document: StaticDocument, request: Request): Reply {
  if (notModified(request, document.etag)) {
    const { 'Content-Type': _type, ...headers } = document.headers
    return reply(304, null, headers)
  }
  return reply(200, document.body, document.headers)
}

const NOT_MODIFIED: ResponseDoc = { description: 'Not modified: If-None-Match matched the current ETag.' }

function documentDoc(operationId: string, summary: string, mediaType: string, extra: Partial<OperationDoc> = {}): OperationDoc {
  return {
    operationId,
    summary,
    tags: ['Discovery'],
    scopes: null,
    responses: {
      200: { description: summary, mediaType, headers: { ETag: 'Strong validator of the document.', 'Cache-Control': 'public, max-age=3600' } },
      304: NOT_MODIFIED,
    },
    ...extra,
  }
}

/** Paths of the other surfaces' routes that require a bearer token. */
function protectedPaths(surfaces: readonly PublishedSurface[]): string[] {
  return surfaces.flatMap((surface) => surface.routes.filter((route) => route.doc.scopes !== null).map((route) => route.path))
}

/**
 * @param others the surfaces whose routes the OpenAPI document, agents.json and llms.txt
 *   describe (the discovery surface adds its own routes).
 * @param resources more protected paths with a metadata document of their own, not described
 *   in those documents (the MCP gateway's /mcp).
 */
export function createDiscoverySurface(config: Config, others: readonly PublishedSurface[] = [], resources: readonly string[] = []): Surface {
  const builders = new Map<string, () => StaticDocument>()
  const documents = new Map<string, StaticDocument>()
  const documentFor = (key: string): StaticDocument => {
    let document = documents.get(key)
    if (document === undefined) {
      document = builders.get(key)!()
      documents.set(key, document)
    }
    return document
  }
  const serve = (key: string) => (request: IRequest) => serveDocument(documentFor(key), request as unknown as Request)
  let suffixes: Map<string, StaticDocument> | null = null

  const routes: Route[] = [
    {
      method: 'GET',
      path: '/.well-known/oauth-protected-resource',
      handler: serve('prm'),
      doc: documentDoc('getProtectedResourceMetadata', 'OAuth protected resource metadata of the product API (RFC 9728)', 'application/json'),
    },
    {
      method: 'GET',
      path: '/.well-known/oauth-protected-resource/:resource_path+',
      handler: (request: IRequest) => {
        suffixes ??= new Map(
          [...protectedResourceSuffixes(config, [...protectedPaths(others), ...resources])].map(([suffix, resource]) => [suffix, jsonDocument(buildProtectedResourceMetadata(config, resource))]),
        )
        const document = suffixes.get(request.params.resource_path ?? '')
        // RFC 9728 §3.1: never a mismatching `resource`; 404 sends the client to the root document.
        if (!document) throw new HttpError(404, 'No protected resource at this path; use /.well-known/oauth-protected-resource')
        return serveDocument(document, request as unknown as Request)
      },
      doc: documentDoc('getProtectedResourceMetadataForPath', 'OAuth protected resource metadata of one protected URL of the product API (RFC 9728 §3.1)', 'application/json', {
        description: 'Answers for the product API base path and each protected path without parameters, with `resource` equal to that URL; 404 for anything else.',
        responses: {
          200: { description: 'Metadata whose resource is <PRODUCT_API_URL>/<resource_path>.', mediaType: 'application/json' },
          304: NOT_MODIFIED,
          404: { description: 'Not a protected resource of this server; use the root document.', mediaType: 'application/json' },
        },
      }),
    },
    {
      method: 'GET',
      path: '/.well-known/oauth-authorization-server',
      handler: serve('as'),
      doc: documentDoc('getAuthorizationServerMetadata', 'OAuth authorization server metadata (RFC 8414)', 'application/json'),
    },
    {
      method: 'GET',
      path: API_CATALOG_PATH,
      handler: serve('catalog'),
      doc: documentDoc('getApiCatalog', 'API catalog (RFC 9727)', 'application/linkset+json', {
        description: 'Also answers HEAD with the same headers, including Link rel="api-catalog".',
      }),
    },
    { method: 'GET', path: '/openapi.json', handler: serve('openapi'), doc: documentDoc('getOpenApi', 'OpenAPI 3.1 description of every operation', 'application/json') },
    {
      method: 'GET',
      path: '/.well-known/openapi.json',
      handler: serve('openapi'),
      doc: documentDoc('getWellKnownOpenApi', 'OpenAPI 3.1 description (well-known location)', 'application/json'),
    },
    { method: 'GET', path: '/.well-known/ai-plugin.json', handler: serve('ai-plugin'), doc: documentDoc('getAiPluginManifest', 'AI plugin manifest (v1)', 'application/json') },
    { method: 'GET', path: '/agents.json', handler: serve('agents'), doc: documentDoc('getAgentsJson', 'agents.json flows over the OpenAPI operations', 'application/json') },
    {
      method: 'GET',
      path: '/.well-known/agents.json',
      handler: serve('agents'),
      doc: documentDoc('getWellKnownAgentsJson', 'agents.json (well-known location)', 'application/json'),
    },
    { method: 'GET', path: '/llms.txt', handler: serve('llms'), doc: documentDoc('getLlmsTxt', 'llms.txt overview for language models', 'text/plain') },
    { method: 'GET', path: '/logo.svg', handler: serve('logo'), doc: documentDoc('getLogo', 'Logo referenced by the plugin manifest', 'image/svg+xml') },
  ]

  const surface: Surface = { name: 'discovery', routes, errorBody: (_status, error) => ({ error: error.message }) }

  builders.set('prm', () => jsonDocument(buildProtectedResourceMetadata(config)))
  const revocation = others.some((s) => s.name === 'product' && s.routes.some((r) => r.method === 'POST' && r.path === '/auth/revoke'))
  builders.set('as', () => jsonDocument(buildAuthorizationServerMetadata(config, revocation ? { revocationEndpoint: `${config.productApiUrl}/auth/revoke` } : {})))
  builders.set('catalog', () => jsonDocument(buildApiCatalog(config), { Link: apiCatalogLinkHeader(config) }, API_CATALOG_CONTENT_TYPE))
  let openapi: ReturnType<typeof buildOpenApi> | null = null
  const openApiDocument = () => (openapi ??= buildOpenApi(config, [...others, surface]))
  builders.set('openapi', () => jsonDocument(openApiDocument()))
  builders.set('ai-plugin', () => jsonDocument(buildAiPlugin(config)))
  builders.set('agents', () => jsonDocument(buildAgentsJson(config, openApiDocument() as never, API_VERSION)))
  builders.set('llms', () => staticDocument(buildLlmsTxt(config, openApiDocument() as never), 'text/plain; charset=utf-8'))
  builders.set('logo', () => staticDocument(LOGO_SVG, 'image/svg+xml'))
  return surface
}
