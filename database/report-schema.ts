// Tables of the reports (migration 2026-12-06T02-reports): the decision log's hourly rollup, how far
// it has counted, and the lead submissions refused as duplicates.
import type { Timestamp } from './column-types.ts'

/** Decisions of one organization, UTC hour, dimension, key and outcome (storage/report-rollup.ts). */
export interface DecisionRollupTable {
  organization_id: string
  /** outcome | agent | action | policy | shadow | shadow_change */
  dimension: string
  hour: Timestamp
  key: string
  decision: string
  count: string | number
}

/** Every decision of the organization with xid below xid_upto is counted in decision_rollup. */
export interface DecisionRollupStateTable {
  organization_id: string
  xid_upto: string | number
}

/** Lead submissions answered 409 (already registered), per list and UTC hour. */
export interface LeadDuplicateCountTable {
  list: string
  hour: Timestamp
  count: string | number
}
