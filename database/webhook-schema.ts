// The webhook tables: endpoints, the delivery log and the fan-out cursor (database/schema.ts composes them).
import type { ColumnType, Generated } from 'kysely'
import type { Timestamp } from './column-types.ts'

/** A webhook endpoint of one organization. */
export interface WebhookTable {
  webhook_id: string
  organization_id: string
  url: string
  /** The subscribed types (JSON array of strings). */
  event_types: ColumnType<string[], string, string>
  description: Generated<string>
  /** The signing secret itself (whsec_…); never returned after creation. */
  secret: string
  status: Generated<'active' | 'disabled'>
  created_at: Timestamp
  created_by: string
  created_xid: Generated<number>
  disabled_at: Timestamp | null
  disabled_reason: string | null
  failing_since: Timestamp | null
  lease_until: Timestamp | null
}

/** One event for one endpoint, and how its delivery went. */
export interface WebhookDeliveryTable {
  delivery_id: string
  seq: Generated<number>
  webhook_id: string
  organization_id: string
  event_id: number | null
  decision_id: string | null
  message_id: string
  type: string
  occurred_at: Timestamp
  payload: string
  status: Generated<'pending' | 'delivered' | 'failed'>
  attempts: Generated<number>
  next_attempt_at: Timestamp | null
  last_attempt_at: Timestamp | null
  last_status_code: number | null
  last_error: string | null
  delivered_at: Timestamp | null
  created_at: Timestamp
  replay_of: string | null
}

/** How far the fan-out has read the outbox: every transaction below xid_through. */
export interface WebhookFanoutTable {
  singleton: Generated<boolean>
  xid_through: number
}
