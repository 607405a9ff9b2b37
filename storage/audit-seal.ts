// Seals over the audit log, and their verification.
//
// A seal covers, for one organization, every audit event and every decision written by a
// transaction whose id (xid) lies in [xid_from, xid_to). xid_to is the oldest transaction still
// running when the sealer looked (the xmin of its snapshot): every transaction below it has ended,
// so the sealed set can never change again without someone editing rows. Seals form a chain:
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
// that is hashed (`eventSealJson`, `decisionSealJson`), used by both the sealer and the verifier.
//
// Work per seal is bounded: the rows are read and hashed in pages, and a range holding more than
// `maxRows` rows is cut at a lower xid (every xid below the snapshot's xmin is final, so any lower
// boundary is as good as the xmin itself); the rest goes into the next seal.
import { createHash } from 'node:crypto'
import { sql, type Kysely, type Transaction } from 'kysely'
import { canonicalJson } from '../engine/canonical.ts'
import type { Database } from '../database/schema.ts'
import { turn } from '../database/turn.ts'

export const ZERO_SHA256 = '0'.repeat(64)
/**
 * Rows per read while a seal hashes. On PGlite a read runs on this process's thread and holds every
 * request meanwhile: about 1 ms a statement plus 11 µs a decision, so 25 rows hold it about 1.3 ms
 * (100 rows: 2.1 ms). Measured on two PGlite servers at 750 decisions/s, pages of 100 gave POST
 * /decisions a p99 of 23 ms and pages of 25 one of 8 ms (sealer off: 6 ms).
 */
const SEAL_PAGE_ROWS = 25
/** Rows per read while verifying: an operator's check, where fewer statements matter more. */
const VERIFY_PAGE_ROWS = 100
/** Rows per seal unless told otherwise (a single transaction larger than this is sealed whole). */
export const DEFAULT_MAX_ROWS_PER_SEAL = 50_000
const MOD = 1n << 256n
/** Microsecond ISO 8601 in UTC: what a timestamp becomes in the hashed JSON, the same on both drivers. */
const ISO = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'

type Db = Kysely<Database> | Transaction<Database>

interface EventRow {
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

interface DecisionRow {
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
}

/** The hashed form of an audit event: every column, the timestamp as microsecond ISO text. */
export function eventSealJson(row: EventRow): Record<string, unknown> {
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
export function decisionSealJson(row: DecisionRow): Record<string, unknown> {
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
  }
}

function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/**
 * The canonical JSON (RFC 8785) of a flat row, member by member: keys in UTF-16 order, scalars as
 * JSON.stringify writes them (the same as JCS for finite numbers and well-formed strings, which is
 * all a database row holds), nested JSON through canonicalJson. The same text canonicalJson(row)
 * gives (tests/audit-seal.test.ts checks it), without walking the whole row generically.
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

/** The ordered digest (of the canonical JSON array, written piece by piece) and the order-free sum. */
class RunDigest {
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

  finish(): { count: number; sha256: string; set: string } {
    if (this.count === 0) this.ordered.update('[')
    this.ordered.update(']')
    return { count: this.count, sha256: this.ordered.digest('hex'), set: this.sum.toString(16).padStart(64, '0') }
  }
}

export interface RangeDigest {
  events: { count: number; sha256: string; set: string }
  decisions: { count: number; sha256: string; set: string }
}

/**
 * Reads pages one after another and hashes each before asking for the next, with a turn of the
 * event loop before and after every read: on PGlite a read runs on this thread, so requests that
 * arrived meanwhile get the thread and the database between the sealer's steps. (Asking for the
 * next page before hashing the current one, to overlap the two, put that read ahead of every such
 * request.)
 */
async function paged<Row>(pageRows: number, read: (after: Row | null) => Promise<Row[]>, each: (row: Row) => void): Promise<void> {
  let after: Row | null = null
  for (;;) {
    await turn()
    const rows: Row[] = await read(after)
    await turn()
    await hashInSlices(rows, each)
    if (rows.length < pageRows) return
    after = rows[rows.length - 1]!
  }
}

/**
 * Longest stretch of hashing between two turns of the event loop. A row takes 10–30 µs: a page of
 * 2,000 hashed in one go held every request of this process for 20–60 ms. In slices, and with
 * short reads (SEAL_PAGE_ROWS), a request waits for the sealer about a millisecond at most.
 */
const SLICE_MS = 0.5

async function hashInSlices<Row>(rows: readonly Row[], each: (row: Row) => void): Promise<void> {
  let sliceStarted = performance.now()
  for (let i = 0; i < rows.length; i++) {
    each(rows[i]!)
    if ((i & 7) === 7 && performance.now() - sliceStarted > SLICE_MS) {
      await turn()
      sliceStarted = performance.now()
    }
  }
}

/**
 * A page of rows as one JSON text: `json_agg` of one array per row, in the columns' order. Each
 * value is what the driver would give for the column read alone (jsonb as its JSON, ids and text
 * as strings, integers as numbers, timestamps as microsecond ISO text), so the hashed form is the
 * same; but one text value is parsed by JSON.parse where a row of 19 columns went through the
 * driver's field-by-field parsing. On PGlite, where a read runs on this process's thread, a page
 * of 100 decisions read this way held it about 2 ms instead of 4.
 */
async function readPage(db: Db, query: ReturnType<typeof sql<{ page: string | null }>>): Promise<unknown[][]> {
  const page = (await query.execute(db)).rows[0]?.page
  return page == null ? [] : (JSON.parse(page) as unknown[][])
}

const EVENT_COLUMNS: readonly (keyof EventRow)[] = ['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'request_id', 'xid']
const DECISION_COLUMNS: readonly (keyof DecisionRow)[] = [
  'decision_id', 'organization_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'args_sha256', 'decision',
  'policy_decision', 'reasons', 'monitor', 'errors', 'approval_id', 'ruleset_revision', 'requested_by', 'evaluated_at', 'xid',
]

function fromTuple<Row>(columns: readonly string[], tuple: unknown[]): Row {
  const row: Record<string, unknown> = {}
  for (let i = 0; i < columns.length; i++) row[columns[i]!] = tuple[i]
  return row as Row
}

/** Hashes one organization's events and decisions with xid in [from, to), a page at a time. */
export async function digestRange(db: Db, organizationId: string, from: number, to: number, pageRows = VERIFY_PAGE_ROWS): Promise<RangeDigest> {
  const events = new RunDigest('event_id')
  await paged<EventRow>(
    pageRows,
    async (after) =>
      (
        await readPage(
          db,
          sql<{ page: string | null }>`select json_agg(json_build_array(event_id, organization_id,
            to_char(occurred_at at time zone 'UTC', ${ISO}), actor_type, actor_id, type, target_type, target_id, data, request_id, xid) order by event_id)::text as page
          from (select * from audit_events where organization_id = ${organizationId} and xid >= ${from} and xid < ${to} and event_id > ${after ? Number(after.event_id) : -1}
            order by event_id limit ${pageRows}) e`,
        )
      ).map((tuple) => fromTuple<EventRow>(EVENT_COLUMNS, tuple)),
    (row) => events.add(eventSealJson(row)),
  )
  const decisions = new RunDigest('decision_id')
  await paged<DecisionRow>(
    pageRows,
    async (after) =>
      (
        await readPage(
          db,
          sql<{ page: string | null }>`select json_agg(json_build_array(decision_id, organization_id, agent_id, agent_handle, action, resource, args,
            context, args_sha256, decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by,
            to_char(evaluated_at at time zone 'UTC', ${ISO}), xid) order by xid, decision_id)::text as page
          from (select * from decisions where organization_id = ${organizationId} and xid >= ${from} and xid < ${to}
            ${after ? sql`and (xid, decision_id) > (${Number(after.xid)}, ${after.decision_id}::uuid)` : sql``}
            order by xid, decision_id limit ${pageRows}) d`,
        )
      ).map((tuple) => fromTuple<DecisionRow>(DECISION_COLUMNS, tuple)),
    (row) => decisions.add(decisionSealJson(row)),
  )
  return { events: events.finish(), decisions: decisions.finish() }
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

export interface Seal extends SealFields {
  sha256: string
}

export type SealOutcome = { sealed: Seal } | { skipped: 'busy' | 'nothing_new' }

/**
 * Seals one organization's new rows, if any. Three steps, each a single statement, so that no
 * transaction stays open while rows are hashed:
 *   1. The snapshot's xmin, the chain's head and the range to seal, in one read. Every
 *      transaction below the xmin had ended when the statement's snapshot was taken, so the
 *      range's rows are final: reading them later gives the same rows.
 *   2. The range is read and hashed, a page per statement.
 *   3. The seal is appended as the head's successor (seal_id + 1). If another sealer (any process)
 *      appended that seal_id first, the primary key refuses this one and the result is dropped
 *      ('busy'): two sealers may hash the same range at the same time, but only one seal is ever
 *      made, and a seal always links to the head it was computed from.
 * Between steps and pages the event loop turns. That matters on PGlite: it runs on this thread,
 * and statements awaited one after another never yield to it, so a sealer's consecutive statements
 * held every request of the process (10–13 ms per pass, measured), and a transaction held across
 * the hashing held them for the whole pass (25–50 ms): both made POST /decisions' p99 a multiple
 * of POST /demo-request's.
 */
export async function sealOrganization(db: Kysely<Database>, organizationId: string, now: Date, options: { maxRows?: number } = {}): Promise<SealOutcome> {
  const maxRows = options.maxRows ?? DEFAULT_MAX_ROWS_PER_SEAL
  const head = await rangeHead(db, organizationId, maxRows)
  if (head.first === null) return { skipped: 'nothing_new' }
  const from = head.from
  let to = head.xmin
  if (head.cut !== null) {
    // The rows below the cut number at most maxRows; one transaction is never split.
    to = head.cut > head.first ? head.cut : head.cut + 1
  }
  await turn()
  const digest = await digestRange(db, organizationId, from, to, SEAL_PAGE_ROWS)
  const fields: SealFields = {
    organization_id: organizationId,
    seal_id: head.sealId === null ? 1 : head.sealId + 1,
    xid_from: from,
    xid_to: to,
    events: digest.events.count,
    decisions: digest.decisions.count,
    events_sha256: digest.events.sha256,
    decisions_sha256: digest.decisions.sha256,
    prev_sha256: head.sha256 ?? ZERO_SHA256,
    sealed_at: now,
  }
  const seal: Seal = { ...fields, sha256: sealSha256(fields, { events: digest.events.set, decisions: digest.decisions.set }) }
  const appended = await db
    .insertInto('audit_seals')
    .values(seal)
    .onConflict((oc) => oc.columns(['organization_id', 'seal_id']).doNothing())
    .returning('seal_id')
    .executeTakeFirst()
  return appended ? { sealed: seal } : { skipped: 'busy' }
}

/** Rows per statement while finding a range's bounds: a statement of about a millisecond on PGlite. */
const HEAD_PAGE_ROWS = 200

interface RangeHead {
  /** The snapshot's xmin: every transaction below it has ended. */
  xmin: number
  sealId: number | null
  sha256: string | null
  /** The previous seal's xid_to (0 for the first seal). */
  from: number
  /** The lowest xid with a row in [from, xmin), or null when there is none. */
  first: number | null
  /** When [from, xmin) holds more than maxRows rows: the xid of the row after the first maxRows. */
  cut: number | null
}

/**
 * Where the next seal starts and ends. The rows' xids are counted a page of HEAD_PAGE_ROWS at a
 * time per kind, with a turn of the event loop between statements. It used to be one statement
 * that gathered up to maxRows + 1 xids of each kind (up to 50,001). On PGlite that statement ran
 * on this process's thread for as long as the rows since the last pass took to scan: a median of
 * 12 ms and a max of 43 ms at 1,900 decisions a second. POST /decisions' p99 was set by it: 10–31
 * ms, against 3–5 ms with the sealer off.
 */
async function rangeHead(db: Kysely<Database>, organizationId: string, maxRows: number): Promise<RangeHead> {
  const { rows } = await sql<{ xmin: string; seal_id: string | null; sha256: string | null; from: string }>`with
      head as materialized (select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as xmin),
      last as materialized (select seal_id, xid_to, sha256 from audit_seals where organization_id = ${organizationId} order by seal_id desc limit 1)
    select head.xmin::text as xmin, (select seal_id from last)::text as seal_id, (select sha256 from last) as sha256,
      coalesce((select xid_to from last), 0)::text as "from"
    from head`.execute(db)
  const row = rows[0]!
  const xmin = Number(row.xmin)
  const from = Number(row.from)
  // Rows per xid of both kinds, each kind up to its first maxRows + 1 rows (whole xids): the row
  // after the first maxRows of both, in xid order, lies among them.
  const perXid = new Map<number, number>()
  for (const table of ['audit_events', 'decisions'] as const) {
    let cursor = from
    let seen = 0
    while (seen <= maxRows) {
      await turn()
      // Aliased apart from the column: "order by xid" would otherwise sort the text.
      const page = await sql<{ x: string }>`select xid::text as x from ${sql.table(table)}
        where organization_id = ${organizationId} and xid >= ${cursor} and xid < ${xmin} order by xid limit ${HEAD_PAGE_ROWS}`.execute(db)
      const xids = page.rows.map((r) => Number(r.x))
      const last = xids.at(-1)
      if (last === undefined) break
      if (xids.length < HEAD_PAGE_ROWS) {
        for (const xid of xids) add(perXid, xid, 1)
        break
      }
      if (xids[0] === last) {
        // One transaction wrote more rows than a page: count it whole.
        const whole = await sql<{ n: string }>`select count(*)::text as n from ${sql.table(table)}
          where organization_id = ${organizationId} and xid = ${last}`.execute(db)
        const n = Number(whole.rows[0]!.n)
        add(perXid, last, n)
        seen += n
        cursor = last + 1
        continue
      }
      // The last xid of a full page may go on in the next page: it is counted there.
      for (const xid of xids) {
        if (xid === last) break
        add(perXid, xid, 1)
        seen++
      }
      cursor = last
    }
  }
  const ordered = [...perXid.keys()].sort((a, b) => a - b)
  let cut: number | null = null
  let total = 0
  for (const xid of ordered) {
    total += perXid.get(xid)!
    if (total > maxRows) {
      cut = xid
      break
    }
  }
  return { xmin, sealId: row.seal_id === null ? null : Number(row.seal_id), sha256: row.sha256, from, first: ordered[0] ?? null, cut }
}

function add(counts: Map<number, number>, xid: number, n: number): void {
  counts.set(xid, (counts.get(xid) ?? 0) + n)
}

/** The organization's newest seal: the head of its chain. */
function lastSeal(db: Db, organizationId: string) {
  return db
    .selectFrom('audit_seals')
    .select(['seal_id', 'xid_to', 'sha256', 'sealed_at'])
    .where('organization_id', '=', organizationId)
    .orderBy('seal_id', 'desc')
    .limit(1)
    .executeTakeFirst()
}

/**
 * Organizations that may have rows past their last seal: every organization id found in the
 * audit log (an index skip scan) or the organizations table, with a row at or above its last
 * seal's xid_to. Each organization's newest xid is one step down an index (max() reads it from
 * the end of (organization_id, xid)); an `exists` here let the planner pick a scan of every
 * decision per organization once one organization held most of them.
 */
export async function organizationsToSeal(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`with recursive logged as (
      (select organization_id as id from audit_events order by organization_id limit 1)
      union all
      select (select organization_id from audit_events where organization_id > logged.id order by organization_id limit 1) from logged where logged.id is not null
    ), orgs as (
      select id from logged where id is not null union select id from organizations
    )
    select o.id::text as id from orgs o
      cross join lateral (select coalesce((select xid_to from audit_seals s where s.organization_id = o.id order by seal_id desc limit 1), 0) as xid_to) l
    where (select max(e.xid) from audit_events e where e.organization_id = o.id) >= l.xid_to
       or (select max(d.xid) from decisions d where d.organization_id = o.id) >= l.xid_to
    order by 1`.execute(db)
  return rows.map((row) => row.id)
}

/** One sealing pass: every organization with new rows gets at most one seal. Returns the seals made. */
export async function sealAll(db: Kysely<Database>, now: Date, options: { maxRows?: number } = {}): Promise<Seal[]> {
  const made: Seal[] = []
  for (const organizationId of await organizationsToSeal(db)) {
    await turn()
    const outcome = await sealOrganization(db, organizationId, now, options)
    if ('sealed' in outcome) made.push(outcome.sealed)
  }
  return made
}

export interface AuditSealer {
  /** Stops the timer and settles once the pass under way (if any) has finished. */
  stop(): Promise<void>
}

/** Runs a sealing pass every `intervalMs` (never two at once in this process); stop() ends it. */
export function startAuditSealer(db: Kysely<Database>, clock: () => number, intervalMs: number, onError: (error: unknown) => void): AuditSealer {
  let running: Promise<void> | null = null
  let stopped = false
  const pass = () => {
    if (running || stopped) return
    running = (async () => {
      try {
        // A backlog larger than one seal was cut: seal the rest now rather than a tick later.
        for (let round = 0; round < 10 && !stopped; round++) {
          const made = await sealAll(db, new Date(clock()))
          if (!made.some((seal) => seal.events + seal.decisions >= DEFAULT_MAX_ROWS_PER_SEAL)) break
        }
      } catch (error) {
        onError(error)
      } finally {
        running = null
      }
    })()
  }
  const timer = setInterval(pass, intervalMs)
  timer.unref?.()
  return {
    async stop() {
      stopped = true
      clearInterval(timer)
      await running
    },
  }
}

// ---------------------------------------------------------------------------------------------
// Verification

export type ProblemKind = 'edited' | 'deleted' | 'inserted' | 'reordered' | 'seal_removed' | 'seal_edited'

export interface VerifyProblem {
  kind: ProblemKind
  seal_id: number
  /** Which rows the problem is in: events or decisions (absent for a problem of the seal itself). */
  rows?: 'events' | 'decisions'
  message: string
}

export interface LatestSeal {
  seal_id: number
  sha256: string
  sealed_at: Date
}

export type VerifyResult =
  | {
      ok: true
      seals: number
      /** Events and decisions recomputed from their rows. */
      events: number
      decisions: number
      /** The last seal checked (null: none yet). */
      through_seal_id: number | null
      latest_seal: LatestSeal | null
      /** Seals older than the audit prune's through_seal_id: only their chain links were checked. */
      pruned_seals: number
      /** Seals whose decisions were removed by decision retention (not checked against rows). */
      decisions_pruned_seals: number
    }
  | { ok: false; problem: VerifyProblem; latest_seal: LatestSeal | null }

const SEALS_PER_PAGE = 200

/**
 * Recomputes one organization's seal chain from its rows, seal by seal in order, and names the
 * first mismatch. Constant memory: seals and rows are read in pages.
 */
export async function verifyChain(db: Kysely<Database>, organizationId: string, now: Date = new Date()): Promise<VerifyResult> {
  const latest = await lastSeal(db, organizationId)
  const latestSeal: LatestSeal | null = latest ? { seal_id: Number(latest.seal_id), sha256: latest.sha256, sealed_at: new Date(latest.sealed_at) } : null
  const fail = (problem: VerifyProblem): VerifyResult => ({ ok: false, problem, latest_seal: latestSeal })

  const prunedThrough = await prunedThroughSeal(db, organizationId)
  const org = await db.selectFrom('organizations').select('decision_retention_days').where('id', '=', organizationId).executeTakeFirst()
  const retentionHorizon = now.getTime() - (org?.decision_retention_days ?? 0) * 86_400_000

  let expectedId = 1
  let prevSha = ZERO_SHA256
  let prevTo = 0
  let seals = 0
  let events = 0
  let decisions = 0
  let prunedSeals = 0
  let decisionsPruned = 0
  for (;;) {
    const page = await db
      .selectFrom('audit_seals')
      .selectAll()
      .where('organization_id', '=', organizationId)
      .where('seal_id', '>=', expectedId)
      .orderBy('seal_id')
      .limit(SEALS_PER_PAGE)
      .execute()
    for (const row of page) {
      const seal: Seal = {
        organization_id: row.organization_id,
        seal_id: Number(row.seal_id),
        xid_from: Number(row.xid_from),
        xid_to: Number(row.xid_to),
        events: Number(row.events),
        decisions: Number(row.decisions),
        events_sha256: row.events_sha256,
        decisions_sha256: row.decisions_sha256,
        prev_sha256: row.prev_sha256,
        sha256: row.sha256,
        sealed_at: new Date(row.sealed_at),
      }
      const id = seal.seal_id
      if (id !== expectedId) {
        return fail({ kind: 'seal_removed', seal_id: expectedId, message: `seal ${expectedId} is missing: the chain goes from ${expectedId - 1} to ${id}` })
      }
      if (seal.prev_sha256 !== prevSha) {
        return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id} does not link to seal ${id - 1}: its prev_sha256 is not that seal's sha256` })
      }
      if (seal.xid_from !== prevTo) {
        return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id} does not start where seal ${id - 1} ends (xid ${seal.xid_from}, expected ${prevTo})` })
      }
      seals++
      expectedId = id + 1
      prevSha = seal.sha256
      prevTo = seal.xid_to
      if (id <= prunedThrough) {
        // Its rows were deleted by an audit prune: only the chain is left to check.
        prunedSeals++
        continue
      }
      const found = await digestRange(db, organizationId, seal.xid_from, seal.xid_to)
      events += found.events.count
      decisions += found.decisions.count
      const decisionsGone = seal.decisions > 0 && found.decisions.count < seal.decisions && seal.sealed_at.getTime() < retentionHorizon
      if (decisionsGone) {
        // Decision retention removed (some of) this seal's decisions: the events are checked, the
        // seal's own hash cannot be (it covers the decisions' order-free digest).
        decisionsPruned++
        const problem = compareRun(seal, 'events', found.events, null)
        if (problem) return fail(problem)
        continue
      }
      const withRows = sealSha256({ ...seal, events: found.events.count, decisions: found.decisions.count, events_sha256: found.events.sha256, decisions_sha256: found.decisions.sha256 }, {
        events: found.events.set,
        decisions: found.decisions.set,
      })
      const rowsMatchColumns =
        found.events.count === seal.events &&
        found.events.sha256 === seal.events_sha256 &&
        found.decisions.count === seal.decisions &&
        found.decisions.sha256 === seal.decisions_sha256
      if (rowsMatchColumns) {
        if (withRows !== seal.sha256) return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id}'s sha256 does not match its contents` })
        continue
      }
      // The rows still give the seal's hash: the seal's stored counts or digests were changed.
      if (withRows === seal.sha256) return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id}'s counts or digests were changed; its rows still match its sha256` })
      const problem =
        compareRun(seal, 'events', found.events, (set) => sealSha256(seal, { events: set, decisions: found.decisions.set }) === seal.sha256) ??
        compareRun(seal, 'decisions', found.decisions, (set) => sealSha256(seal, { events: found.events.set, decisions: set }) === seal.sha256)
      return fail(problem ?? { kind: 'seal_edited', seal_id: id, message: `seal ${id} does not match its rows` })
    }
    if (page.length < SEALS_PER_PAGE) break
  }
  return {
    ok: true,
    seals,
    events,
    decisions,
    through_seal_id: seals > 0 ? expectedId - 1 : null,
    latest_seal: latestSeal,
    pruned_seals: prunedSeals,
    decisions_pruned_seals: decisionsPruned,
  }
}

/**
 * Compares one kind of row with what the seal recorded. `sameSet` tells whether an order-free
 * digest gives the seal's hash (null: cannot be told).
 */
function compareRun(seal: Seal, rows: 'events' | 'decisions', found: { count: number; sha256: string; set: string }, sameSet: ((set: string) => boolean) | null): VerifyProblem | null {
  const sealed = rows === 'events' ? seal.events : seal.decisions
  const digest = rows === 'events' ? seal.events_sha256 : seal.decisions_sha256
  const one = rows === 'events' ? 'an event' : 'a decision'
  const id = seal.seal_id
  if (found.count < sealed) return { kind: 'deleted', seal_id: id, rows, message: `${one} of seal ${id} was deleted (sealed ${sealed} ${rows}, found ${found.count})` }
  if (found.count > sealed) return { kind: 'inserted', seal_id: id, rows, message: `${one} was inserted into seal ${id}'s range (sealed ${sealed} ${rows}, found ${found.count})` }
  if (found.sha256 === digest) return null
  if (sameSet?.(found.set)) return { kind: 'reordered', seal_id: id, rows, message: `${rows} of seal ${id} were reordered: the same rows under other ids` }
  return { kind: 'edited', seal_id: id, rows, message: `${one} of seal ${id} was edited (${found.count} ${rows}, digest differs)` }
}

/** The through_seal_id of the organization's latest `audit.pruned` event (0: never pruned). */
async function prunedThroughSeal(db: Kysely<Database>, organizationId: string): Promise<number> {
  const row = await db
    .selectFrom('audit_events')
    .select('data')
    .where('organization_id', '=', organizationId)
    .where('type', '=', 'audit.pruned')
    .orderBy('event_id', 'desc')
    .limit(1)
    .executeTakeFirst()
  const through = (row?.data as { through_seal_id?: unknown } | undefined)?.through_seal_id
  return typeof through === 'number' && Number.isSafeInteger(through) && through > 0 ? through : 0
}

/** Organizations that have seals, for verifying all of them. */
export async function sealedOrganizations(db: Kysely<Database>): Promise<string[]> {
  const rows = await db.selectFrom('audit_seals').select('organization_id').distinct().orderBy('organization_id').execute()
  return rows.map((row) => row.organization_id)
}
