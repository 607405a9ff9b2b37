// The lead-mail tables (migration 2026-12-06T03-lead-mail): list settings, newsletter consents,
// the mail outbox and its attempt log.
import type { ColumnType, Generated } from 'kysely'
import type { Json, Timestamp } from './column-types.ts'

export type LeadListName = 'demo-requests' | 'newsletter'
export type LeadSubscriptionStatus = 'pending' | 'active' | 'unsubscribed' | 'expired'
export type LeadMailKind = 'notification' | 'confirmation'
export type LeadMailStatus = 'pending' | 'sent' | 'failed' | 'cancelled'

export interface LeadListSettingsTable {
  list: LeadListName
  /** A JSON array of addresses. */
  notify: ColumnType<unknown, string | undefined, string>
  double_opt_in: ColumnType<boolean, boolean | undefined, boolean>
  consent_text: string | null
  consent_version: string | null
  confirm_ttl_seconds: ColumnType<number, number | undefined, number>
  updated_at: Timestamp | null
  updated_by: string | null
}

export interface LeadSubscriptionTable {
  id: Generated<number>
  lead_id: number | null
  email: string | null
  email_normalized: string | null
  status: LeadSubscriptionStatus
  consent_version: string | null
  requested_at: Timestamp
  requested_ip: string | null
  expires_at: Timestamp | null
  confirmation_sent_at: Timestamp | null
  confirmed_at: Timestamp | null
  confirmed_ip: string | null
  unsubscribed_at: Timestamp | null
}

export interface LeadMailOutboxTable {
  id: Generated<number>
  kind: LeadMailKind
  list: LeadListName
  email_normalized: string
  lead_id: number | null
  subscription_id: number | null
  recipients: Json
  reply_to: string | null
  subject: string
  body: string
  headers: ColumnType<unknown, string | undefined, string>
  status: ColumnType<LeadMailStatus, LeadMailStatus | undefined, LeadMailStatus>
  attempts: ColumnType<number, number | undefined, number>
  created_at: Timestamp
  next_attempt_at: Timestamp
  locked_until: Timestamp | null
  sent_at: Timestamp | null
  last_error: string | null
}

export interface LeadMailAttemptTable {
  id: Generated<number>
  outbox_id: number
  attempt: number
  attempted_at: Timestamp
  ok: boolean
  detail: string
}
