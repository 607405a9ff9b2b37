// Benchmark baseline, not product code: the work the Fastify reference does on the refusals the
// pipeline rows measure, and the answers Steward gives, for the bare fetch function
// (bare-fetch.ts), so that it does exactly the Fastify reference's work.
import { MAX_EMAIL_LENGTH } from '../../domain/email.ts'
import { BEARER } from '../../services/credentials.ts'
import { FIELD_LIMITS } from '../../routes/leads.ts'
import { secretKind } from '../../auth/secrets.ts'

export const EXPOSED = 'Retry-After, Deprecation, Sunset, Link, Location, RateLimit, RateLimit-Policy, X-Request-Id'
export const CSP = "default-src 'none'; frame-ancestors 'none'"
export const UNAUTHORIZED = JSON.stringify({ status: 'Unauthorized', error: 'Invalid or expired token' })
export const MISSING = JSON.stringify({ error: 'Missing required fields' })
const REQUIRED = ['first_name', 'last_name', 'email', 'company', 'linkedin'] as const
const LIMITS: Record<string, number> = { ...FIELD_LIMITS, email: MAX_EMAIL_LENGTH }

/** The Fastify reference's body schema: an object with the five fields as strings within their limits. */
export function leadIsValid(text: string): boolean {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return false
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false
  const record = body as Record<string, unknown>
  for (const name of REQUIRED) if (typeof record[name] !== 'string') return false
  for (const name in record) {
    const value = record[name]
    if (name in LIMITS && (typeof value !== 'string' || value.length > LIMITS[name]!)) return false
  }
  return true
}

/** The Fastify reference's key check: a Bearer token of the key format, checksum included. */
export function keyIsWellFormed(authorization: string | null | undefined): boolean {
  const token = BEARER.exec(authorization ?? '')?.[1]
  return token !== undefined && secretKind(token) === 'key'
}
