// Deprecation (RFC 9745) and Sunset (RFC 8594) headers from the one lifecycle configuration,
// per route path and per API version (docs/api.md). The configuration is JSON, in LIFECYCLE or the
// file named by LIFECYCLE_FILE (config.ts parses it and refuses a sunset before its deprecation):
//
//   {"routes":   {"/waitlist": {"deprecation": "2025-12-31T23:59:59Z", "sunset": "2027-01-31T23:59:59Z",
//                              "deprecationLink": "https://app.example.com/openapi.json",
//                              "sunsetLink": "https://app.example.com/openapi.json", "replacement": "/newsletter"}},
//    "versions": {"v1": {"deprecation": "2027-06-01T00:00:00Z", "sunset": "2027-09-01T00:00:00Z"}}}
//
// A route answers 410 from its sunset on. A version only adds headers to requests whose
// Service-Api-Version names it (v1, 1, 1.0.0 → v1): the header is informational (docs/api.md).
import type { Lifecycle, LifecycleEntry } from '../domain/lifecycle.ts'

export function lifecycleHeaders(entry: LifecycleEntry): Record<string, string> {
  // RFC 9745 §2.1: a structured-field Date, "@" + seconds since the epoch.
  const headers: Record<string, string> = { Deprecation: `@${Math.floor(entry.deprecation.getTime() / 1000)}` }
  // RFC 8594 §3: an HTTP-date (IMF-fixdate), which toUTCString() produces.
  if (entry.sunset) headers.Sunset = entry.sunset.toUTCString()
  const links: string[] = []
  // RFC 9745 §3 and RFC 8594 §6: link relations pointing to human documentation.
  if (entry.deprecationLink) links.push(`<${entry.deprecationLink}>; rel="deprecation"`)
  if (entry.sunsetLink) links.push(`<${entry.sunsetLink}>; rel="sunset"`)
  if (links.length > 0) headers.Link = links.join(', ')
  return headers
}

export function isSunset(entry: LifecycleEntry, now: number): boolean {
  return entry.sunset !== null && now >= entry.sunset.getTime()
}

const SEMVER_OR_ALIAS = /^v?(\d+)(?:\.\d+){0,2}(?:[-+][0-9A-Za-z.+-]*)?$/i

/**
 * The major alias a Service-Api-Version value names: "v1", "V1", "1", "1.0" and "1.0.0" → "v1"
 * (docs/api.md: a semantic version or a major alias). null for anything else, which is accepted
 * and changes nothing.
 */
export function versionAlias(value: string | null): string | null {
  if (value === null) return null
  const match = SEMVER_OR_ALIAS.exec(value.trim())
  return match ? `v${Number(match[1])}` : null
}

/**
 * Headers for the version a request names, computed once per configured version. The header
 * stays informational: a deprecated or even sunset version is still served, only announced.
 * With no version configured, the request's header is not even read (this runs on every routed
 * request).
 */
export function createVersionLifecycle(lifecycle: Lifecycle): (request: Request) => Record<string, string> | null {
  const byAlias = new Map<string, Record<string, string>>()
  for (const [key, entry] of Object.entries(lifecycle.versions)) {
    const alias = versionAlias(key) ?? key
    byAlias.set(alias, Object.freeze(lifecycleHeaders(entry)))
  }
  if (byAlias.size === 0) return () => null
  return (request) => {
    const alias = versionAlias(request.headers.get('service-api-version'))
    return (alias && byAlias.get(alias)) || null
  }
}
