// RFC 9728 OAuth 2.0 Protected Resource Metadata for the product API.
import type { Config } from '../config.ts'

/** Scopes of the product API; they map to role permissions (docs/api.md). */
export const PRODUCT_SCOPES = Object.freeze([
  'policies:read',
  'policies:write',
  'keys:manage',
  'members:manage',
  'agents:read',
  'agents:write',
  'decisions:read',
  'decisions:check',
] as const)

export interface ProtectedResourceMetadata {
  readonly resource: string
  readonly authorization_servers: readonly string[]
  readonly bearer_methods_supported: readonly string[]
  readonly scopes_supported: readonly string[]
  readonly resource_name: string
  readonly resource_documentation: string
}

/**
 * The metadata of `resource`, which is the product API URL itself or a protected URL under it.
 * RFC 9728 §3.3: `resource` must be byte-identical to the URL the well-known path was inserted
 * into, so it is the configured string, never re-serialized through URL.
 */
export function buildProtectedResourceMetadata(config: Config, resource: string = config.productApiUrl): ProtectedResourceMetadata {
  return {
    resource,
    // RFC 9728 §2: issuer identifiers; the first is the RFC 8414 issuer (APP_URL).
    authorization_servers: [config.appUrl],
    // Tokens are accepted only in the Authorization header (docs/api.md; RFC 6750 §2.1).
    bearer_methods_supported: ['header'],
    scopes_supported: [...PRODUCT_SCOPES],
    resource_name: 'Steward product API',
    resource_documentation: `${config.appUrl}/llms.txt`,
  }
}

/**
 * Path-suffixed variants (RFC 9728 §3.1): a client holding the resource URL `<origin>/<path>`
 * asks for `/.well-known/oauth-protected-resource/<path>` and must get `resource` equal to that
 * URL. We answer only for URLs that really are protected resources of this server (the product
 * API base when it has a path, and each protected route without path parameters); any other
 * suffix is a 404, after which clients use the root document. Keys are the suffix without its
 * leading slash.
 */
export function protectedResourceSuffixes(config: Config, protectedPaths: readonly string[]): Map<string, string> {
  const api = new URL(config.productApiUrl)
  const basePath = api.pathname.replace(/\/+$/, '')
  const out = new Map<string, string>()
  if (basePath !== '') out.set(basePath.slice(1), config.productApiUrl)
  for (const path of protectedPaths) {
    if (path.includes(':') || path.includes('*')) continue
    out.set(`${basePath}${path}`.slice(1), `${config.productApiUrl}${path}`)
  }
  return out
}
