// Bearer credential checks for the product API: API keys (stw_key_…) and access tokens
// (stw_at_…), with a bounded in-process cache of positive lookups so a warm check costs no I/O.
//
// Revocation must win over the cache (docs/security.md): a revoke or rotate in this process drops the
// affected entries synchronously; other processes sharing the PostgreSQL database hear of it on
// LISTEN/NOTIFY. While that subscription is down (or not yet up) nothing is cached, and every
// entry also dies after MAX_AGE_MS as a safety net.
import type { Config } from '../config.ts'
import { isPostgresUrl } from '../domain/database-url.ts'
import type { Role } from '../domain/roles.ts'
import { errorCode } from '../log.ts'
import { notifyCredentialChange, startRevocationFeed, type RevocationFeed } from '../storage/revocations.ts'
import { findActiveKeyByHash, recordKeyUses } from '../storage/keys.ts'
import { hashSecret, sameHash, secretKind } from '../storage/secrets.ts'
import { deleteExpiredTokens, findPrincipalByAccessHash, pruneTokenFamilies } from '../storage/tokens.ts'
import type { Deps } from './deps.ts'
import { HttpError } from '../http/errors.ts'
import { type RequestContext } from './deps.ts'

export interface Principal {
  readonly organizationId: string
  readonly role: Role
  readonly kind: 'key' | 'session'
  /** The API key behind the credential: the key itself, or the key a token was minted from. */
  readonly keyId: string | null
  readonly userId: string | null
  /**
   * For a key or a key's token: the user whose current role caps it (docs/api.md: a key's role
   * never exceeds its creator's); null for an operator's key and for user sessions.
   */
  readonly keyCreatorUserId: string | null
  readonly familyId: string | null
  /** Rate-limit and audit identity: "key:<uuid>" or "user:<uuid>". */
  readonly subject: string
  /** When the credential stops working, in ms (Infinity: a key without expiry). */
  readonly expiresAt: number
}

export interface Credentials {
  /** The principal of the request's bearer credential; throws 401 otherwise. */
  authenticate(request: Request, ctx: Pick<RequestContext, 'now'>): Promise<Principal>
  /** Forgets cached lookups of the key and of every token minted from it, here and in peers. */
  keyChanged(keyId: string): Promise<void>
  /** Forgets cached lookups of a session family, here and in peers. */
  familyRevoked(familyId: string): Promise<void>
  /** Forgets cached sessions of a user whose membership changed, and every key (and key token) they cap, here and in peers. */
  userChanged(userId: string): Promise<void>
  /**
   * Forgets cached lookups of a key, session family or user (every lookup when no id is given),
   * in this process only and at once: for changes made beside the API, such as an operator
   * command carried out by this server.
   */
  forget(id?: string): void
  /** True while positive lookups may be cached (for tests and diagnostics). */
  cacheEnabled(): boolean
  /** Starts the revocation feed (PostgreSQL) and the timers that record key use and prune tokens. */
  start(): void
  /** Stops what start() began, after recording pending key uses. */
  close(): Promise<void>
}

export const AUTHENTICATION_REQUIRED = 'Authentication required'
export const INVALID_TOKEN = 'Invalid or expired token'

const MAX_ENTRIES = 10_000
const MAX_AGE_MS = 5_000
const LAST_USED_FLUSH_MS = 30_000
const PRUNE_MS = 3_600_000

interface Entry {
  principal: Principal
  storedAt: number
}

// RFC 6750 §2.1: the scheme name is case-insensitive; exactly one space-separated token.
const BEARER = /^bearer +([^\s]+) *$/i

export function createCredentials(config: Config, deps: Pick<Deps, 'db' | 'clock' | 'logger' | 'listenUrl'>): Credentials {
  const cache = new Map<string, Entry>()
  // Bumped by every invalidation: a lookup that started before one never caches its result.
  let epoch = 0
  const keyUses = new Map<string, number>()
  const listenUrl = deps.listenUrl !== undefined ? deps.listenUrl : isPostgresUrl(config.databaseUrl) ? config.databaseUrl : null
  let feed: RevocationFeed | null = null
  let timers: Array<ReturnType<typeof setInterval>> = []

  function every(ms: number, work: () => void): void {
    const timer = setInterval(work, ms)
    timer.unref?.()
    timers.push(timer)
  }

  /** Expired tokens never authenticate; deleting them, and dead session families, only keeps the tables small. */
  function prune(): void {
    const now = new Date(deps.clock())
    deleteExpiredTokens(deps.db, now)
      .then(() => pruneTokenFamilies(deps.db, { refreshSeconds: config.refreshTokenTtlSeconds, accessSeconds: config.accessTokenTtlSeconds }, now))
      .catch((error: unknown) => deps.logger.log('warn', 'could not prune expired tokens', { code: errorCode(error) }))
  }

  function flush(): void {
    epoch++
    cache.clear()
  }

  function invalidate(id: string): void {
    epoch++
    for (const [hash, entry] of cache) {
      const { keyId, familyId, userId, keyCreatorUserId } = entry.principal
      if (keyId === id || familyId === id || userId === id || keyCreatorUserId === id) cache.delete(hash)
    }
  }

  /** With a feed configured, nothing is cached until it is started and subscribed. */
  function cacheEnabled(): boolean {
    return listenUrl === null || (feed?.subscribed() ?? false)
  }

  async function publish(id: string): Promise<void> {
    if (listenUrl === null) return
    try {
      await notifyCredentialChange(deps.db, id)
    } catch (error) {
      // Peers still drop the entry within MAX_AGE_MS.
      deps.logger.log('warn', 'revocation notify failed', { code: errorCode(error) })
    }
  }

  async function flushKeyUses(): Promise<void> {
    if (keyUses.size === 0) return
    const batch = new Map(keyUses)
    keyUses.clear()
    try {
      await recordKeyUses(deps.db, batch)
    } catch (error) {
      deps.logger.log('warn', 'could not record key use', { code: errorCode(error) })
    }
  }

  async function lookup(kind: 'key' | 'at', hash: string, now: number): Promise<Principal | null> {
    if (kind === 'key') {
      const key = await findActiveKeyByHash(deps.db, hash, new Date(now))
      if (!key || !sameHash(key.secret_hash, hash)) return null
      return {
        organizationId: key.organization_id,
        role: key.role,
        kind: 'key',
        keyId: key.id,
        userId: null,
        keyCreatorUserId: key.created_by_user_id,
        familyId: null,
        subject: `key:${key.id}`,
        expiresAt: key.expires_at ? key.expires_at.getTime() : Infinity,
      }
    }
    if (kind === 'at') {
      const found = await findPrincipalByAccessHash(deps.db, hash, new Date(now))
      if (!found || !sameHash(found.token_hash, hash)) return null
      return {
        organizationId: found.organization_id,
        role: found.role,
        kind: 'session',
        keyId: found.api_key_id,
        userId: found.user_id,
        keyCreatorUserId: found.key_creator_user_id,
        familyId: found.family_id,
        subject: found.user_id ? `user:${found.user_id}` : `key:${found.api_key_id}`,
        expiresAt: found.expires_at,
      }
    }
    return null
  }

  return {
    async authenticate(request, ctx) {
      const header = request.headers.get('authorization')
      if (header === null || header.trim() === '') throw new HttpError(401, AUTHENTICATION_REQUIRED)
      const token = BEARER.exec(header)?.[1]
      // A bad shape or checksum is refused here, before any database work.
      const kind = token === undefined ? null : secretKind(token)
      // Refresh tokens and invitation secrets are not bearer credentials.
      if (token === undefined || (kind !== 'key' && kind !== 'at')) throw new HttpError(401, INVALID_TOKEN)
      const hash = hashSecret(token)
      const now = ctx.now
      const hit = cache.get(hash)
      if (hit) {
        if (now < hit.principal.expiresAt && now - hit.storedAt < MAX_AGE_MS && cacheEnabled()) {
          if (hit.principal.kind === 'key') keyUses.set(hit.principal.keyId!, now)
          return hit.principal
        }
        cache.delete(hash)
      }
      const startedAt = epoch
      const principal = await lookup(kind, hash, now)
      if (!principal) throw new HttpError(401, INVALID_TOKEN)
      if (principal.kind === 'key') keyUses.set(principal.keyId!, now)
      if (startedAt === epoch && cacheEnabled()) {
        if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value!)
        cache.set(hash, { principal, storedAt: now })
      }
      return principal
    },
    async keyChanged(keyId) {
      invalidate(keyId)
      await publish(keyId)
    },
    async familyRevoked(familyId) {
      invalidate(familyId)
      await publish(familyId)
    },
    async userChanged(userId) {
      invalidate(userId)
      await publish(userId)
    },
    forget(id) {
      if (id === undefined) flush()
      else invalidate(id)
    },
    cacheEnabled,
    start() {
      if (timers.length > 0) return
      if (listenUrl) feed = startRevocationFeed(listenUrl, deps.logger, invalidate, flush)
      every(LAST_USED_FLUSH_MS, () => void flushKeyUses())
      every(PRUNE_MS, prune)
    },
    async close() {
      for (const timer of timers) clearInterval(timer)
      timers = []
      await feed?.close()
      feed = null
      await flushKeyUses()
    },
  }
}
