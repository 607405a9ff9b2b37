// Configuration: read once from the environment at start-up, validated, frozen and passed down.
// Nothing else in the code base reads the environment.
import { readFileSync } from 'node:fs'
import type { Lifecycle, LifecycleEntry } from './domain/lifecycle.ts'

export interface RateLimitRule {
  /** Requests allowed per window. */
  readonly limit: number
  /** Window length in seconds. */
  readonly windowSeconds: number
}

export interface Config {
  readonly port: number
  readonly host: string
  /** postgres://… for PostgreSQL, memory:// for in-memory PGlite, null for PGlite under dataDir. */
  readonly databaseUrl: string | null
  readonly dataDir: string
  /** Public URLs of the three surfaces, without a trailing slash. */
  readonly baseUrl: string
  readonly productApiUrl: string
  readonly appUrl: string
  /** "*" (any origin, no credentials) or an allow-list of exact origins. */
  readonly corsOrigins: '*' | readonly string[]
  /** Peers whose X-Forwarded-For / X-Forwarded-Proto are believed ("*" = any peer). */
  readonly trustProxy: '*' | readonly string[]
  readonly tlsCertFile: string | null
  readonly tlsKeyFile: string | null
  /** Accept plain HTTP from non-loopback peers on the product API (only for isolated networks). */
  readonly allowInsecureHttp: boolean
  readonly bodyLimitBytes: number
  /** The whole request body must arrive within this many milliseconds, or the answer is 408. */
  readonly bodyTimeoutMs: number
  /** The request line and headers must arrive within this many milliseconds (Node; Bun: idle timeout). */
  readonly headersTimeoutMs: number
  /** Open connections accepted at once (Node); the excess is refused with 503 at connect time. */
  readonly maxConnections: number
  /** Open connections accepted at once from one client address (Node; trusted proxies exempt). */
  readonly maxConnectionsPerClient: number
  readonly leadRateLimit: RateLimitRule
  readonly apiRateLimit: RateLimitRule
  readonly loginRateLimit: RateLimitRule
  /** Product API requests per organization, summed over all its credentials (API_ORG_RATE_LIMIT). */
  readonly apiOrgRateLimit: RateLimitRule
  /** Active (not revoked, not expired) API keys per organization (MAX_KEYS_PER_ORG). */
  readonly maxKeysPerOrg: number
  /** Policies per organization (MAX_POLICIES_PER_ORG). */
  readonly maxPoliciesPerOrg: number
  /** Members plus open invitations per organization (MAX_MEMBERS_PER_ORG). */
  readonly maxMembersPerOrg: number
  /** Agents per organization (MAX_AGENTS_PER_ORG), for the agent registry. */
  readonly maxAgentsPerOrg: number
  /** Live sign-in sessions (refresh-token families) per user; a new one past it ends the oldest (MAX_SESSIONS_PER_USER). */
  readonly maxSessionsPerUser: number
  /** Seconds an invitation secret stays valid (INVITATION_TTL). */
  readonly invitationTtlSeconds: number
  /** IPv6 clients are counted per network of this many leading bits by every per-client limit (0–128). */
  readonly rateLimitIpv6Prefix: number
  readonly accessTokenTtlSeconds: number
  readonly refreshTokenTtlSeconds: number
  /** log2 of the scrypt cost N for passwords (OWASP: 17). Lower only for tests. */
  readonly passwordHashCost: number
  /** Password hashes computed at once; the rest wait in a queue served one client at a time. */
  readonly passwordHashConcurrency: number
  /** Password hashes waiting at most, over all clients. */
  readonly passwordHashQueue: number
  /** Password hashes one client (address, or IPv6 network) may have running or waiting. */
  readonly passwordHashPerClient: number
  /** Password hashes one account (email) may have running or waiting, from all clients together. */
  readonly passwordHashPerAccount: number
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent'
  readonly lifecycle: Lifecycle
  readonly contactEmail: string
  /**
   * The organization whose Owners and Admins may read the leads through the product API
   * (LEADS_ORGANIZATION_ID, lower-cased); null: the organization created first.
   */
  readonly leadsOrganizationId: string | null
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Readonly<Record<string, string | undefined>>

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`)
  const value = Number(raw)
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`)
  return value
}

function rateLimit(env: Env, name: string, fallback: RateLimitRule): RateLimitRule {
  const raw = env[name]
  if (raw === undefined || raw === '') return Object.freeze({ ...fallback })
  const match = /^(\d+)\/(\d+)$/.exec(raw.trim())
  if (!match) throw new ConfigError(`${name} must look like "LIMIT/SECONDS" (e.g. "20/60"), got "${raw}"`)
  const limit = Number(match[1])
  const windowSeconds = Number(match[2])
  if (limit < 1 || windowSeconds < 1) throw new ConfigError(`${name} needs a limit and a window of at least 1`)
  return Object.freeze({ limit, windowSeconds })
}

function publicUrl(env: Env, name: string, fallback: string): string {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConfigError(`${name} must be an absolute URL, got "${raw}"`)
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ConfigError(`${name} must be an http(s) URL`)
  if (url.search || url.hash) throw new ConfigError(`${name} must not have a query or fragment (RFC 8414 §2)`)
  return raw.replace(/\/+$/, '')
}

function list(raw: string | undefined): string[] {
  return (raw ?? '').split(',').map((item) => item.trim()).filter((item) => item !== '')
}

function date(value: unknown, where: string): Date {
  if (typeof value !== 'string' && typeof value !== 'number') throw new ConfigError(`${where} must be an ISO date`)
  const parsed = new Date(value)
  if (Number.isNaN(parsed.getTime())) throw new ConfigError(`${where} is not a valid date: ${String(value)}`)
  return parsed
}

function optionalString(value: unknown, where: string): string | null {
  if (value === undefined || value === null) return null
  if (typeof value !== 'string' || value === '') throw new ConfigError(`${where} must be a non-empty string`)
  return value
}

function lifecycleEntry(raw: unknown, where: string): LifecycleEntry {
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(`${where} must be an object`)
  const entry = raw as Record<string, unknown>
  const deprecation = date(entry.deprecation, `${where}.deprecation`)
  const sunset = entry.sunset === undefined || entry.sunset === null ? null : date(entry.sunset, `${where}.sunset`)
  // RFC 8594 §3 / RFC 9745 §3: a sunset before its deprecation is a configuration error.
  if (sunset && sunset.getTime() < deprecation.getTime()) {
    throw new ConfigError(`${where}: sunset (${sunset.toISOString()}) precedes deprecation (${deprecation.toISOString()})`)
  }
  return Object.freeze({
    deprecation,
    sunset,
    deprecationLink: optionalString(entry.deprecationLink, `${where}.deprecationLink`),
    sunsetLink: optionalString(entry.sunsetLink, `${where}.sunsetLink`),
    replacement: optionalString(entry.replacement, `${where}.replacement`),
  })
}

export function parseLifecycle(raw: unknown): Lifecycle {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError('lifecycle must be a JSON object')
  const source = raw as Record<string, unknown>
  const section = (name: 'routes' | 'versions'): Record<string, LifecycleEntry> => {
    const value = source[name] ?? {}
    if (typeof value !== 'object' || value === null) throw new ConfigError(`lifecycle.${name} must be an object`)
    const out: Record<string, LifecycleEntry> = Object.create(null)
    for (const [key, entry] of Object.entries(value)) out[key] = lifecycleEntry(entry, `lifecycle.${name}["${key}"]`)
    return Object.freeze(out)
  }
  return Object.freeze({ routes: section('routes'), versions: section('versions') })
}

/** The shipped lifecycle: the legacy /waitlist alias is deprecated in favour of /newsletter. */
export function defaultLifecycle(appUrl: string): unknown {
  return {
    routes: {
      '/waitlist': {
        deprecation: '2025-12-31T23:59:59Z',
        sunset: '2027-01-31T23:59:59Z',
        deprecationLink: `${appUrl}/openapi.json`,
        sunsetLink: `${appUrl}/openapi.json`,
        replacement: '/newsletter',
      },
    },
    versions: {},
  }
}

function readLifecycle(env: Env, appUrl: string): Lifecycle {
  if (env.LIFECYCLE && env.LIFECYCLE_FILE) throw new ConfigError('set LIFECYCLE or LIFECYCLE_FILE, not both')
  let raw: unknown = defaultLifecycle(appUrl)
  const text = env.LIFECYCLE_FILE ? readText(env.LIFECYCLE_FILE, 'LIFECYCLE_FILE') : env.LIFECYCLE
  if (text) {
    try {
      raw = JSON.parse(text)
    } catch {
      throw new ConfigError('the lifecycle configuration is not valid JSON')
    }
  }
  return parseLifecycle(raw)
}

function readText(path: string, name: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`)
  }
}

function leadsOrganization(value: string | undefined): string | null {
  if (!value) return null
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) {
    throw new ConfigError(`LEADS_ORGANIZATION_ID must be an organization id (a UUID), got "${value.slice(0, 64)}"`)
  }
  return value.toLowerCase()
}

const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const

export function loadConfig(env: Env = {}): Config {
  const port = integer(env, 'PORT', 8080, 0, 65535)
  const host = env.HOST || '0.0.0.0'
  const tlsCertFile = env.TLS_CERT_FILE || null
  const tlsKeyFile = env.TLS_KEY_FILE || null
  if ((tlsCertFile === null) !== (tlsKeyFile === null)) throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE go together')
  const ownOrigin = `${tlsCertFile ? 'https' : 'http'}://localhost:${port}`
  const appUrl = publicUrl(env, 'APP_URL', ownOrigin)

  const databaseUrl = env.DATABASE_URL || null
  if (databaseUrl && !/^(postgres(ql)?|memory):\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres://, postgresql:// or memory://')
  }

  const cors = list(env.CORS_ORIGINS)
  for (const origin of cors) {
    if (origin !== '*' && !/^https?:\/\/[^/]+$/.test(origin)) {
      throw new ConfigError(`CORS_ORIGINS entries must be origins like https://example.com, got "${origin}"`)
    }
  }
  const trust = list(env.TRUST_PROXY)

  const logLevel = (env.LOG_LEVEL || 'info') as Config['logLevel']
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`)

  const config: Config = {
    port,
    host,
    databaseUrl,
    dataDir: env.DATA_DIR || './data',
    baseUrl: publicUrl(env, 'BASE_URL', ownOrigin),
    productApiUrl: publicUrl(env, 'PRODUCT_API_URL', ownOrigin),
    appUrl,
    corsOrigins: cors.length === 0 || cors.includes('*') ? '*' : Object.freeze(cors),
    trustProxy: trust.includes('*') || trust.includes('true') ? '*' : Object.freeze(trust),
    tlsCertFile,
    tlsKeyFile,
    allowInsecureHttp: env.ALLOW_INSECURE_HTTP === 'true',
    bodyLimitBytes: integer(env, 'BODY_LIMIT_BYTES', 16 * 1024, 1024, 1024 * 1024),
    bodyTimeoutMs: integer(env, 'BODY_TIMEOUT_MS', 10_000, 100, 600_000),
    headersTimeoutMs: integer(env, 'HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
    maxConnections: integer(env, 'MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    maxConnectionsPerClient: integer(env, 'MAX_CONNECTIONS_PER_CLIENT', 256, 1, 1_000_000),
    leadRateLimit: rateLimit(env, 'LEAD_RATE_LIMIT', { limit: 20, windowSeconds: 60 }),
    apiRateLimit: rateLimit(env, 'API_RATE_LIMIT', { limit: 600, windowSeconds: 60 }),
    loginRateLimit: rateLimit(env, 'LOGIN_RATE_LIMIT', { limit: 10, windowSeconds: 300 }),
    apiOrgRateLimit: rateLimit(env, 'API_ORG_RATE_LIMIT', { limit: 6000, windowSeconds: 60 }),
    maxKeysPerOrg: integer(env, 'MAX_KEYS_PER_ORG', 100, 1, 1_000_000),
    maxPoliciesPerOrg: integer(env, 'MAX_POLICIES_PER_ORG', 1000, 1, 1_000_000),
    maxMembersPerOrg: integer(env, 'MAX_MEMBERS_PER_ORG', 1000, 1, 1_000_000),
    maxAgentsPerOrg: integer(env, 'MAX_AGENTS_PER_ORG', 1000, 1, 1_000_000),
    maxSessionsPerUser: integer(env, 'MAX_SESSIONS_PER_USER', 20, 1, 10_000),
    invitationTtlSeconds: integer(env, 'INVITATION_TTL', 7 * 86_400, 300, 90 * 86_400),
    rateLimitIpv6Prefix: integer(env, 'RATE_LIMIT_IPV6_PREFIX', 64, 0, 128),
    accessTokenTtlSeconds: integer(env, 'ACCESS_TOKEN_TTL', 900, 60, 86_400),
    refreshTokenTtlSeconds: integer(env, 'REFRESH_TOKEN_TTL', 30 * 86_400, 300, 365 * 86_400),
    passwordHashCost: integer(env, 'PASSWORD_HASH_COST', 17, 10, 20),
    passwordHashConcurrency: integer(env, 'PASSWORD_HASH_CONCURRENCY', 2, 1, 64),
    passwordHashQueue: integer(env, 'PASSWORD_HASH_QUEUE', 64, 1, 10_000),
    passwordHashPerClient: integer(env, 'PASSWORD_HASH_PER_CLIENT', 4, 1, 10_000),
    passwordHashPerAccount: integer(env, 'PASSWORD_HASH_PER_ACCOUNT', 4, 1, 10_000),
    logLevel,
    lifecycle: readLifecycle(env, appUrl),
    contactEmail: env.CONTACT_EMAIL || 'security@example.com',
    leadsOrganizationId: leadsOrganization(env.LEADS_ORGANIZATION_ID),
  }
  return Object.freeze(config)
}
