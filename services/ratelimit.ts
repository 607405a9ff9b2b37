// Fixed-window request counting per key (client address, credential, email…).
// Synchronous on purpose: a limit check must cost no I/O on the request path. Counting is local;
// when a `RateLimitSync` is attached (several processes on one PostgreSQL), the local deltas are
// shared in periodic batches and each window's decision uses local + other processes' counts.
import type { RateLimitRule } from '../config.ts'
import type { PendingCount, RateLimitSync } from '../storage/ratelimits.ts'

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

interface Window {
  start: number
  /** Counted by this process in this window. */
  count: number
  /** Part of `count` already handed to the sync. */
  drained: number
  /** Other processes' count, as of the last sync. */
  remote: number
}

export function createRateLimiter(
  rule: RateLimitRule,
  name = 'default',
  sync: RateLimitSync | null = null,
): RateLimiter & { readonly name: string } {
  const windows = new Map<string, Window>()
  const dirty = new Set<string>()
  const windowMs = rule.windowSeconds * 1000
  const shared = sync !== null
  const limiter = {
    rule,
    name,
    take(key: string, now: number): RateLimitDecision {
      const start = now - (now % windowMs)
      let window = windows.get(key)
      if (window === undefined || window.start !== start) {
        if (window !== undefined) windows.delete(key)
        else if (windows.size >= MAX_KEYS) {
          for (const [oldKey, old] of windows) {
            if (old.start !== start || windows.size >= MAX_KEYS) {
              windows.delete(oldKey)
              dirty.delete(oldKey)
            }
            if (windows.size < MAX_KEYS * 0.9) break
          }
        }
        window = { start, count: 0, drained: 0, remote: 0 }
        windows.set(key, window)
      }
      window.count++
      if (shared) dirty.add(key)
      const used = window.count + window.remote
      const resetSeconds = Math.max(1, Math.ceil((start + windowMs - now) / 1000))
      return {
        allowed: used <= rule.limit,
        limit: rule.limit,
        remaining: Math.max(0, rule.limit - used),
        resetSeconds,
      }
    },
  }
  if (sync) {
    sync.attach({
      name,
      windowMs,
      hot: Math.max(1, Math.ceil(rule.limit / 2)),
      drain() {
        const out: PendingCount[] = []
        for (const key of dirty) {
          const window = windows.get(key)
          if (window && window.count > window.drained) {
            out.push({ key, start: window.start, delta: window.count - window.drained, local: window.count })
            window.drained = window.count
          }
        }
        dirty.clear()
        return out
      },
      merge(pending, global) {
        const window = windows.get(pending.key)
        // Others' share = the global total minus everything this process had counted at drain time.
        if (window && window.start === pending.start) window.remote = Math.max(window.remote, global - pending.local)
      },
      preload(key, start, global) {
        let window = windows.get(key)
        if (window === undefined || window.start < start) {
          if (windows.size >= MAX_KEYS) return
          window = { start, count: 0, drained: 0, remote: 0 }
          windows.set(key, window)
        }
        // `global` holds what this process already stored (at most `drained`).
        if (window.start === start) window.remote = Math.max(window.remote, global - window.drained)
      },
      restore(pending) {
        const window = windows.get(pending.key)
        if (window && window.start === pending.start) {
          window.drained -= pending.delta
          dirty.add(pending.key)
        }
      },
    })
  }
  return limiter
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
