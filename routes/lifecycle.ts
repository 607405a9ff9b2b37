// Deprecation (RFC 9745) and Sunset (RFC 8594) headers from the one lifecycle configuration.
import type { LifecycleEntry } from '../config.ts'

export function lifecycleHeaders(entry: LifecycleEntry): Record<string, string> {
  // RFC 9745 §2.1: a structured-field Date, "@" + seconds since the epoch.
  const headers: Record<string, string> = { Deprecation: `@${Math.floor(entry.deprecation.getTime() / 1000)}` }
  // RFC 8594 §3: an HTTP-date (IMF-fixdate), which toUTCString() produces.
  if (entry.sunset) headers.Sunset = entry.sunset.toUTCString()
  const links: string[] = []
  if (entry.deprecationLink) links.push(`<${entry.deprecationLink}>; rel="deprecation"`)
  if (entry.sunsetLink) links.push(`<${entry.sunsetLink}>; rel="sunset"`)
  if (links.length > 0) headers.Link = links.join(', ')
  return headers
}

export function isSunset(entry: LifecycleEntry, now: number): boolean {
  return entry.sunset !== null && now >= entry.sunset.getTime()
}
