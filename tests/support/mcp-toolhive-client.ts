// ToolHive's HTTP authorizer as its Go source builds each request (stacklok/toolhive
// pkg/authz/authorizers/http: porc.go, claim_mapper.go, core.go, http_client.go), ported line by
// line so the tests post exactly the bytes and headers a ToolHive proxy posts: the PORC of
// PORCBuilder.Build, annotations under context.mcp.annotations, encoding/json's Marshal of a Go map
// (keys sorted, no spaces, <, > and & escaped), url.JoinPath(base, "/decision"), and net/http's
// request with Content-Type and Accept set, and Basic authentication from the URL's user information.

export type Feature = 'tool' | 'prompt' | 'resource'
export type Operation = 'call' | 'get' | 'read' | 'list'
export type Claims = Record<string, unknown>

/** ConfigOptions of an "httpv1" authorizer (config.go): what a ToolHive user writes. */
export interface ToolhiveConfig {
  readonly url: string
  readonly claimMapping: 'mpe' | 'standard'
  readonly context?: { readonly includeArgs?: boolean; readonly includeOperation?: boolean }
}

/** MPEClaimMapper.MapClaims. */
function mpeClaims(claims: Claims | null): Claims {
  const principal: Claims = {}
  if (claims === null) return principal
  if ('sub' in claims) principal.sub = claims.sub
  if ('mroles' in claims) principal.mroles = claims.mroles
  else if ('roles' in claims) principal.mroles = claims.roles
  if ('mgroups' in claims) principal.mgroups = claims.mgroups
  else if ('groups' in claims) principal.mgroups = claims.groups
  if ('scopes' in claims) principal.scopes = claims.scopes
  else if ('scope' in claims) principal.scopes = claims.scope
  if ('mclearance' in claims) principal.mclearance = claims.mclearance
  else if ('clearance' in claims) principal.mclearance = claims.clearance
  if ('mannotations' in claims) principal.mannotations = claims.mannotations
  else if ('annotations' in claims) principal.mannotations = claims.annotations
  else principal.mannotations = {}
  return principal
}

/** StandardClaimMapper.MapClaims. */
function standardClaims(claims: Claims | null): Claims {
  const principal: Claims = {}
  if (claims === null) return principal
  if ('sub' in claims) principal.sub = claims.sub
  if ('roles' in claims) principal.roles = claims.roles
  if ('groups' in claims) principal.groups = claims.groups
  if ('scopes' in claims) principal.scopes = claims.scopes
  else if ('scope' in claims) principal.scopes = claims.scope
  return principal
}

/**
 * PORCBuilder.Build for the server named serverName, then (a tool only) enrichPORCWithAnnotations
 * with the annotations ToolHive cached from the upstream's tools/list (AnnotationsToMap).
 */
export function buildPorc(
  config: ToolhiveConfig,
  serverName: string,
  feature: Feature,
  operation: Operation,
  resourceId: string,
  claims: Claims | null,
  args: Record<string, unknown> | null,
  annotations: Record<string, boolean> | null = null,
): Record<string, unknown> {
  const porc: Record<string, unknown> = {}
  porc.principal = config.claimMapping === 'mpe' ? mpeClaims(claims) : standardClaims(claims)
  porc.operation = `mcp:${feature}:${operation}`
  porc.resource = `mrn:mcp:${serverName}:${feature}:${resourceId}`
  const ctx: Record<string, unknown> = {}
  const includeArgs = config.context?.includeArgs ?? false
  const includeOperation = config.context?.includeOperation ?? false
  if (includeArgs || includeOperation) {
    const mcp: Record<string, unknown> = {}
    if (includeOperation) {
      mcp.feature = feature
      mcp.operation = operation
      mcp.resource_id = resourceId
    }
    if (includeArgs && args !== null && Object.keys(args).length > 0) mcp.args = args
    if (Object.keys(mcp).length > 0) ctx.mcp = mcp
  }
  porc.context = ctx
  if (feature === 'tool' && annotations !== null) {
    const mcp = ctx.mcp as Record<string, unknown> | undefined
    if (mcp === undefined) ctx.mcp = { annotations }
    else mcp.annotations = annotations
  }
  return porc
}

/** encoding/json Marshal of the map[string]interface{} values a PORC holds. */
export function goMarshal(value: unknown): string {
  if (value === null || value === undefined) return 'null'
  if (typeof value === 'string') {
    return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
  }
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(goMarshal).join(',')}]`
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
  return `{${entries.map(([k, v]) => `${goMarshal(k)}:${goMarshal(v)}`).join(',')}}`
}

/** url.JoinPath(base, "/decision"), with "?probe=true" added for a probe (Client.Authorize). */
export function decisionUrl(base: string, probe = false): URL {
  const url = new URL(base)
  const path = `${url.pathname.replace(/\/+$/, '')}/decision`
  url.pathname = path.startsWith('/') ? path : `/${path}`
  if (probe) url.search = 'probe=true'
  return url
}

/**
 * The request Client.Authorize sends: POST, the marshalled PORC, Content-Type and Accept set by
 * ToolHive, User-Agent and Accept-Encoding by net/http's transport (Content-Length from the body), and Authorization: Basic from
 * the URL's user information (net/http client.go send). Fetch refuses URLs with credentials, so
 * they move to the header here exactly as Go moves them.
 */
export function toolhiveRequest(config: ToolhiveConfig, porc: Record<string, unknown>, probe = false): Request {
  const url = decisionUrl(config.url, probe)
  const body = goMarshal(porc)
  const headers = new Headers({
    'Content-Type': 'application/json',
    Accept: 'application/json',
    'User-Agent': 'Go-http-client/1.1',
    'Accept-Encoding': 'gzip',
  })
  if (url.username !== '' || url.password !== '') {
    const user = decodeURIComponent(url.username)
    const password = decodeURIComponent(url.password)
    headers.set('Authorization', `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`)
    url.username = ''
    url.password = ''
  }
  return new Request(url, { method: 'POST', headers, body })
}

/** How ToolHive reads the answer: only a 200 whose JSON has allow true lets the request through. */
export async function toolhiveAllows(response: Response): Promise<boolean> {
  const text = await response.text()
  if (response.status !== 200) return false
  try {
    return (JSON.parse(text) as { allow?: unknown }).allow === true
  } catch {
    return false
  }
}
