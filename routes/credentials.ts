// Bearer credential checks for the product API: API keys (stw_key_…) and access tokens
// (stw_at_…), with a bounded in-process cache of positive lookups so a warm check costs no I/O.
//
// Revocation must win over the cache (docs/security.md): a revoke or rotate in this process drops the
// affected entries synchronously; other processes sharing the PostgreSQL database hear of it on
// LISTEN/NOTIFY. While that subscription is down (or not yet up) nothing is cached, and every
// entry also dies after MAX_AGE_MS as a safety net.
import pg from 'pg'
import type { Config } from '../config.ts'
import { notifyCredentialChange, REVOCATION_CHANNEL } from '../storage/revocations.ts'
import { findActiveKeyByHash, recordKeyUses } from '../storage/keys.ts'
import type { Role } from '../storage/schema.ts'
import { hashSecret, sameHash, secretKind } from '../storage/secrets.ts'
import { deleteExpiredTokens, findPrincipalByAccessHash, pruneTokenFamilies } from '../storage/tokens.ts'
import type { Deps } from './deps.ts'
import { HttpError, type RequestContext } from './http.ts'

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
  /** Set for a key bound to one agent (and tokens minted from it): it may only act as that agent. */
  readonly agentId: string | null
  /** Rate-limit and audit identity: "key:<uuid>" or "user:<uuid>". */
  readonly subject: string
  /** When the credential stops working, in ms (Infinity: a key without expiry). */
  readonly expiresAt: number
}

export interface Credentials {
  /** The principal of the request's bearer credential; throws 401 otherwise. */
  authenticate(request: Request, ctx: RequestContext): Promise<Principal>
  /** Forgets cached lookups of the key and of every token minted from it, here and in peers. */
  keyChanged(keyId: string): Promise<void>
  /** Forgets cached lookups of a session family, here and in peers. */
  familyRevoked(familyId: string): Promise<void>
  /** Forgets cached lookups of every key (and token) bound to an agent that was deleted, here and in peers. */
  agentChanged(agentId: string): Promise<void>
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
  close(): Promise<void>
}

export const AUTHENTICATION_REQUIRED = 'Authentication required'
export const INVALID_TOKEN = 'Invalid or expired token'

const MAX_ENTRIES = 10_000
const MAX_AGE_MS = 5_000
const LAST_USED_FLUSH_MS = 30_000
const RECONNECT_MS = 1_000
const PRUNE_MS = 3_600_000

interface Entry {
  principal: Principal
  storedAt: number
}

// RFC 6750 §2.1: the scheme name is case-insensitive; exactly one space-separated token.
const BEARER = /^bearer +([^\s]+) *$/i

export function createCredentials(config: Config, deps: Deps): Credentials {
  const cache = new Map<string, Entry>()
  // Bumped by every invalidation: a lookup that started before one never caches its result.
  let epoch = 0
  const keyUses = new Map<string, number>()
  const listenUrl = deps.listenUrl !== undefined ? deps.listenUrl : config.databaseUrl && /^postgres(ql)?:\/\//.test(config.databaseUrl) ? config.databaseUrl : null
  const feed = listenUrl ? startFeed(listenUrl, deps, invalidate, flush) : null

  const flushTimer = setInterval(() => void flushKeyUses(), LAST_USED_FLUSH_MS)
  flushTimer.unref?.()
  // Expired tokens never authenticate; deleting them only keeps the tables small.
  // Dead session families (ended, or revoked longer than a refresh lifetime ago) go too.
  const pruneTimer = setInterval(() => {
    const now = new Date(deps.clock())
    deleteExpiredTokens(deps.db, now)
      .then(() => pruneTokenFamilies(deps.db, { refreshSeconds: config.refreshTokenTtlSeconds, accessSeconds: config.accessTokenTtlSeconds }, now))
      .catch((error: { code?: string }) => deps.logger.log('warn', 'could not prune expired tokens', { code: error.code ?? null }))
  }, PRUNE_MS)
  pruneTimer.unref?.()

  function flush(): void {
    epoch++
    cache.clear()
  }

  function invalidate(id: string): void {
    epoch++
    for (const [hash, entry] of cache) {
      const { keyId, familyId, userId, keyCreatorUserId, agentId } = entry.principal
      if (keyId === id || familyId === id || userId === id || keyCreatorUserId === id || agentId === id) cache.delete(hash)
    }
  }

  function cacheEnabled(): boolean {
    return feed === null || feed.subscribed()
  }

  async function publish(id: string): Promise<void> {
    if (!feed) return
    try {
      await notifyCredentialChange(deps.db, id)
    } catch (error) {
      // Peers still drop the entry within MAX_AGE_MS.
      deps.logger.log('warn', 'revocation notify failed', { code: (error as { code?: string }).code ?? null })
    }
  }

  async function flushKeyUses(): Promise<void> {
    if (keyUses.size === 0) return
    const batch = new Map(keyUses)
    keyUses.clear()
    try {
      await recordKeyUses(deps.db, batch)
    } catch (error) {
      deps.logger.log('warn', 'could not record key use', { code: (error as { code?: string }).code ?? null })
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
        agentId: key.agent_id,
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
        agentId: found.agent_id,
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
    async agentChanged(agentId) {
      invalidate(agentId)
      await publish(agentId)
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
    async close() {
      clearInterval(flushTimer)
      clearInterval(pruneTimer)
      await feed?.close()
      await flushKeyUses()
    },
  }
}

interface Feed {
  subscribed(): boolean
  close(): Promise<void>
}

/**
 * A dedicated connection LISTENing for revocations from other processes. On loss the cache is
 * flushed and stays off until the subscription is back, so no entry can outlive a revoke that
 * happened while we were deaf.
 */
function startFeed(url: string, deps: Deps, onRevoked: (id: string) => void, onLoss: () => void): Feed {
  let client: pg.Client | null = null
  let subscribed = false
  let closed = false
  let timer: ReturnType<typeof setTimeout> | null = null

  const lost = (reason: string) => {
    if (!subscribed && client === null) return
    subscribed = false
    onLoss()
    const old = client
    client = null
    old?.removeAllListeners()
    old?.on('error', () => {})
    void old?.end().catch(() => {})
    if (!closed) {
      deps.logger.log('warn', 'revocation feed lost; credential cache off until it is back', { reason })
      schedule()
    }
  }

  const schedule = () => {
    if (closed || timer) return
    timer = setTimeout(() => {
      timer = null
      void connect()
    }, RECONNECT_MS)
    timer.unref?.()
  }

  const connect = async () => {
    if (closed) return
    const next = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000, keepAlive: true })
    client = next
    next.on('error', (error: Error & { code?: string }) => lost(error.code ?? 'error'))
    next.on('end', () => lost('end'))
    next.on('notification', (message) => {
      if (message.channel === REVOCATION_CHANNEL && message.payload) onRevoked(message.payload)
    })
    try {
      await next.connect()
      await next.query(`LISTEN ${REVOCATION_CHANNEL}`)
      if (closed || client !== next) {
        await next.end().catch(() => {})
        return
      }
      subscribed = true
    } catch (error) {
      if (client === next) lost((error as { code?: string }).code ?? 'connect failed')
      else schedule()
    }
  }

  void connect()
  return {
    subscribed: () => subscribed,
    async close() {
      closed = true
      subscribed = false
      if (timer) clearTimeout(timer)
      const old = client
      client = null
      if (old) {
        old.removeAllListeners()
        old.on('error', () => {})
        await old.end().catch(() => {})
      }
    },
  }
}
