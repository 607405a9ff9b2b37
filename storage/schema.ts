// The Database type, composed from one interface per table (Kysely's convention).
import type { ColumnType, Generated } from 'kysely'

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>

export interface DemoRequestTable {
  id: Generated<number>
  /** As submitted, trimmed. */
  email: string
  /** Trimmed and lower-cased: the duplicate key (unique). */
  email_normalized: string
  first_name: string
  last_name: string
  company: string
  linkedin: string
  phone: string | null
  source: string | null
  analytics_distinct_id: string | null
  received_at: Timestamp
}

export interface NewsletterSubscriptionTable {
  id: Generated<number>
  email: string
  email_normalized: string
  source: string | null
  analytics_distinct_id: string | null
  /** The path that was posted to: "/newsletter" or the legacy "/waitlist". */
  via: string
  received_at: Timestamp
}

export type { Role } from '../domain/roles.ts'
import type { Role } from '../domain/roles.ts'

export interface OrganizationTable {
  id: string
  name: string
  created_at: Timestamp
}

export interface UserTable {
  id: string
  email: string
  /** Trimmed and lower-cased: the sign-in key (unique). */
  email_normalized: string
  /** scrypt$… (see storage/passwords.ts). */
  password_hash: string
  created_at: Timestamp
}

export interface MembershipTable {
  user_id: string
  organization_id: string
  role: Role
  created_at: Timestamp
}

export interface ApiKeyTable {
  id: string
  organization_id: string
  name: string
  role: Role
  /** SHA-256 of the whole secret, lower-case hex (unique). The secret itself is never stored. */
  secret_hash: string
  /** The first characters of the secret, shown in listings to recognise a key. */
  display_prefix: string
  /** The user whose current role caps the key (also set when a key created it); null: an operator's key. */
  created_by_user_id: string | null
  created_by_key_id: string | null
  /**
   * The key whose revocation revokes this one: the issuing key, re-pointed to its successor when
   * that key is rotated. Null for keys issued by a user session or the operator.
   */
  issuer_key_id: Generated<string | null>
  created_at: Timestamp
  expires_at: Timestamp | null
  revoked_at: Timestamp | null
  last_used_at: Timestamp | null
  replaced_by: string | null
}

/** A pending or settled invitation to join an organization; the secret is kept only as SHA-256. */
export interface InvitationTable {
  id: string
  organization_id: string
  /** As the inviter typed it, trimmed. */
  email: string
  email_normalized: string
  role: Role
  secret_hash: string
  /** "user:<uuid>" or "key:<uuid>". */
  invited_by: string
  created_at: Timestamp
  expires_at: Timestamp
  accepted_at: Timestamp | null
  accepted_user_id: string | null
  revoked_at: Timestamp | null
  failed_attempts: Generated<number>
}

export interface TokenFamilyTable {
  id: string
  organization_id: string
  user_id: string | null
  api_key_id: string | null
  role: Role
  created_at: Timestamp
  revoked_at: Timestamp | null
}

export interface AccessTokenTable {
  token_hash: string
  family_id: string
  created_at: Timestamp
  expires_at: Timestamp
}

export interface RefreshTokenTable {
  token_hash: string
  family_id: string
  created_at: Timestamp
  expires_at: Timestamp
  spent_at: Timestamp | null
}

type Json = ColumnType<unknown, string, string>

export interface PolicyTable {
  policy_id: string
  organization_id: string
  name: string
  description: string
  effect: 'allow' | 'deny' | 'require_approval'
  /** JSON arrays of strings, written as JSON text. */
  agents: Json
  actions: Json
  resources: Json
  conditions: ColumnType<unknown, string | null, string | null>
  mode: 'enforce' | 'monitor'
  enabled: boolean
  version: number
  created_at: Timestamp
  updated_at: Timestamp
  created_by: string
}

/** One rate-limit window's count summed over every process (storage/ratelimits.ts). */
export interface RateLimitCounterTable {
  limiter: string
  key: string
  /** ms since the epoch; int8 parsed as a number on both drivers. */
  window_start: number
  count: number
  /** window_start + the window length, for cleanup. */
  expires_at: number
}

export interface Database {
  demo_requests: DemoRequestTable
  newsletter_subscriptions: NewsletterSubscriptionTable
  organizations: OrganizationTable
  users: UserTable
  memberships: MembershipTable
  api_keys: ApiKeyTable
  invitations: InvitationTable
  token_families: TokenFamilyTable
  access_tokens: AccessTokenTable
  refresh_tokens: RefreshTokenTable
  policies: PolicyTable
  rate_limit_counters: RateLimitCounterTable
}
