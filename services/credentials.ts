// Bearer credential checks for the product API: API keys (stw_key_…) and access tokens
// (stw_at_…), with a bounded in-process cache of positive lookups so a warm check costs no I/O.
//
// Revocation must win over the cache (docs/security.md): a revoke or rotate in this process drops the
// affected entries synchronously; other processes sharing the PostgreSQL database hear of it on
// LISTEN/NOTIFY. While that subscription is down (or not yet up) nothing is cached, and every
// entry also dies after MAX_AGE_MS as a safety net.
import type { Config } from '../config.ts'
import { creatorString, type Creator } from '../domain/creator.ts'
import { isPostgresUrl } from '../domain/database-url.ts'
import type { Role } from '../domain/roles.ts'
import { errorCode } from '../log.ts'
import type { NotificationFeed } from '../database/notifications.ts'
import { findActiveKeyByHash, recordKeyUses } from '../storage/keys.ts'
import { hashSecret, sameHash, secretKind, secretShape } from '../auth/secrets.ts'
import { deleteExpiredTokens, findPrincipalByAccessHash, pruneTokenFamilies } from '../storage/tokens.ts'
import { fixedError, HttpError } from '../http/errors.ts'
import { notifyCredentialChange, startRevocationFeed } from './credential-feed.ts'
import type { Deps } from './deps.ts'

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
  /**
   * The principal of a bearer credential (the Authorization header's value, null when absent) as
   * of `now` (ms), or the 401 to answer (returned, not thrown: see docs/architecture.md, "Refusals
   * returned, not thrown"). Answered at once when no query is needed (a refusal of a malformed
   * secret, a cached principal), else a promise; a database failure rejects it.
   */
  authenticate(authorization: string | null, now: number): Principal | HttpError | Promise<Principal | HttpError>
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
  /** Starts the revocation feed (PostgreSQL) and the timers that record key use and prune tokens. */
  start(): void
  /** Stops what start() began, after recording pending key uses. */
  close(): Promise<void>
}

/** Who acts, as the API shows a creator ("user:<uuid>" or "key:<uuid>"). */
export function creatorOf(principal: Principal): Creator {
  return creatorString(principal.userId, principal.userId ? null : principal.keyId)
}

const AUTHENTICATION_REQUIRED = 'Authentication required'
const INVALID_TOKEN = 'Invalid or expired token'
/** The two refusals of a credential, the same on every request: shared (errors.ts `fixedError`). */
const NO_CREDENTIAL = fixedError(401, AUTHENTICATION_REQUIRED)
export const INVALID_CREDENTIAL = fixedError(401, INVALID_TOKEN)

const MAX_ENTRIES = 10_000
const MAX_AGE_MS = 5_000
const LAST_USED_FLUSH_MS = 30_000
const PRUNE_MS = 3_600_000

interface Entry {
  principal: Principal
  storedAt: number
}

// RFC 6750 §2.1: the scheme name is case-insensitive; exactly one space-separated token.
/** An Authorization header of the Bearer scheme; its token is the first group. */
export const BEARER = /^bearer +([^\s]+) *$/i

/** The bearer secret of an Authorization header, with its kind; the 401 for anything else, before any database work. */
function bearerSecret(header: string | null): { token: string; kind: 'key' | 'at'; hash: string } | HttpError {
  if (header === null || header.trim() === '') return NO_CREDENTIAL
  const token = BEARER.exec(header)?.[1]
  // A bad shape is refused here; the checksum, before any database work (authenticate).
  const kind = token === undefined ? null : secretShape(token)
  // Refresh tokens and invitation secrets are not bearer credentials.
  if (token === undefined || (kind !== 'key' && kind !== 'at')) return INVALID_CREDENTIAL
  return { token, kind, hash: hashSecret(token) }
}

/**
 * Positive lookups by secret hash, bounded and short-lived. Every invalidation bumps an epoch:
 * a lookup that started before one never stores its result.
 */
function createPrincipalCache() {
  const entries = new Map<string, Entry>()
  let epoch = 0
  return {
    epoch: () => epoch,
    /** A fresh, unexpired entry; a stale one is dropped. */
    get(hash: string, now: number): Principal | null {
      const hit = entries.get(hash)
      if (!hit) return null
      if (now < hit.principal.expiresAt && now - hit.storedAt < MAX_AGE_MS) return hit.principal
      entries.delete(hash)
      return null
    },
    set(hash: string, principal: Principal, now: number): void {
      if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!)
      entries.set(hash, { principal, storedAt: now })
    },
    flush(): void {
      epoch++
      entries.clear()
    },
    invalidate(id: string): void {
      epoch++
      for (const [hash, entry] of entries) {
        const { keyId, familyId, userId, keyCreatorUserId, agentId } = entry.principal
        if (keyId === id || familyId === id || userId === id || keyCreatorUserId === id || agentId === id) entries.delete(hash)
      }
    },
  }
}

/** Last use of each key, recorded in batches (a warm check costs no write). */
function createKeyUses(deps: Pick<Deps, 'db' | 'logger'>) {
  const pending = new Map<string, number>()
  return {
    note(principal: Principal, now: number): void {
      if (principal.kind === 'key') pending.set(principal.keyId!, now)
    },
    async flush(): Promise<void> {
      if (pending.size === 0) return
      const batch = new Map(pending)
      pending.clear()
      try {
        await recordKeyUses(deps.db, batch)
      } catch (error) {
        deps.logger.log('warn', 'could not record key use', { code: errorCode(error) })
      }
    },
  }
}

async function lookupKey(db: Deps['db'], hash: string, now: number): Promise<Principal | null> {
  const key = await findActiveKeyByHash(db, hash, new Date(now))
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
    subject: creatorString(null, key.id),
    expiresAt: key.expires_at ? key.expires_at.getTime() : Infinity,
  }
}

async function lookupAccessToken(db: Deps['db'], hash: string, now: number): Promise<Principal | null> {
  const found = await findPrincipalByAccessHash(db, hash, new Date(now))
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
    subject: found.user_id ? creatorString(found.user_id, null) : creatorString(null, found.api_key_id),
    expiresAt: found.expires_at,
  }
}

export function createCredentials(config: Config, deps: Pick<Deps, 'db' | 'clock' | 'logger' | 'listenUrl'>): Credentials {
  const cache = createPrincipalCache()
  const keyUses = createKeyUses(deps)
  const listenUrl = deps.listenUrl !== undefined ? deps.listenUrl : isPostgresUrl(config.databaseUrl) ? config.databaseUrl : null
  let feed: NotificationFeed | null = null
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

  /** With a feed configured, nothing is cached until it is started and subscribed. */
  function cacheEnabled(): boolean {
    return listenUrl === null || (feed?.subscribed() ?? false)
  }

  /** Forgets the id here at once, and tells the processes listening. */
  async function changed(id: string): Promise<void> {
    cache.invalidate(id)
    if (listenUrl === null) return
    try {
      await notifyCredentialChange(deps.db, id)
    } catch (error) {
      // Peers still drop the entry within MAX_AGE_MS.
      deps.logger.log('warn', 'revocation notify failed', { code: errorCode(error) })
    }
  }

  /** The database lookup of a well-formed secret the cache does not hold. */
  async function lookup(kind: 'key' | 'at', hash: string, now: number): Promise<Principal | HttpError> {
    const startedAt = cache.epoch()
    const principal = kind === 'key' ? await lookupKey(deps.db, hash, now) : await lookupAccessToken(deps.db, hash, now)
    if (!principal) return INVALID_CREDENTIAL
    keyUses.note(principal, now)
    if (startedAt === cache.epoch() && cacheEnabled()) cache.set(hash, principal, now)
    return principal
  }

  return {
    authenticate(authorization, now) {
      const secret = bearerSecret(authorization)
      if (secret instanceof HttpError) return secret
      const { token, kind, hash } = secret
      // A hit is a secret already checked in full (checksum and database) when it was stored: its
      // checksum, the costliest step of a warm check, is not computed again.
      const hit = cacheEnabled() ? cache.get(hash, now) : null
      if (hit) {
        keyUses.note(hit, now)
        return hit
      }
      // A mistyped or made-up secret: refused without a query.
      if (secretKind(token) !== kind) return INVALID_CREDENTIAL
      return lookup(kind, hash, now)
    },
    keyChanged: changed,
    familyRevoked: changed,
    userChanged: changed,
    agentChanged: changed,
    forget(id) {
      if (id === undefined) cache.flush()
      else cache.invalidate(id)
    },
    cacheEnabled,
    start() {
      if (timers.length > 0) return
      if (listenUrl) feed = startRevocationFeed(listenUrl, deps.logger, cache.invalidate, cache.flush)
      every(LAST_USED_FLUSH_MS, () => void keyUses.flush())
      every(PRUNE_MS, prune)
    },
    async close() {
      for (const timer of timers) clearInterval(timer)
      timers = []
      await feed?.close()
      feed = null
      await keyUses.flush()
    },
  }
}
