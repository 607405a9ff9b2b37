// RFC 9727 API catalog: a linkset (RFC 9264) naming each API of this server and its descriptions.
import type { Config } from '../config.ts'

export const API_CATALOG_PATH = '/.well-known/api-catalog'
/** RFC 9727 §5: the linkset media type with the api-catalog profile. */
export const API_CATALOG_CONTENT_TYPE = 'application/linkset+json; profile="https://www.rfc-editor.org/info/rfc9727"'

export interface LinkTarget {
  readonly href: string
  readonly type?: string
  readonly title?: string
  readonly hreflang?: readonly string[]
}

/** RFC 9264 §4.2: an anchor plus relation members, each an array of target objects. */
export type LinkContext = { readonly anchor: string } & { readonly [relation: string]: string | readonly LinkTarget[] }

export interface ApiCatalog {
  readonly linkset: readonly LinkContext[]
}

function apiCatalogUrl(config: Config): string {
  return `${config.appUrl}${API_CATALOG_PATH}`
}

/** The Link header RFC 9727 §3 asks the catalog (and its HEAD) to carry. */
export function apiCatalogLinkHeader(config: Config): string {
  return `<${apiCatalogUrl(config)}>; rel="api-catalog"`
}

export function buildApiCatalog(config: Config): ApiCatalog {
  const openapi: LinkTarget = { href: `${config.appUrl}/openapi.json`, type: 'application/vnd.oai.openapi+json;version=3.1', title: 'OpenAPI 3.1 description' }
  const doc: LinkTarget = { href: `${config.appUrl}/llms.txt`, type: 'text/plain', title: 'API overview', hreflang: ['en'] }
  const status: LinkTarget = { href: `${config.productApiUrl}/health`, type: 'application/json', title: 'Health probe' }
  const lead: Record<string, readonly LinkTarget[]> = { 'service-desc': [openapi], 'service-doc': [doc], status: [status] }
  const product: Record<string, readonly LinkTarget[]> = {
    ...lead,
    'service-meta': [
      { href: `${config.appUrl}/.well-known/oauth-protected-resource`, type: 'application/json', title: 'OAuth protected resource metadata (RFC 9728)' },
      { href: `${config.appUrl}/.well-known/oauth-authorization-server`, type: 'application/json', title: 'OAuth authorization server metadata (RFC 8414)' },
      { href: `${config.appUrl}/agents.json`, type: 'application/json', title: 'Agent flows (agents.json)' },
      { href: `${config.appUrl}/.well-known/ai-plugin.json`, type: 'application/json', title: 'AI plugin manifest' },
    ],
  }
  // One context object per distinct API URL; when both surfaces share a URL they are one API.
  if (config.baseUrl === config.productApiUrl) return { linkset: [{ anchor: config.productApiUrl, ...product }] }
  return { linkset: [{ anchor: config.baseUrl, ...lead }, { anchor: config.productApiUrl, ...product }] }
}
