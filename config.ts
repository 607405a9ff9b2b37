// Configuration: read once from the environment at start-up, validated, frozen and passed down.
// Nothing else in the code base reads the environment. Every setting is a valibot schema over its
// environment variable (an empty value counts as unset); `Config` is the type those schemas give.
import { readFileSync } from 'node:fs'
import * as v from 'valibot'
import { isPostgresUrl } from './domain/database-url.ts'
import type { Lifecycle } from './domain/lifecycle.ts'
import { defaultLifecycle, readLifecycleJson } from './domain/lifecycle-json.ts'

export class ConfigError extends Error {
  override name = 'ConfigError'
}

type Env = Readonly<Record<string, string | undefined>>

/** A whole number in [min, max]; unset: `fallback`. */
function integer(name: string, fallback: number, min: number, max: number) {
  const range = (issue: v.BaseIssue<unknown>) => `${name} must be between ${min} and ${max}, got ${String(issue.input)}`
  return v.optional(
    v.pipe(v.string(), v.regex(/^\d+$/, (issue) => `${name} must be a whole number, got "${String(issue.input)}"`), v.transform(Number), v.minValue(min, range), v.maxValue(max, range)),
    String(fallback),
  )
}

export interface RateLimitRule {
  /** Requests allowed per window. */
  readonly limit: number
  /** Window length in seconds. */
  readonly windowSeconds: number
}

/** "LIMIT/SECONDS", both at least 1. */
function rateLimit(name: string, fallback: string) {
  return v.optional(
    v.pipe(
      v.string(),
      v.regex(/^\s*\d+\/\d+\s*$/, (issue) => `${name} must look like "LIMIT/SECONDS" (e.g. "20/60"), got "${String(issue.input)}"`),
      v.transform((text): RateLimitRule => {
        const [limit, windowSeconds] = text.trim().split('/').map(Number) as [number, number]
        return Object.freeze({ limit, windowSeconds })
      }),
      v.check((rule) => rule.limit >= 1 && rule.windowSeconds >= 1, `${name} needs a limit and a window of at least 1`),
    ),
    fallback,
  )
}

/** An absolute http(s) URL without query or fragment, trailing slashes dropped; unset: derived later. */
function publicUrl(name: string) {
  return v.optional(
    v.pipe(
      v.string(),
      v.check((raw) => URL.canParse(raw), (issue) => `${name} must be an absolute URL, got "${String(issue.input)}"`),
      v.check((raw) => !URL.canParse(raw) || ['http:', 'https:'].includes(new URL(raw).protocol), `${name} must be an http(s) URL`),
      v.check((raw) => !URL.canParse(raw) || (!new URL(raw).search && !new URL(raw).hash), `${name} must not have a query or fragment (RFC 8414 §2)`),
      v.transform((raw) => raw.replace(/\/+$/, '')),
    ),
  )
}

/** A comma-separated list, blanks dropped, each item checked by `item`. */
function list<S extends v.GenericSchema<string, string>>(item: S) {
  return v.optional(
    v.pipe(
      v.string(),
      v.transform((raw) => raw.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')),
      v.array(item),
    ),
    '',
  )
}

const ORIGIN = /^https?:\/\/[^/]+$/

/** SECRETS_KEY: 32 bytes in base64url (43 characters; standard base64 and one `=` of padding accepted). */
const SECRETS_KEY_SHAPE = /^[A-Za-z0-9+/_-]{43}=?$/
const SECRETS_KEY_MESSAGE = 'SECRETS_KEY must be 32 random bytes in base64url (43 characters), e.g. from: openssl rand -base64 32'
const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const
const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const

/** The environment variables, each as its schema gives it. */
const EnvSchema = v.object({
  PORT: integer('PORT', 8080, 0, 65535),
  HOST: v.optional(v.string(), '0.0.0.0'),
  DATABASE_URL: v.nullish(
    v.pipe(v.string(), v.check((url) => url.startsWith('memory://') || isPostgresUrl(url), 'DATABASE_URL must start with postgres://, postgresql:// or memory://')),
    null,
  ),
  DATA_DIR: v.optional(v.string(), './data'),
  BASE_URL: publicUrl('BASE_URL'),
  PRODUCT_API_URL: publicUrl('PRODUCT_API_URL'),
  APP_URL: publicUrl('APP_URL'),
  CORS_ORIGINS: list(v.pipe(v.string(), v.check((origin) => origin === '*' || ORIGIN.test(origin), (issue) => `CORS_ORIGINS entries must be origins like https://example.com, got "${String(issue.input)}"`))),
  TRUST_PROXY: list(v.string()),
  TLS_CERT_FILE: v.nullish(v.string(), null),
  TLS_KEY_FILE: v.nullish(v.string(), null),
  ALLOW_INSECURE_HTTP: v.optional(v.pipe(v.string(), v.transform((text) => text === 'true')), 'false'),
  WEBHOOK_ALLOW_PRIVATE: v.optional(v.pipe(v.string(), v.transform((text) => text === 'true')), 'false'),
  MCP_ALLOW_PRIVATE: v.optional(v.pipe(v.string(), v.transform((text) => text === 'true')), 'false'),
  CAPTCHA_ALLOW_PRIVATE: v.optional(v.pipe(v.string(), v.transform((text) => text === 'true')), 'false'),
  CAPTCHA_VERIFY_TIMEOUT_MS: integer('CAPTCHA_VERIFY_TIMEOUT_MS', 5000, 100, 60_000),
  LEAD_SPAM_RETENTION_DAYS: integer('LEAD_SPAM_RETENTION_DAYS', 30, 1, 3650),
  // The key is never echoed in a message: a mistyped one is still mostly the real one.
  SECRETS_KEY: v.optional(v.pipe(v.string(), v.check((text) => SECRETS_KEY_SHAPE.test(text.trim()), SECRETS_KEY_MESSAGE), v.transform((text) => text.trim()))),
  MCP_UPSTREAM_TIMEOUT_MS: integer('MCP_UPSTREAM_TIMEOUT_MS', 30_000, 100, 600_000),
  // The bearer token that GET /metrics requires; unset: no /metrics at all. Never echoed.
  METRICS_TOKEN: v.optional(v.pipe(v.string(), v.check((text) => /^[\x21-\x7e]{32,256}$/.test(text), 'METRICS_TOKEN must be 32 to 256 visible ASCII characters, e.g. from: openssl rand -hex 32'))),
  OTEL_EXPORTER_OTLP_ENDPOINT: publicUrl('OTEL_EXPORTER_OTLP_ENDPOINT'),
  // OpenTelemetry's own variables, read here so that a mistyped one stops the start with a reason.
  OTEL_EXPORTER_OTLP_PROTOCOL: v.optional(v.picklist(['http/protobuf'], 'OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf, the one OTLP encoding Steward sends'), 'http/protobuf'),
  OTEL_TRACES_SAMPLER: v.optional(v.picklist(SAMPLERS, `OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}`), 'parentbased_always_on'),
  OTEL_TRACES_SAMPLER_ARG: v.optional(v.pipe(v.string(), v.check((text) => /^(0(\.\d+)?|1(\.0+)?|\.\d+)$/.test(text.trim()), 'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, e.g. 0.1'), v.transform(Number)), '1'),
  OTEL_SERVICE_NAME: v.optional(v.pipe(v.string(), v.regex(/^[\w.-]{1,100}$/, 'OTEL_SERVICE_NAME must be 1 to 100 letters, digits, dots, dashes or underscores')), 'steward'),
  MCP_APPROVAL_HOLD_SECONDS: integer('MCP_APPROVAL_HOLD_SECONDS', 50, 0, 3600),
  MCP_ALLOWED_ORIGINS: list(v.pipe(v.string(), v.check((origin) => ORIGIN.test(origin), (issue) => `MCP_ALLOWED_ORIGINS entries must be origins like https://example.com, got "${String(issue.input)}"`))),
  BODY_LIMIT_BYTES: integer('BODY_LIMIT_BYTES', 16 * 1024, 1024, 1024 * 1024),
  BODY_TIMEOUT_MS: integer('BODY_TIMEOUT_MS', 10_000, 100, 600_000),
  HEADERS_TIMEOUT_MS: integer('HEADERS_TIMEOUT_MS', 10_000, 100, 600_000),
  MAX_CONNECTIONS: integer('MAX_CONNECTIONS', 10_000, 1, 1_000_000),
  MAX_CONNECTIONS_PER_CLIENT: integer('MAX_CONNECTIONS_PER_CLIENT', 256, 1, 1_000_000),
  LEAD_RATE_LIMIT: rateLimit('LEAD_RATE_LIMIT', '20/60'),
  API_RATE_LIMIT: rateLimit('API_RATE_LIMIT', '600/60'),
  LOGIN_RATE_LIMIT: rateLimit('LOGIN_RATE_LIMIT', '10/300'),
  API_ORG_RATE_LIMIT: rateLimit('API_ORG_RATE_LIMIT', '6000/60'),
  MAX_KEYS_PER_ORG: integer('MAX_KEYS_PER_ORG', 100, 1, 1_000_000),
  MAX_POLICIES_PER_ORG: integer('MAX_POLICIES_PER_ORG', 1000, 1, 1_000_000),
  MAX_MEMBERS_PER_ORG: integer('MAX_MEMBERS_PER_ORG', 1000, 1, 1_000_000),
  MAX_AGENTS_PER_ORG: integer('MAX_AGENTS_PER_ORG', 1000, 1, 1_000_000),
  MAX_MCP_SERVERS_PER_ORG: integer('MAX_MCP_SERVERS_PER_ORG', 50, 1, 1_000_000),
  MAX_SESSIONS_PER_USER: integer('MAX_SESSIONS_PER_USER', 20, 1, 10_000),
  AUDIT_SEAL_INTERVAL_MS: integer('AUDIT_SEAL_INTERVAL_MS', 500, 100, 3_600_000),
  INVITATION_TTL: integer('INVITATION_TTL', 7 * 86_400, 300, 90 * 86_400),
  RATE_LIMIT_IPV6_PREFIX: integer('RATE_LIMIT_IPV6_PREFIX', 64, 0, 128),
  ACCESS_TOKEN_TTL: integer('ACCESS_TOKEN_TTL', 900, 60, 86_400),
  REFRESH_TOKEN_TTL: integer('REFRESH_TOKEN_TTL', 30 * 86_400, 300, 365 * 86_400),
  PASSWORD_HASH_COST: integer('PASSWORD_HASH_COST', 17, 10, 20),
  PASSWORD_HASH_CONCURRENCY: integer('PASSWORD_HASH_CONCURRENCY', 2, 1, 64),
  PASSWORD_HASH_QUEUE: integer('PASSWORD_HASH_QUEUE', 64, 1, 10_000),
  PASSWORD_HASH_PER_CLIENT: integer('PASSWORD_HASH_PER_CLIENT', 4, 1, 10_000),
  PASSWORD_HASH_PER_ACCOUNT: integer('PASSWORD_HASH_PER_ACCOUNT', 4, 1, 10_000),
  LOG_LEVEL: v.optional(v.picklist(LOG_LEVELS, `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`), 'info'),
  LIFECYCLE: v.optional(v.string()),
  LIFECYCLE_FILE: v.optional(v.string()),
  CONTACT_EMAIL: v.optional(v.string(), 'security@example.com'),
  // Lead mail (docs/leads.md). SMTP_URL, or SMTP_HOST with the parts; neither: no mail is sent.
  SMTP_URL: v.optional(v.pipe(v.string(), v.check((raw) => URL.canParse(raw) && ['smtp:', 'smtps:'].includes(new URL(raw).protocol), 'SMTP_URL must look like smtp://user:password@host:587 or smtps://host:465'))),
  SMTP_HOST: v.optional(v.string()),
  SMTP_PORT: v.optional(v.pipe(v.string(), v.regex(/^\d+$/, 'SMTP_PORT must be a whole number'), v.transform(Number), v.minValue(1, 'SMTP_PORT must be between 1 and 65535'), v.maxValue(65535, 'SMTP_PORT must be between 1 and 65535'))),
  SMTP_SECURE: v.optional(v.picklist(['true', 'false'], 'SMTP_SECURE must be true or false')),
  SMTP_USER: v.optional(v.string()),
  SMTP_PASSWORD: v.optional(v.string()),
  SMTP_FROM: v.optional(v.string()),
  SMTP_REQUIRE_TLS: v.optional(v.pipe(v.string(), v.transform((text) => text === 'true')), 'false'),
  SMTP_TLS_REJECT_UNAUTHORIZED: v.optional(v.pipe(v.string(), v.transform((text) => text !== 'false')), 'true'),
  SMTP_TLS_SERVERNAME: v.optional(v.string()),
  SMTP_TLS_CA_FILE: v.optional(v.string()),
  SMTP_TIMEOUT_MS: integer('SMTP_TIMEOUT_MS', 30_000, 100, 600_000),
  LEAD_MAIL_POLL_MS: integer('LEAD_MAIL_POLL_MS', 5_000, 10, 3_600_000),
  LEADS_ORGANIZATION_ID: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, (issue) => `LEADS_ORGANIZATION_ID must be an organization id (a UUID), got "${String(issue.input).slice(0, 64)}"`),
      v.toLowerCase(),
    ),
  ),
})

type Settings = v.InferOutput<typeof EnvSchema>

/** The configuration: what the settings give, with the defaults that depend on other settings. */
function toConfig(env: Settings) {
  if ((env.TLS_CERT_FILE === null) !== (env.TLS_KEY_FILE === null)) throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE go together')
  const ownOrigin = `${env.TLS_CERT_FILE ? 'https' : 'http'}://localhost:${env.PORT}`
  const appUrl = env.APP_URL ?? ownOrigin
  return {
    port: env.PORT,
    host: env.HOST,
    /** postgres://… for PostgreSQL, memory:// for in-memory PGlite, null for PGlite under dataDir. */
    databaseUrl: env.DATABASE_URL,
    dataDir: env.DATA_DIR,
    /** Public URLs of the three surfaces, without a trailing slash. */
    baseUrl: env.BASE_URL ?? ownOrigin,
    productApiUrl: env.PRODUCT_API_URL ?? ownOrigin,
    appUrl,
    /** "*" (any origin, no credentials) or an allow-list of exact origins. */
    corsOrigins: env.CORS_ORIGINS.length === 0 || env.CORS_ORIGINS.includes('*') ? ('*' as const) : (Object.freeze(env.CORS_ORIGINS) as readonly string[]),
    /** Peers whose X-Forwarded-For / X-Forwarded-Proto are believed ("*" = any peer). */
    trustProxy: env.TRUST_PROXY.includes('*') || env.TRUST_PROXY.includes('true') ? ('*' as const) : (Object.freeze(env.TRUST_PROXY) as readonly string[]),
    tlsCertFile: env.TLS_CERT_FILE,
    tlsKeyFile: env.TLS_KEY_FILE,
    /** Accept plain HTTP from non-loopback peers on the product API (only for isolated networks). */
    allowInsecureHttp: env.ALLOW_INSECURE_HTTP,
    /** Webhooks may target private, loopback and other internal addresses, and plain http URLs. */
    webhookAllowPrivate: env.WEBHOOK_ALLOW_PRIVATE,
    /** Upstream MCP servers may be private, loopback and other internal addresses, and plain http URLs. */
    mcpAllowPrivate: env.MCP_ALLOW_PRIVATE,
    /** A CAPTCHA verify URL may be plain http or a private, loopback or other internal address (tests' stubs). */
    captchaAllowPrivate: env.CAPTCHA_ALLOW_PRIVATE,
    /** The CAPTCHA provider must answer within this many milliseconds, or it counts as down (the list's fail mode applies). */
    captchaVerifyTimeoutMs: env.CAPTCHA_VERIFY_TIMEOUT_MS,
    /** Days a submission kept as spam is held before the purge deletes it, unless its list sets its own. */
    leadSpamRetentionDays: env.LEAD_SPAM_RETENTION_DAYS,
    /**
     * The key (base64url of 32 bytes) that seals secrets at rest and signs the MCP gateway's
     * request state; null: a key file in DATA_DIR, a per-process key in memory, none on PostgreSQL
     * (services/secrets.ts).
     */
    secretsKey: env.SECRETS_KEY ?? null,
    /** An upstream MCP server must answer within this many milliseconds, or the call is a tool error. */
    mcpUpstreamTimeoutMs: env.MCP_UPSTREAM_TIMEOUT_MS,
    /** The bearer token GET /metrics requires (docs/observability.md); null: metrics off, no /metrics. */
    metricsToken: env.METRICS_TOKEN ?? null,
    /** The OTLP/HTTP collector's base URL (spans go to <it>/v1/traces); null: tracing off, nothing loaded. */
    otelEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT ?? null,
    /** The service.name of the spans; the sampler and its ratio (services/tracing.ts). */
    otelServiceName: env.OTEL_SERVICE_NAME,
    otelSampler: env.OTEL_TRACES_SAMPLER,
    otelSamplerRatio: env.OTEL_TRACES_SAMPLER_ARG,
    /** How long the gateway holds a 2025-era client's call while its approval is pending. */
    mcpApprovalHoldSeconds: env.MCP_APPROVAL_HOLD_SECONDS,
    /** Browser origins, besides the server's own, that may call the MCP gateway (others: 403). */
    mcpAllowedOrigins: Object.freeze(env.MCP_ALLOWED_ORIGINS) as readonly string[],
    bodyLimitBytes: env.BODY_LIMIT_BYTES,
    /** The whole request body must arrive within this many milliseconds, or the answer is 408. */
    bodyTimeoutMs: env.BODY_TIMEOUT_MS,
    /** The request line and headers must arrive within this many milliseconds (Node; Bun: idle timeout). */
    headersTimeoutMs: env.HEADERS_TIMEOUT_MS,
    /** Open connections accepted at once (Node); the excess is refused with 503 at connect time. */
    maxConnections: env.MAX_CONNECTIONS,
    /** Open connections accepted at once from one client address (Node; trusted proxies exempt). */
    maxConnectionsPerClient: env.MAX_CONNECTIONS_PER_CLIENT,
    leadRateLimit: env.LEAD_RATE_LIMIT,
    apiRateLimit: env.API_RATE_LIMIT,
    loginRateLimit: env.LOGIN_RATE_LIMIT,
    /** Product API requests per organization, summed over all its credentials. */
    apiOrgRateLimit: env.API_ORG_RATE_LIMIT,
    /** Active (not revoked, not expired) API keys per organization. */
    maxKeysPerOrg: env.MAX_KEYS_PER_ORG,
    maxPoliciesPerOrg: env.MAX_POLICIES_PER_ORG,
    /** Members plus open invitations per organization. */
    maxMembersPerOrg: env.MAX_MEMBERS_PER_ORG,
    maxAgentsPerOrg: env.MAX_AGENTS_PER_ORG,
    maxMcpServersPerOrg: env.MAX_MCP_SERVERS_PER_ORG,
    /** Live sign-in sessions (refresh-token families) per user; a new one past it ends the oldest. */
    maxSessionsPerUser: env.MAX_SESSIONS_PER_USER,
    /** How often the background sealer seals new audit events and decisions (storage/audit-seal.ts). */
    auditSealIntervalMs: env.AUDIT_SEAL_INTERVAL_MS,
    invitationTtlSeconds: env.INVITATION_TTL,
    /** IPv6 clients are counted per network of this many leading bits by every per-client limit. */
    rateLimitIpv6Prefix: env.RATE_LIMIT_IPV6_PREFIX,
    accessTokenTtlSeconds: env.ACCESS_TOKEN_TTL,
    refreshTokenTtlSeconds: env.REFRESH_TOKEN_TTL,
    /** log2 of the scrypt cost N for passwords (OWASP: 17). Lower only for tests. */
    passwordHashCost: env.PASSWORD_HASH_COST,
    passwordHashConcurrency: env.PASSWORD_HASH_CONCURRENCY,
    passwordHashQueue: env.PASSWORD_HASH_QUEUE,
    passwordHashPerClient: env.PASSWORD_HASH_PER_CLIENT,
    passwordHashPerAccount: env.PASSWORD_HASH_PER_ACCOUNT,
    logLevel: env.LOG_LEVEL,
    lifecycle: readLifecycle(env, appUrl),
    contactEmail: env.CONTACT_EMAIL,
    /**
     * The organization whose Owners and Admins may read the leads through the product API
     * (LEADS_ORGANIZATION_ID, lower-cased); null: the organization created first.
     */
    leadsOrganizationId: env.LEADS_ORGANIZATION_ID ?? null,
    /** How lead mail leaves (docs/leads.md); null: no SMTP server configured, no mail. */
    smtp: readSmtp(env),
    /** How often the lead-mail job looks for due mail and expired confirmations. */
    leadMailPollMs: env.LEAD_MAIL_POLL_MS,
  }
}

export interface SmtpSettings {
  readonly host: string
  readonly port: number
  /** Implicit TLS from the first byte (port 465); false: plain, upgraded by STARTTLS when offered. */
  readonly secure: boolean
  readonly user: string | null
  readonly password: string | null
  /** The From address of every lead mail. */
  readonly from: string
  /** Refuse to send unless the connection is upgraded by STARTTLS. */
  readonly requireTls: boolean
  readonly tlsRejectUnauthorized: boolean
  readonly tlsServername: string | null
  /** PEM certificates trusted besides the system's (a private CA), read at start; null: the system's only. */
  readonly tlsCa: string | null
  readonly timeoutMs: number
}

/** SMTP_URL or SMTP_HOST and the parts (the URL wins for what it gives); SMTP_FROM is then required. */
function readSmtp(env: Settings): SmtpSettings | null {
  if (env.SMTP_URL === undefined && env.SMTP_HOST === undefined) return null
  const url = env.SMTP_URL === undefined ? null : new URL(env.SMTP_URL)
  const secure = env.SMTP_SECURE !== undefined ? env.SMTP_SECURE === 'true' : url ? url.protocol === 'smtps:' : env.SMTP_PORT === 465
  const port = url?.port ? Number(url.port) : (env.SMTP_PORT ?? (secure ? 465 : 587))
  const from = env.SMTP_FROM ?? null
  if (from === null) throw new ConfigError('SMTP_FROM is required with SMTP_URL or SMTP_HOST (the From address of lead mail)')
  return Object.freeze({
    host: url ? url.hostname.replace(/^\[|\]$/g, '') : env.SMTP_HOST!,
    port,
    secure,
    user: url?.username ? decodeURIComponent(url.username) : (env.SMTP_USER ?? null),
    password: url?.password ? decodeURIComponent(url.password) : (env.SMTP_PASSWORD ?? null),
    from,
    requireTls: env.SMTP_REQUIRE_TLS,
    tlsRejectUnauthorized: env.SMTP_TLS_REJECT_UNAUTHORIZED,
    tlsServername: env.SMTP_TLS_SERVERNAME ?? null,
    tlsCa: env.SMTP_TLS_CA_FILE ? readText(env.SMTP_TLS_CA_FILE, 'SMTP_TLS_CA_FILE') : null,
    timeoutMs: env.SMTP_TIMEOUT_MS,
  })
}

/** The configuration, as the schemas above give it. */
export type Config = Readonly<ReturnType<typeof toConfig>>

/** Parses the lifecycle JSON (docs/api.md, versioning and lifecycle); a problem names where it is. */
export function parseLifecycle(raw: unknown): Lifecycle {
  const parsed = readLifecycleJson(raw)
  if ('problem' in parsed) throw new ConfigError(parsed.problem)
  return parsed.lifecycle
}

function readLifecycle(env: Settings, appUrl: string): Lifecycle {
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

/** Reads and validates the configuration from `env` (unset or empty: the default). */
export function loadConfig(env: Env = {}): Config {
  const given: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (value !== undefined && value !== '') given[name] = value
  const result = v.safeParse(EnvSchema, given)
  if (!result.success) throw new ConfigError(result.issues[0].message)
  return Object.freeze(toConfig(result.output))
}
