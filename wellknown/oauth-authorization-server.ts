// RFC 8414 OAuth 2.0 Authorization Server Metadata.
import type { Config } from '../config.ts'
import { SCOPES } from '../domain/scopes.ts'

export interface AuthorizationServerMetadata {
  readonly issuer: string
  readonly token_endpoint: string
  readonly grant_types_supported: readonly string[]
  readonly token_endpoint_auth_methods_supported: readonly string[]
  readonly scopes_supported: readonly string[]
  readonly response_types_supported: readonly string[]
  readonly service_documentation: string
  readonly revocation_endpoint?: string
}

/**
 * Deliberate choices (documented in the README):
 * - `issuer` is APP_URL, the URL this document is derived from (RFC 8414 §3.3).
 * - `grant_types_supported` is explicit: omitted would mean authorization_code and implicit (§2),
 *   which we do not offer; never `password` (RFC 9700 §2.4).
 * - `response_types_supported` is REQUIRED (§2) but we have no authorization endpoint, so the
 *   truthful value is the empty list; it is kept rather than omitted (§3.2's "omit zero-element
 *   claims") because a document without a REQUIRED member is refused outright.
 * - no `authorization_endpoint`: §2 requires it only when a supported grant type uses it, and
 *   neither client_credentials nor refresh_token does. No `registration_endpoint` (docs/api.md).
 */
export function buildAuthorizationServerMetadata(config: Config, options: { revocationEndpoint?: string } = {}): AuthorizationServerMetadata {
  const metadata: AuthorizationServerMetadata = {
    issuer: config.appUrl,
    token_endpoint: `${config.productApiUrl}/auth/login`,
    grant_types_supported: ['client_credentials', 'refresh_token'],
    token_endpoint_auth_methods_supported: ['client_secret_post', 'client_secret_basic'],
    scopes_supported: [...SCOPES],
    response_types_supported: [],
    service_documentation: `${config.appUrl}/llms.txt`,
  }
  return options.revocationEndpoint ? { ...metadata, revocation_endpoint: options.revocationEndpoint } : metadata
}
