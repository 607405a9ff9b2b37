// The seal format over the audit log, no I/O: the hashed form of a sealed row, the digests of a
// run of rows and a seal's own hash. The sealer (storage/audit-seal.ts) and the verifier
// (services/audit-verify.ts) both hash through here, so they can never disagree on the bytes.
//
// A seal covers, for one organization, every audit event and every decision written by a
// transaction whose id (xid) lies in [xid_from, xid_to). Seals form a chain:
//
//   events_sha256    = SHA-256 of the canonical JSON (RFC 8785) array of the events, by event_id
//   decisions_sha256 = the same over the decisions, by (xid, decision_id)
//   sha256           = SHA-256(prev_sha256 ‖ events_sha256 ‖ decisions_sha256 ‖ canonical JSON of
//                      the seal's metadata), prev_sha256 being the previous seal's sha256 (64
//                      zeros for seal 1)
//
// The metadata also holds, per kind, an order-free digest of the rows (the sum modulo 2^256 of
// the SHA-256 of each row without its id): it is stored nowhere else, so a verifier that finds a
// different ordered digest can tell rows that were only moved between ids (the sum still gives
// the seal's hash) from rows that were changed. One function per kind turns a row into the JSON
// that is hashed (`eventSealJson`, `decisionSealJson`).
import { createHash } from 'node:crypto'
import { canonicalJson } from './canonical.ts'

export const ZERO_SHA256 = '0'.repeat(64)
const MOD = 1n << 256n

/** An audit event as the sealer reads it: every column, the timestamp as microsecond ISO text. */
export interface SealedEventRow {
  event_id: number | string
  organization_id: string
  occurred_at: string
  actor_type: string
  actor_id: string | null
  type: string
  target_type: string
  target_id: string | null
  data: unknown
  request_id: string | null
  xid: number | string
}

/** A decision as the sealer reads it: every column, the timestamp as microsecond ISO text. */
export interface SealedDecisionRow {
  decision_id: string
  organization_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  args: unknown
  context: unknown
  args_sha256: string
  decision: string
  policy_decision: string
  reasons: unknown
  monitor: unknown
  errors: unknown
  approval_id: string | null
  ruleset_revision: number
  requested_by: string
  evaluated_at: string
  xid: number | string
  /** Which door asked (null: POST /decisions); absent from rows read before the column existed. */
  via?: string | null
}

/** The hashed form of an audit event: every column, the timestamp as microsecond ISO text. */
export function eventSealJson(row: SealedEventRow): Record<string, unknown> {
  return {
    event_id: Number(row.event_id),
    organization_id: row.organization_id,
    occurred_at: row.occurred_at,
    actor_type: row.actor_type,
    actor_id: row.actor_id,
    type: row.type,
    target_type: row.target_type,
    target_id: row.target_id,
    data: row.data,
    request_id: row.request_id,
    xid: Number(row.xid),
  }
}

/** The hashed form of a decision: every column, the timestamp as microsecond ISO text. */
export function decisionSealJson(row: SealedDecisionRow): Record<string, unknown> {
  return {
    decision_id: row.decision_id,
    organization_id: row.organization_id,
    agent_id: row.agent_id,
    agent_handle: row.agent_handle,
    action: row.action,
    resource: row.resource,
    args: row.args,
    context: row.context,
    args_sha256: row.args_sha256,
    decision: row.decision,
    policy_decision: row.policy_decision,
    reasons: row.reasons,
    monitor: row.monitor,
    errors: row.errors,
    approval_id: row.approval_id,
    ruleset_revision: Number(row.ruleset_revision),
    requested_by: row.requested_by,
    evaluated_at: row.evaluated_at,
    xid: Number(row.xid),
    // Only when set, so every decision sealed before the column existed hashes as it did.
    ...(row.via == null ? {} : { via: row.via }),
  }
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/**
 * The canonical JSON (RFC 8785) of a flat row, member by member: keys in UTF-16 order, scalars as
 * JSON.stringify writes them (the same as JCS for finite numbers and well-formed strings, which is
 * all a database row holds), nested JSON through canonicalJson. The same text canonicalJson(row)
 * gives (tests/http/audit-seal.test.ts checks it), without walking the whole row generically.
 */
function canonicalMembers(row: Record<string, unknown>, keys: readonly string[]): string[] {
  return keys.map((key) => {
    const value = row[key]
    let text: string
    if (value === null || typeof value === 'string' || typeof value === 'boolean') text = JSON.stringify(value)
    else if (typeof value === 'number' && Number.isFinite(value)) text = JSON.stringify(value)
    else if (Array.isArray(value) && value.length === 0) text = '[]'
    else text = canonicalJson(value)
    return `${JSON.stringify(key)}:${text}`
  })
}

/** canonicalJson(row) for a row of the two hashed kinds (exported for the test that compares them). */
export function canonicalRow(row: Record<string, unknown>): string {
  return `{${canonicalMembers(row, Object.keys(row).sort()).join(',')}}`
}

/** One kind's digests over a run of rows: how many, the ordered digest and the order-free one. */
export interface RunDigestResult {
  count: number
  sha256: string
  set: string
}

/** The ordered digest (of the canonical JSON array, written piece by piece) and the order-free sum. */
export class RunDigest {
  private readonly ordered = createHash('sha256')
  private sum = 0n
  private keys: string[] | null = null
  private at: number | null = null
  count = 0

  constructor(private readonly idKey: string) {}

  add(row: Record<string, unknown>): void {
    // Every row of a kind has the same keys (eventSealJson / decisionSealJson).
    const keys = (this.keys ??= Object.keys(row).sort())
    const at = (this.at ??= keys.indexOf(this.idKey))
    const members = canonicalMembers(row, keys)
    // One row at a time into the running hash: nothing larger than a row is ever built.
    this.ordered.update(`${this.count === 0 ? '[' : ','}{${members.join(',')}}`)
    members.splice(at, 1)
    this.sum = (this.sum + BigInt(`0x${sha256Hex(`{${members.join(',')}}`)}`)) % MOD
    this.count++
  }

  finish(): RunDigestResult {
    if (this.count === 0) this.ordered.update('[')
    this.ordered.update(']')
    return { count: this.count, sha256: this.ordered.digest('hex'), set: this.sum.toString(16).padStart(64, '0') }
  }
}

export interface RangeDigest {
  events: RunDigestResult
  decisions: RunDigestResult
}

export interface SealFields {
  organization_id: string
  seal_id: number
  xid_from: number
  xid_to: number
  events: number
  decisions: number
  events_sha256: string
  decisions_sha256: string
  prev_sha256: string
  sealed_at: Date
}

export interface Seal extends SealFields {
  sha256: string
}

/** A seal's own hash: the chain link over the previous hash, the two digests and the metadata. */
export function sealSha256(seal: SealFields, sets: { events: string; decisions: string }): string {
  const meta = canonicalJson({
    organization_id: seal.organization_id,
    seal_id: seal.seal_id,
    xid_from: seal.xid_from,
    xid_to: seal.xid_to,
    events: seal.events,
    decisions: seal.decisions,
    events_set_sha256: sets.events,
    decisions_set_sha256: sets.decisions,
    sealed_at: seal.sealed_at.toISOString(),
  })
  return sha256Hex(seal.prev_sha256 + seal.events_sha256 + seal.decisions_sha256 + meta)
}
