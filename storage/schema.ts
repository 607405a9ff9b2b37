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

export interface Database {
  demo_requests: DemoRequestTable
  newsletter_subscriptions: NewsletterSubscriptionTable
}
