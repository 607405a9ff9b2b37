// The lead-spam tables (migration 2026-12-06T04-lead-spam): per-list spam settings, the
// submissions kept apart as spam, and the CAPTCHA tokens already used.
import type { ColumnType, Generated } from 'kysely'
import type { Timestamp } from './column-types.ts'

export type SpamListName = 'demo-requests' | 'newsletter'
export type CaptchaProvider = 'turnstile' | 'hcaptcha' | 'recaptcha'
export type CaptchaFailMode = 'closed' | 'open'
export type SpamReason = 'honeypot' | 'captcha_unavailable'

export interface LeadSpamSettingsTable {
  list: SpamListName
  honeypot_field: string | null
  captcha_provider: CaptchaProvider | null
  captcha_secret_sealed: string | null
  captcha_verify_url: string | null
  captcha_fail_mode: ColumnType<CaptchaFailMode, CaptchaFailMode | undefined, CaptchaFailMode>
  retention_days: number | null
  updated_at: Timestamp | null
  updated_by: string | null
}

export interface LeadSpamTable {
  id: Generated<number>
  list: SpamListName
  email: string
  email_normalized: string
  /** The validated fields, JSON text on write. */
  fields: ColumnType<Record<string, unknown>, string, string>
  reason: SpamReason
  via: string
  received_at: Timestamp
}

export interface LeadSpamCaptchaTokenTable {
  token_sha256: string
  expires_at: Timestamp
}
