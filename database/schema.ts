// The Database type, composed from one interface per table (Kysely's convention).
import type { ColumnType, Generated } from 'kysely'
import type { ApprovalStatus, DefaultDecision, EpochMs, Json, OptionalJson, Outcome, Role, Timestamp } from './column-types.ts'
import type { DecisionVia, McpServerTable } from './mcp-schema.ts'
import type { DecisionRollupStateTable, DecisionRollupTable, LeadDuplicateCountTable } from './report-schema.ts'
import type { LeadListSettingsTable, LeadMailAttemptTable, LeadMailOutboxTable, LeadSubscriptionTable } from './lead-mail-schema.ts'
import type { LeadSpamCaptchaTokenTable, LeadSpamSettingsTable, LeadSpamTable } from './lead-spam-schema.ts'
import type { WebhookDeliveryTable, WebhookFanoutTable, WebhookTable } from './webhook-schema.ts'

export type { ApprovalStatus, DefaultDecision, Role }
export type { WebhookDeliveryTable, WebhookFanoutTable, WebhookTable }

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

export interface OrganizationTable {
  id: string
  name: string
  created_at: Timestamp
  default_decision: Generated<DefaultDecision>
  unknown_agents: Generated<'deny' | 'evaluate'>
  decision_retention_days: Generated<number>
  /** Audit events older than this may be deleted, once an export has covered them. */
  audit_retention_days: Generated<number>
  /** Bumped with every change to the organization's policies, agents or these settings. */
  ruleset_revision: Generated<number>
  updated_at: Timestamp | null
}

/** A non-human actor of one organization; policies match its handle. */
export interface AgentTable {
  agent_id: string
  organization_id: string
  /** Unique per organization: 1–64 of [a-z0-9][a-z0-9._-]*. */
  handle: string
  display_name: Generated<string>
  description: Generated<string>
  owner_user_id: string | null
  /** string → string, at most 32 entries; JSON text on write. */
  labels: ColumnType<Record<string, string>, string | undefined, string>
  status: 'active' | 'suspended' | 'discovered'
  created_at: Timestamp
  updated_at: Timestamp
  last_seen_at: Timestamp | null
}

/** An immutable snapshot of a policy, written by every create, update, archive and rollback. */
export interface PolicyVersionTable {
  policy_id: string
  version: number
  organization_id: string
  name: string
  description: string
  effect: Outcome
  agents: Json
  actions: Json
  resources: Json
  condition: string | null
  approval: OptionalJson
  mode: 'enforce' | 'monitor'
  enabled: boolean
  archived: boolean
  created_at: Timestamp
  created_by: string
  /** Budgets (engine/limits.ts LimitInput[]), JSON text on write. */
  limits: ColumnType<unknown, string | undefined, string>
}

/** One logged decision (partitioned by month of evaluated_at). */
export interface DecisionTable {
  decision_id: string
  organization_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  args: Json
  context: Json
  args_sha256: string
  /** The answer given (allow after a consumed approval). */
  decision: Outcome
  /** What the policies alone decided: what a replay compares with. */
  policy_decision: Outcome
  reasons: Json
  monitor: Json
  errors: Json
  approval_id: string | null
  ruleset_revision: number
  /** "key:<uuid>", "user:<uuid>" or "agent-key:<uuid>": the credential that asked. */
  requested_by: string
  evaluated_at: Timestamp
  /** The writing transaction's id (pg_current_xact_id), set by the database: what seals cover. */
  xid: Generated<number>
  /** null: POST /decisions; 'mcp': the gateway; 'toolhive': the ToolHive authorizer route. */
  via: Generated<DecisionVia | null>
}

/** An approval, bound to the exact action of the decision that created it. */
export interface ApprovalTable {
  approval_id: string
  organization_id: string
  decision_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  args: Json
  context: Json
  args_sha256: string
  /** [{policy_id, version}]: the require_approval policies it comes from. */
  policies: Json
  approvers_required: number
  approver_roles: Json
  use_within_seconds: number
  status: ApprovalStatus
  created_at: Timestamp
  expires_at: Timestamp
  /** Set when approved: the approval must be used before then. */
  use_by: Timestamp | null
  decided_at: Timestamp | null
  consumed_at: Timestamp | null
  consumed_decision_id: string | null
  requested_by: string
  cancelled_by: string | null
}

/** One person's vote on an approval: at most one per user. */
export interface ApprovalVoteTable {
  approval_id: string
  user_id: string
  vote: 'approve' | 'deny'
  note: string | null
  created_at: Timestamp
}

/** The first answer to an idempotency key, per credential, kept 24 hours. */
export interface DecisionIdempotencyTable {
  organization_id: string
  requested_by: string
  idempotency_key: string
  decision_id: string
  /** SHA-256 of the canonical request: the same key with another request is refused. */
  request_sha256: string
  response: Json
  created_at: Timestamp
}

export interface UserTable {
  id: string
  email: string
  /** Trimmed and lower-cased: the sign-in key (unique). */
  email_normalized: string
  /** scrypt$… (see auth/passwords.ts). */
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
  /** Set for a key bound to one agent: it may only act as that agent. */
  agent_id: Generated<string | null>
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

export interface PolicyTable {
  policy_id: string
  organization_id: string
  name: string
  description: string
  effect: Outcome
  /** JSON arrays of strings, written as JSON text. */
  agents: Json
  actions: Json
  resources: Json
  /** The free-form object of the first release, kept for reference; never evaluated. */
  legacy_conditions: OptionalJson
  /** A CEL expression, or null: the policy then applies whenever its patterns match. */
  condition: string | null
  /** For require_approval policies: approvers, roles and timeouts (JSON text on write). */
  approval: OptionalJson
  /** Set by DELETE: the policy no longer applies; its versions stay readable. */
  archived_at: Timestamp | null
  /** Budgets (engine/limits.ts LimitInput[]), JSON text on write. */
  limits: ColumnType<unknown, string | undefined, string>
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
  window_start: EpochMs
  count: number
  /** window_start + the window length, for cleanup. */
  expires_at: EpochMs
}

/** One change, written in the same transaction as the change itself. */
export interface AuditEventTable {
  /** bigint, increasing (read as a number: int8 is parsed to number on both drivers). */
  event_id: Generated<number>
  organization_id: string
  occurred_at: Timestamp
  actor_type: 'user' | 'key' | 'agent' | 'operator' | 'system'
  actor_id: string | null
  type: string
  target_type: string
  target_id: string | null
  data: ColumnType<unknown, string | undefined, string>
  request_id: string | null
  /** The writing transaction's id (pg_current_xact_id), set by the database: what seals cover. */
  xid: Generated<number>
}

/** A link of one organization's seal chain over events and decisions with xid in [xid_from, xid_to). */
export interface AuditSealTable {
  organization_id: string
  seal_id: number
  xid_from: number
  xid_to: number
  events: number
  decisions: number
  events_sha256: string
  decisions_sha256: string
  prev_sha256: string
  sha256: string
  sealed_at: Timestamp
}

export interface AuditExportTable {
  organization_id: string
  through_event_id: number
  format: string
  exported_at: Timestamp
  exported_by: string
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
  policy_versions: PolicyVersionTable
  agents: AgentTable
  decisions: DecisionTable
  decision_idempotency: DecisionIdempotencyTable
  approvals: ApprovalTable
  approval_votes: ApprovalVoteTable
  rate_limit_counters: RateLimitCounterTable
  audit_events: AuditEventTable
  audit_seals: AuditSealTable
  audit_exports: AuditExportTable
  webhooks: WebhookTable
  webhook_deliveries: WebhookDeliveryTable
  webhook_fanout: WebhookFanoutTable
  mcp_servers: McpServerTable
  decision_rollup: DecisionRollupTable
  decision_rollup_state: DecisionRollupStateTable
  lead_duplicate_counts: LeadDuplicateCountTable
  lead_list_settings: LeadListSettingsTable
  lead_subscriptions: LeadSubscriptionTable
  lead_mail_outbox: LeadMailOutboxTable
  lead_mail_attempts: LeadMailAttemptTable
  lead_spam_settings: LeadSpamSettingsTable
  lead_spam: LeadSpamTable
  lead_spam_captcha_tokens: LeadSpamCaptchaTokenTable
  budget_counters: BudgetCounterTable
  budget_reservations: BudgetReservationTable
}

/** One limit's counter for one scope (storage/budgets.ts). */
export interface BudgetCounterTable {
  organization_id: string
  counter_key: string
  policy_id: string
  limit_name: string
  agent_id: string | null
  resource: string | null
  limit_window: Json
  window_start: Timestamp
  used: number
  buckets: OptionalJson
  reached_at: Timestamp | null
  updated_at: Timestamp
}

/** What a pending approval holds of a counter, released exactly once on deny, expiry or cancel. */
export interface BudgetReservationTable {
  approval_id: string
  organization_id: string
  counter_key: string
  slot: Timestamp
  amount: number
}
