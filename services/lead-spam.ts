// Spam defence for the lead forms (docs/leads.md, "Spam defence"): per-list settings, and the
// screen a submission passes after its body is valid and before it is stored. In order:
// 1. CAPTCHA (when the list has a provider): the token must be present, unused, and valid at the
//    provider. Checked first, so a bot that cannot solve it learns nothing of the honeypot.
// 2. Honeypot (when the list names a field): a non-empty value makes the submission spam.
// Spam is stored apart (lead_spam), never as a lead: no lead.created event, so no webhook and no
// notification; the form answers exactly as a stored lead would (200, or 409 when registered).
import { createHash } from 'node:crypto'
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { CaptchaFailMode, CaptchaProvider, SpamListName } from '../database/lead-spam-schema.ts'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import { claimCaptchaToken, insertSpam, isRegistered, readSpamSettings, releaseCaptchaToken, writeSpamSettings, type SpamSettingsRow } from '../storage/lead-spam.ts'
import { recordEvent, eventBy, type AuditBy } from '../storage/audit.ts'
import { CAPTCHA_PROVIDERS, verifyCaptcha, type CaptchaVerdict } from './captcha.ts'
import { resolvedUrlProblem } from './outbound-url.ts'
import { NO_SECRETS_KEY, type Secrets } from './secrets.ts'

export const CAPTCHA_MISSING = 'Missing CAPTCHA response'
export const CAPTCHA_FAILED = 'CAPTCHA verification failed; please solve it again'
export const CAPTCHA_UNAVAILABLE = 'CAPTCHA verification is unavailable; retry later'
/** Longest token sent to a provider (Turnstile documents 2048 characters). */
const MAX_TOKEN = 2048
const RETRY_AFTER_SECONDS = '30'

/** The fields of each list a spam row keeps: what a lead of that list would have held. */
const KEPT: Readonly<Record<SpamListName, readonly string[]>> = {
  'demo-requests': ['email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id'],
  newsletter: ['email', 'source', 'analytics_distinct_id'],
}

/** What the form does with a submission: store it as a lead, answer as if stored, or refuse. */
export type Screened = { kind: 'lead' } | { kind: 'spam'; registered: boolean } | HttpError

// Settings are read on every submission: each process keeps them for 2 s (real time), and a
// change made through this process is seen at once. Keyed by database, so tests' apps never share.
const CACHE_MS = 2000
const caches = new WeakMap<Kysely<Database>, Map<SpamListName, { row: SpamSettingsRow; at: number }>>()

function cacheOf(db: Kysely<Database>) {
  let cache = caches.get(db)
  if (!cache) caches.set(db, (cache = new Map()))
  return cache
}

/** A list's settings, through the per-process cache. */
export async function spamSettings(db: Kysely<Database>, list: SpamListName): Promise<SpamSettingsRow> {
  const cache = cacheOf(db)
  const hit = cache.get(list)
  if (hit && performance.now() - hit.at < CACHE_MS) return hit.row
  const row = await readSpamSettings(db, list)
  cache.set(list, { row, at: performance.now() })
  return row
}

/** The sealing context of a list's CAPTCHA secret: a sealed value copied to another list does not open. */
const secretContext = (list: SpamListName) => `lead_spam_settings:${list}:captcha_secret`

export function tokenFieldOf(provider: CaptchaProvider | null): string | null {
  return provider ? CAPTCHA_PROVIDERS[provider].tokenField : null
}

export function verifyUrlOf(row: Pick<SpamSettingsRow, 'captcha_provider' | 'captcha_verify_url'>): string | null {
  return row.captcha_verify_url ?? (row.captcha_provider ? CAPTCHA_PROVIDERS[row.captcha_provider].verifyUrl : null)
}

export interface LeadSpam {
  /**
   * Screens a valid submission (`fields`: the body's fields, unknown ones included). The common
   * case (nothing configured) costs one cached settings read.
   */
  screen(db: Kysely<Database>, list: SpamListName, via: string, fields: Record<string, unknown>, at: Date, clientAddress: string): Promise<Screened>
  readonly secrets: Secrets
}

function filled(value: unknown): boolean {
  if (value === undefined || value === null) return false
  return typeof value !== 'string' || value.trim() !== ''
}

export function createLeadSpam(config: Config, logger: Logger, secrets: Secrets): LeadSpam {
  const verifyOptions = { allowPrivate: config.captchaAllowPrivate, timeoutMs: config.captchaVerifyTimeoutMs }

  async function captcha(db: Kysely<Database>, settings: SpamSettingsRow, fields: Record<string, unknown>, at: Date, clientAddress: string): Promise<'passed' | 'unavailable' | HttpError> {
    const provider = settings.captcha_provider!
    const { tokenField, tokenTtlSeconds } = CAPTCHA_PROVIDERS[provider]
    const token = fields[tokenField]
    if (typeof token !== 'string' || token.trim() === '') return new HttpError(400, CAPTCHA_MISSING)
    if (token.length > MAX_TOKEN) return new HttpError(400, CAPTCHA_FAILED)
    // Single use: claimed (by hash) before the provider is asked, so two racing posts of one token cannot both pass.
    const hash = createHash('sha256').update(token).digest('hex')
    if (!(await claimCaptchaToken(db, hash, at, new Date(at.getTime() + tokenTtlSeconds * 1000)))) return new HttpError(400, CAPTCHA_FAILED)
    let verdict: CaptchaVerdict
    const secret = openSecret(settings)
    if (secret === null) verdict = { kind: 'unavailable', error: 'the CAPTCHA secret cannot be opened (SECRETS_KEY missing or changed)' }
    else verdict = await verifyCaptcha(verifyUrlOf(settings)!, secret, token, clientAddress, verifyOptions)
    if (verdict.kind === 'valid') return 'passed'
    if (verdict.kind === 'invalid') return new HttpError(400, CAPTCHA_FAILED)
    logger.log('warn', 'CAPTCHA provider unavailable', { list: settings.list, provider, error: verdict.error, fail_mode: settings.captcha_fail_mode })
    if (settings.captcha_fail_mode === 'open') return 'unavailable'
    // Fail closed: refused, and the token given back so the person can send it again.
    await releaseCaptchaToken(db, hash)
    return new HttpError(503, CAPTCHA_UNAVAILABLE, { headers: { 'Retry-After': RETRY_AFTER_SECONDS } })
  }

  function openSecret(settings: SpamSettingsRow): string | null {
    const box = secrets.box()
    if (!box || settings.captcha_secret_sealed === null) return null
    try {
      return box.open(settings.captcha_secret_sealed, secretContext(settings.list))
    } catch {
      return null
    }
  }

  return {
    secrets,
    async screen(db, list, via, fields, at, clientAddress) {
      const settings = await spamSettings(db, list)
      if (settings.captcha_provider === null && settings.honeypot_field === null) return { kind: 'lead' }
      let reason: 'honeypot' | 'captcha_unavailable' | null = null
      if (settings.captcha_provider !== null) {
        const outcome = await captcha(db, settings, fields, at, clientAddress)
        if (outcome instanceof HttpError) return outcome
        if (outcome === 'unavailable') reason = 'captcha_unavailable'
      }
      if (settings.honeypot_field !== null && filled(fields[settings.honeypot_field])) reason = 'honeypot'
      if (reason === null) return { kind: 'lead' }
      const kept: Record<string, unknown> = {}
      for (const name of KEPT[list]) if (fields[name] !== undefined) kept[name] = fields[name]
      const email = String(fields.email)
      await insertSpam(db, { list, email, fields: kept, reason, via }, at)
      return { kind: 'spam', registered: await isRegistered(db, list, email) }
    },
  }
}

/** A change to a list's settings, as PATCH gives it: absent keys unchanged, null clears. */
export interface SpamSettingsChange {
  honeypot_field?: string | null
  captcha_provider?: CaptchaProvider | null
  captcha_secret?: string | null
  captcha_verify_url?: string | null
  captcha_fail_mode?: CaptchaFailMode
  retention_days?: number | null
}

const RESOLVE_TIMEOUT_MS = 2000

/**
 * Merges `change` into the list's settings, checks the result as a whole, seals a new secret, and
 * writes it with a `settings.changed` event (naming the fields changed, never the secret).
 */
export async function changeSpamSettings(
  db: Kysely<Database>,
  config: Config,
  spam: LeadSpam,
  list: SpamListName,
  change: SpamSettingsChange,
  by: AuditBy & { organizationId: string; creator: string },
  now: Date,
): Promise<SpamSettingsRow> {
  const current = await readSpamSettings(db, list)
  const next: SpamSettingsRow = { ...current, updated_at: now, updated_by: by.creator }
  if (change.honeypot_field !== undefined) next.honeypot_field = change.honeypot_field
  if (change.captcha_provider !== undefined) next.captcha_provider = change.captcha_provider
  if (change.captcha_verify_url !== undefined) next.captcha_verify_url = change.captcha_verify_url
  if (change.captcha_fail_mode !== undefined) next.captcha_fail_mode = change.captcha_fail_mode
  if (change.retention_days !== undefined) next.retention_days = change.retention_days
  if (change.captcha_secret !== undefined) {
    if (change.captcha_secret === null) next.captcha_secret_sealed = null
    else {
      const box = spam.secrets.box()
      if (!box) throw new HttpError(400, NO_SECRETS_KEY)
      next.captcha_secret_sealed = box.seal(change.captcha_secret, secretContext(list))
    }
  }
  if (next.captcha_provider !== null && next.captcha_secret_sealed === null) throw new HttpError(400, 'Field captcha_secret is required while captcha_provider is set')
  const reserved = new Set([...KEPT[list], ...Object.values(CAPTCHA_PROVIDERS).map((p) => p.tokenField)])
  if (next.honeypot_field !== null && reserved.has(next.honeypot_field)) throw new HttpError(400, `Field honeypot_field cannot be ${next.honeypot_field}: the form or a CAPTCHA widget uses that field`)
  if (change.captcha_verify_url) {
    const problem = await resolvedUrlProblem(new URL(change.captcha_verify_url), 'captcha_verify_url', { allowPrivate: config.captchaAllowPrivate, setting: 'CAPTCHA_ALLOW_PRIVATE' }, RESOLVE_TIMEOUT_MS)
    if (problem) throw new HttpError(400, problem)
  }
  const changed = Object.keys(change).sort()
  await db.transaction().execute(async (trx) => {
    await writeSpamSettings(trx, next)
    await recordEvent(trx, eventBy(by, by.organizationId, 'settings.changed', { type: 'lead_list', id: list }, { changed, setting: 'spam' }, now))
  })
  cacheOf(db).delete(list)
  return next
}
