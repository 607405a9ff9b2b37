// Fixed-window request counting per key (client address, credential, email…), in memory.
// Synchronous on purpose: a limit check must cost no I/O on the request path.
import type { RateLimitRule } from '../config.ts'

export interface RateLimitDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly remaining: number
  /** Seconds until the window resets (≥ 1). */
  readonly resetSeconds: number
}

export interface RateLimiter {
  readonly rule: RateLimitRule
  take(key: string, now: number): RateLimitDecision
}

/** Keys kept at most; past this the oldest windows are dropped (bounded memory under a flood). */
const MAX_KEYS = 100_000

export function createRateLimiter(rule: RateLimitRule, name = 'default'): RateLimiter & { readonly name: string } {
  const windows = new Map<string, { start: number; count: number }>()
  const windowMs = rule.windowSeconds * 1000
  return {
    rule,
    name,
    take(key, now) {
      const start = now - (now % windowMs)
      let window = windows.get(key)
      if (window === undefined || window.start !== start) {
        if (window !== undefined) windows.delete(key)
        else if (windows.size >= MAX_KEYS) {
          for (const [oldKey, old] of windows) {
            if (old.start !== start || windows.size >= MAX_KEYS) windows.delete(oldKey)
            if (windows.size < MAX_KEYS * 0.9) break
          }
        }
        window = { start, count: 0 }
        windows.set(key, window)
      }
      window.count++
      const resetSeconds = Math.max(1, Math.ceil((start + windowMs - now) / 1000))
      return {
        allowed: window.count <= rule.limit,
        limit: rule.limit,
        remaining: Math.max(0, rule.limit - window.count),
        resetSeconds,
      }
    },
  }
}

/**
 * draft-ietf-httpapi-ratelimit-headers (structured fields): `RateLimit-Policy` names the quota,
 * `RateLimit` the remaining units and seconds to reset. `Retry-After` (RFC 9110 §10.2.3) only on 429.
 */
export function rateLimitHeaders(name: string, rule: RateLimitRule, decision: RateLimitDecision): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Policy': `"${name}";q=${rule.limit};w=${rule.windowSeconds}`,
    RateLimit: `"${name}";r=${decision.remaining};t=${decision.resetSeconds}`,
  }
  if (!decision.allowed) headers['Retry-After'] = String(decision.resetSeconds)
  return headers
}
