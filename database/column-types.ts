// The column types the tables of database/schema.ts share: how a column reads and writes through
// Kysely (what a select returns, what an insert and an update take), and the value sets of the
// enumerated columns.
import type { ColumnType } from 'kysely'

export type { Role } from '../domain/roles.ts'

/**
 * timestamptz: read as a Date, which both dialects parse it to (database/connect.ts), so
 * repositories use rows as they come; written as a Date (or ISO 8601 text).
 */
export type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>

/** json/jsonb: read parsed; written as JSON text (pg would send a JS array as a PostgreSQL array). */
export type Json = ColumnType<unknown, string, string>

/** A nullable JSON column that an insert may leave out. */
export type OptionalJson = ColumnType<unknown, string | null | undefined, string | null>

/** Milliseconds since the epoch in an int8 column (read as a number on both drivers). */
export type EpochMs = number

/** What a policy, a decision or the organization's default decides. */
export type Outcome = 'allow' | 'deny' | 'require_approval'

export type DefaultDecision = Outcome

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled' | 'consumed'
