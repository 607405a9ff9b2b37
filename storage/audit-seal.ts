// The audit seals' reads and writes (the format itself is engine/seal.ts; the timer is
// jobs/audit-seal.ts; the verifier is services/audit-verify.ts).
//
// A seal covers, for one organization, every audit event and every decision written by a
// transaction whose id (xid) lies in [xid_from, xid_to). xid_to is the oldest transaction still
// running when the sealer looked (the xmin of its snapshot): every transaction below it has ended,
// so the sealed set can never change again without someone editing rows.
//
// Work per seal is bounded: the rows are read and hashed in pages, and a range holding more than
// `maxRows` rows is cut at a lower xid (every xid below the snapshot's xmin is final, so any lower
// boundary is as good as the xmin itself); the rest goes into the next seal.
import { sql, type Kysely, type Transaction } from 'kysely'
import {
  decisionSealJson,
  eventSealJson,
  RunDigest,
  sealSha256,
  ZERO_SHA256,
  type RangeDigest,
  type Seal,
  type SealedDecisionRow,
  type SealedEventRow,
  type SealFields,
} from '../engine/seal.ts'
import type { Database } from '../database/schema.ts'
import { turn } from '../database/turn.ts'

/**
 * Rows per read while a seal hashes. On PGlite a read runs on this process's thread and holds every
 * request meanwhile, so short reads keep POST /decisions' latency close to what it is with the
 * sealer off (docs/governance.md has the measurements).
 */
const SEAL_PAGE_ROWS = 25
/** Rows per read while verifying: an operator's check, where fewer statements matter more. */
const VERIFY_PAGE_ROWS = 100
/** Rows per seal unless told otherwise (a single transaction larger than this is sealed whole). */
export const DEFAULT_MAX_ROWS_PER_SEAL = 50_000
/** Microsecond ISO 8601 in UTC: what a timestamp becomes in the hashed JSON, the same on both drivers. */
const ISO = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'

type Db = Kysely<Database> | Transaction<Database>

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
 * Longest stretch of hashing between two turns of the event loop: a large page hashed in one go
 * held every request of this process until it was done. In slices, and with short reads
 * (SEAL_PAGE_ROWS), a request waits for the sealer only briefly.
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
 * same; but one text value is parsed by JSON.parse where each row's columns went through the
 * driver's field-by-field parsing, which matters on PGlite, where a read runs on this thread.
 */
async function readPage(db: Db, query: ReturnType<typeof sql<{ page: string | null }>>): Promise<unknown[][]> {
  const page = (await query.execute(db)).rows[0]?.page
  return page == null ? [] : (JSON.parse(page) as unknown[][])
}

const EVENT_COLUMNS: readonly (keyof SealedEventRow)[] = ['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'request_id', 'xid']
const DECISION_COLUMNS: readonly (keyof SealedDecisionRow)[] = [
  'decision_id', 'organization_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'args_sha256', 'decision',
  'policy_decision', 'reasons', 'monitor', 'errors', 'approval_id', 'ruleset_revision', 'requested_by', 'evaluated_at', 'xid', 'via',
]

function fromTuple<Row>(columns: readonly string[], tuple: unknown[]): Row {
  const row: Record<string, unknown> = {}
  for (let i = 0; i < columns.length; i++) row[columns[i]!] = tuple[i]
  return row as Row
}

/** Hashes one organization's events and decisions with xid in [from, to), a page at a time. */
export async function digestRange(db: Db, organizationId: string, from: number, to: number, pageRows = VERIFY_PAGE_ROWS): Promise<RangeDigest> {
  const events = new RunDigest('event_id')
  await paged<SealedEventRow>(
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
      ).map((tuple) => fromTuple<SealedEventRow>(EVENT_COLUMNS, tuple)),
    (row) => events.add(eventSealJson(row)),
  )
  const decisions = new RunDigest('decision_id')
  await paged<SealedDecisionRow>(
    pageRows,
    async (after) =>
      (
        await readPage(
          db,
          sql<{ page: string | null }>`select json_agg(json_build_array(decision_id, organization_id, agent_id, agent_handle, action, resource, args,
            context, args_sha256, decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by,
            to_char(evaluated_at at time zone 'UTC', ${ISO}), xid, via) order by xid, decision_id)::text as page
          from (select * from decisions where organization_id = ${organizationId} and xid >= ${from} and xid < ${to}
            ${after ? sql`and (xid, decision_id) > (${Number(after.xid)}, ${after.decision_id}::uuid)` : sql``}
            order by xid, decision_id limit ${pageRows}) d`,
        )
      ).map((tuple) => fromTuple<SealedDecisionRow>(DECISION_COLUMNS, tuple)),
    (row) => decisions.add(decisionSealJson(row)),
  )
  return { events: events.finish(), decisions: decisions.finish() }
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
 * held every request of the process, and a transaction held across the hashing held them for the
 * whole pass.
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

/** Rows per statement while finding a range's bounds: a short statement on PGlite. */
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
 * time per kind, with a turn of the event loop between statements. One statement gathering up to
 * maxRows + 1 xids of each kind ran, on PGlite, on this process's thread for as long as the rows
 * since the last pass took to scan, and set POST /decisions' tail latency.
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

/** Organizations that have seals, for verifying all of them. */
export async function sealedOrganizations(db: Kysely<Database>): Promise<string[]> {
  const rows = await db.selectFrom('audit_seals').select('organization_id').distinct().orderBy('organization_id').execute()
  return rows.map((row) => row.organization_id)
}

// ---- What the verifier reads (services/audit-verify.ts) ----

export interface LatestSeal {
  seal_id: number
  sha256: string
  sealed_at: Date
}

/** The organization's newest seal: the head of its chain (null: none yet). */
export async function latestSeal(db: Db, organizationId: string): Promise<LatestSeal | null> {
  const row = await db
    .selectFrom('audit_seals')
    .select(['seal_id', 'sha256', 'sealed_at'])
    .where('organization_id', '=', organizationId)
    .orderBy('seal_id', 'desc')
    .limit(1)
    .executeTakeFirst()
  return row ? { seal_id: Number(row.seal_id), sha256: row.sha256, sealed_at: row.sealed_at } : null
}

/** Up to `limit` of the organization's seals from seal_id `fromId` on, in order. */
export async function sealsFrom(db: Db, organizationId: string, fromId: number, limit: number): Promise<Seal[]> {
  const rows = await db
    .selectFrom('audit_seals')
    .selectAll()
    .where('organization_id', '=', organizationId)
    .where('seal_id', '>=', fromId)
    .orderBy('seal_id')
    .limit(limit)
    .execute()
  return rows.map((row) => ({
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
    sealed_at: row.sealed_at,
  }))
}

/** The organization's decision_retention_days (0 when there is no such organization). */
export async function decisionRetentionDays(db: Db, organizationId: string): Promise<number> {
  const org = await db.selectFrom('organizations').select('decision_retention_days').where('id', '=', organizationId).executeTakeFirst()
  return org?.decision_retention_days ?? 0
}

/** The through_seal_id of the organization's latest `audit.pruned` event (0: never pruned). */
export async function prunedThroughSeal(db: Db, organizationId: string): Promise<number> {
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
