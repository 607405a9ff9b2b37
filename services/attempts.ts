// The failed-attempt throttle of sign-in (docs/security.md, login throttle): every attempt takes
// its place before the credential is checked, so parallel guesses cannot slip through, and gives
// it back unless it failed, so busy clients are not throttled. Counted per (account, client) and,
// with five times the room, per client.
import type { RateLimitRule } from '../config.ts'
import type { HttpError } from '../http/errors.ts'
import type { RequestContext } from './deps.ts'

/** Keys kept at most per counter; past this the oldest windows are dropped (bounded memory under a flood). */
const MAX_KEYS = 100_000

type Reservation = { readonly taken: true; release(): void } | { readonly taken: false; readonly retryAfter: number }

/** Marks an attempt failed (its place stays taken) and returns the error to throw. */
export type Fail = (error: HttpError) => HttpError

/** Failed attempts per key in fixed windows that start at a key's first attempt. */
class AttemptCounter {
  readonly #windows = new Map<string, { start: number; count: number }>()
  readonly #limit: number
  readonly #windowMs: number
  constructor(limit: number, windowSeconds: number) {
    this.#limit = limit
    this.#windowMs = windowSeconds * 1000
  }
  /** Takes a place for `key` in its current window, unless every place is taken. */
  reserve(key: string, now: number): Reservation {
    let window = this.#windows.get(key)
    if (!window || now - window.start >= this.#windowMs) {
      if (this.#windows.size >= MAX_KEYS) this.#windows.delete(this.#windows.keys().next().value!)
      window = { start: now, count: 0 }
      this.#windows.delete(key)
      this.#windows.set(key, window)
    }
    if (window.count >= this.#limit) return { taken: false, retryAfter: Math.max(1, Math.ceil((window.start + this.#windowMs - now) / 1000)) }
    window.count++
    const taken = window
    // A window that has ended since is forgotten anyway: giving back its place changes nothing.
    return { taken: true, release: () => void taken.count-- }
  }
}

/** Who tries, and when: the client's rate-limit key and the time in ms (a request context has both). */
export type AttemptBy = Pick<RequestContext, 'clientKey' | 'now'>

export type Attempt = <T>(ctx: AttemptBy, account: string, check: (fail: Fail) => Promise<T>) => Promise<T>

/**
 * Runs one attempt at a credential for `account` from this client. Its places in both windows are
 * taken before `check` runs (`throttled` when either is full) and given back unless `check` marks
 * the attempt failed: a success, or an error that evaluated nothing (database down, hashing busy).
 */
export function createAttempts(rule: RateLimitRule, throttled: (retryAfter: number) => HttpError): Attempt {
  const perAccount = new AttemptCounter(rule.limit, rule.windowSeconds)
  const perClient = new AttemptCounter(rule.limit * 5, rule.windowSeconds)
  return async (ctx, account, check) => {
    const mine = perAccount.reserve(`${account}|${ctx.clientKey}`, ctx.now)
    if (!mine.taken) throw throttled(mine.retryAfter)
    const client = perClient.reserve(ctx.clientKey, ctx.now)
    if (!client.taken) {
      mine.release()
      throw throttled(client.retryAfter)
    }
    let failed = false
    try {
      return await check((error) => {
        failed = true
        return error
      })
    } finally {
      if (!failed) {
        mine.release()
        client.release()
      }
    }
  }
}
