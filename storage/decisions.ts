// The decision log's write path: decision rows written in batches (group commit) with their
// idempotency keys, the approvals they create and the approvals they consume, all in one
// transaction; and the lookup of an idempotency key's first answer. Knows nothing of HTTP.
import { CompiledQuery, type Kysely, type Transaction } from 'kysely'
import { approvalConsumedEvent, approvalRequestedEvent, consumeApproval, insertApprovals, type NewApproval } from './approvals.ts'
import { BY_SYSTEM, recordEvents, type AuditBy } from './audit.ts'
import { planLimits, settleReservations, type LimitHit, type LimitRequest, type LimitVerdict } from './budgets.ts'
import { preparedText } from '../database/prepared.ts'
import type { Database, DecisionTable } from '../database/schema.ts'

type Db = Kysely<Database> | Transaction<Database>

/** One logged decision as stored. */
export interface DecisionRecord {
  decision_id: string
  organization_id: string
  agent_id: string
  agent_handle: string
  action: string
  resource: string
  args: Record<string, unknown>
  context: Record<string, unknown>
  args_sha256: string
  decision: DecisionTable['decision']
  policy_decision: DecisionTable['policy_decision']
  reasons: unknown[]
  monitor: unknown
  errors: unknown[]
  approval_id: string | null
  ruleset_revision: number
  requested_by: string
  evaluated_at: Date
  /** The door it came through: null for POST /decisions, 'mcp' (the gateway), 'toolhive'. */
  via?: string | null
}

/** The first answer to an idempotency key, to store beside the decision. */
export interface IdempotencyEntry {
  key: string
  request_sha256: string
  response: unknown
}

export interface PendingDecision {
  record: DecisionRecord
  idempotency: IdempotencyEntry | null
  /** The approval a require_approval decision creates: written in the same transaction, only if the decision is logged. */
  approval?: NewApproval | null
  /** The approved approval this decision (an allow) uses: consumed in the same transaction, or the decision is not logged. */
  consume?: string | null
  /** Who asked, for the audit events of the approval it creates or uses (the system when absent). */
  audit?: AuditBy
  /**
   * For a decision made from a cached context: written only if, when the row is inserted, the
   * organization is still at this ruleset revision (every change to its settings, policies or
   * agents bumps it). Otherwise nothing is written and the outcome is `stale`: the caller reads
   * the context again and decides again.
   */
  guard?: DecisionGuard | null
  /**
   * The limits an allow or require_approval takes (storage/budgets.ts): reserved under the
   * counters' locks in this transaction, or the decision is not logged (`limit_exceeded`).
   */
  limits?: LimitRequest | null
  /** Called in the transaction, before the row is inserted, with what the limits decided (monitor-mode overruns). */
  onLimits?: ((verdict: LimitVerdict) => void) | null
}

export interface DecisionGuard {
  revision: number
}

/** What a write did for one pending decision: logged, or lost an idempotency race to an earlier answer. */
export type WriteOutcome =
  | { kind: 'logged' }
  | { kind: 'duplicate'; request_sha256: string; response: unknown }
  /** The approval to consume was no longer approved (another use won, or use_by passed): nothing was logged. */
  | { kind: 'consume_lost' }
  /** The guard no longer held (the revision moved on since the context was read): nothing was logged. */
  | { kind: 'stale' }
  /** An enforce-mode limit had no room left for it: nothing was logged (the caller decides deny). */
  | { kind: 'limit_exceeded'; hit: LimitHit }

const parse = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value)

const DECISION_COLUMNS = [
  'decision_id', 'organization_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'args_sha256',
  'decision', 'policy_decision', 'reasons', 'monitor', 'errors', 'approval_id', 'ruleset_revision', 'requested_by', 'evaluated_at', 'via',
] as const

/** Each column's type, for the guarded insert whose values are not typed by the target columns. */
const DECISION_TYPES: Record<(typeof DECISION_COLUMNS)[number], string> = {
  decision_id: 'uuid', organization_id: 'uuid', agent_id: 'uuid', agent_handle: 'text', action: 'text', resource: 'text',
  args: 'jsonb', context: 'jsonb', args_sha256: 'text', decision: 'text', policy_decision: 'text', reasons: 'jsonb',
  monitor: 'jsonb', errors: 'jsonb', approval_id: 'uuid', ruleset_revision: 'integer', requested_by: 'text', evaluated_at: 'timestamptz', via: 'text',
}

/**
 * The rows of a batch as one array parameter per column, from parameter `$first` on (jsonb goes
 * as text and is cast here): `select` lists the columns of `from`, an unnest of the arrays named
 * `r`. One statement text serves every batch size, so each connection plans it once (a prepared
 * statement) instead of once per batch, where planning a multi-row values list cost more than
 * executing it. `extra` adds typed arrays after the columns (named as given).
 */
export function decisionRows(first: number, extra: readonly { name: string; type: string }[] = []): { columns: string; select: string; from: string } {
  const typed = [...DECISION_COLUMNS.map((name) => ({ name, type: DECISION_TYPES[name] === 'jsonb' ? 'text' : DECISION_TYPES[name] })), ...extra]
  const columns = DECISION_COLUMNS.map((name) => `"${name}"`).join(', ')
  return {
    columns,
    select: DECISION_COLUMNS.map((name) => (DECISION_TYPES[name] === 'jsonb' ? `r."${name}"::jsonb` : `r."${name}"`)).join(', '),
    from: `unnest(${typed.map((column, index) => `$${first + index}::${column.type}[]`).join(', ')}) as r(${typed.map((column) => `"${column.name}"`).join(', ')})`,
  }
}

/** The batch's values as one array per column, in DECISION_COLUMNS order (for decisionRows). */
export function decisionColumns(records: readonly DecisionRecord[]): unknown[][] {
  const columns: unknown[][] = DECISION_COLUMNS.map(() => [])
  const row: unknown[] = []
  for (const record of records) {
    row.length = 0
    pushDecisionValues(row, record)
    for (let column = 0; column < row.length; column++) columns[column]!.push(row[column])
  }
  return columns
}

const plainRows = decisionRows(1)
const INSERT_TEXT = preparedText(`insert into "decisions" (${plainRows.columns}) select ${plainRows.select} from ${plainRows.from}`)

/**
 * The same insert when some rows carry a guard (one more array: the ruleset revision each row
 * was decided under, null for a row without a guard). A guarded row is inserted only if its
 * organization is still at that revision, checked by the insert itself, so no change can commit
 * between the check and the write; `returning` names the rows written. Only the organization's
 * row is read: every change to its settings, policies or agents bumps the revision. (Checking the
 * agent's row too cost 10-15 % of the decision rate on PostgreSQL, for no case the revision misses;
 * this scalar comparison measured 5-10 % cheaper per statement than an `exists`.)
 */
const guardedRows = decisionRows(1, [{ name: 'guard_revision', type: 'integer' }])
const GUARDED_INSERT_TEXT = preparedText(
  `insert into "decisions" (${guardedRows.columns}) select ${guardedRows.select} from ${guardedRows.from} ` +
    `where r."guard_revision" is null ` +
    `or r."guard_revision" = (select o."ruleset_revision" from "organizations" o where o."id" = r."organization_id") ` +
    `returning "decision_id"`,
)

/** A decision row's values, in DECISION_COLUMNS order. */
function pushDecisionValues(values: unknown[], r: DecisionRecord): void {
  values.push(
    r.decision_id, r.organization_id, r.agent_id, r.agent_handle, r.action, r.resource, JSON.stringify(r.args), JSON.stringify(r.context), r.args_sha256,
    r.decision, r.policy_decision, JSON.stringify(r.reasons), JSON.stringify(r.monitor), JSON.stringify(r.errors), r.approval_id, r.ruleset_revision, r.requested_by, r.evaluated_at.toISOString(),
    r.via ?? null,
  )
}

/**
 * Logs decision rows with one statement. Sent as a fixed text with its parameters instead of
 * through the query builder: building and compiling a 256-row insert was the largest single
 * cost of a decision in this process (docs/architecture.md, performance idioms). Returns the
 * ids of the guarded rows whose guard failed (nothing was written for them).
 */
async function insertDecisions(db: Db, items: readonly PendingDecision[]): Promise<Set<string>> {
  const guarded = items.some((item) => item.guard)
  const values: unknown[] = decisionColumns(items.map((item) => item.record))
  if (!guarded) {
    await db.executeQuery(CompiledQuery.raw(INSERT_TEXT, values))
    return new Set()
  }
  values.push(items.map((item) => item.guard?.revision ?? null))
  const { rows } = await db.executeQuery<{ decision_id: string }>(CompiledQuery.raw(GUARDED_INSERT_TEXT, values))
  const written = new Set(rows.map((row) => row.decision_id))
  return new Set(items.filter((item) => !written.has(item.record.decision_id)).map((item) => item.record.decision_id))
}

export const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000

/**
 * Writes a batch of decisions in one transaction (group commit): their idempotency keys first
 * (a key already answered within the window, by this process or another, makes its decision a
 * duplicate that is not logged again), then every other decision in one multi-row insert, then
 * the approvals those logged decisions create. Either all of it commits or nothing does.
 */
export async function writeDecisions(db: Kysely<Database>, batch: readonly PendingDecision[], now: Date): Promise<WriteOutcome[]> {
  // A stale guarded row is simply not written: nothing else of it may be.
  if (batch.some((item) => item.guard && (item.idempotency !== null || item.approval || item.consume))) throw new Error('a guarded decision carries no idempotency key or approval')
  // Without idempotency keys the batch is one statement, atomic on its own: no BEGIN/COMMIT round trips.
  // (A batch with budgets that all keep room is written in one statement too: storage/budget-batch.ts, tried first by the writer.)
  if (batch.every((item) => item.idempotency === null && !item.approval && !item.consume && !item.limits)) {
    const stale = await insertDecisions(db, batch)
    return batch.map((item) => (stale.has(item.record.decision_id) ? { kind: 'stale' } : { kind: 'logged' }))
  }
  return db.transaction().execute(async (trx) => {
    const outcomes: WriteOutcome[] = batch.map(() => ({ kind: 'logged' }))
    // The same key twice in one batch: the first answers, the others repeat its answer.
    const firstOfKey = new Map<string, number>()
    const repeats: [number, number][] = []
    const keyed: { item: PendingDecision; index: number }[] = []
    batch.forEach((item, index) => {
      if (item.idempotency === null) return
      const id = `${item.record.organization_id}|${item.record.requested_by}|${item.idempotency.key}`
      const first = firstOfKey.get(id)
      if (first !== undefined) {
        repeats.push([index, first])
        outcomes[index] = { kind: 'duplicate', request_sha256: '', response: null }
      } else {
        firstOfKey.set(id, index)
        keyed.push({ item, index })
      }
    })
    if (keyed.length > 0) {
      const stale = new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS)
      const won = await trx
        .insertInto('decision_idempotency')
        .values(
          keyed.map(({ item }) => ({
            organization_id: item.record.organization_id,
            requested_by: item.record.requested_by,
            idempotency_key: item.idempotency!.key,
            decision_id: item.record.decision_id,
            request_sha256: item.idempotency!.request_sha256,
            // Kept as a JSON string inside jsonb: jsonb reorders object keys, and a replay must
            // repeat the first answer byte for byte.
            response: JSON.stringify(JSON.stringify(item.idempotency!.response)),
            created_at: now,
          })),
        )
        // A key older than the window is free again: the new answer replaces it.
        .onConflict((oc) =>
          oc
            .columns(['organization_id', 'requested_by', 'idempotency_key'])
            .doUpdateSet((eb) => ({
              decision_id: eb.ref('excluded.decision_id'),
              request_sha256: eb.ref('excluded.request_sha256'),
              response: eb.ref('excluded.response'),
              created_at: eb.ref('excluded.created_at'),
            }))
            .where('decision_idempotency.created_at', '<', stale),
        )
        .returning('decision_id')
        .execute()
      const winners = new Set(won.map((row) => row.decision_id))
      for (const { item, index } of keyed) {
        if (winners.has(item.record.decision_id)) continue
        const first = await findIdempotent(trx, item.record.organization_id, item.record.requested_by, item.idempotency!.key, now)
        if (!first) throw new Error('idempotency key neither inserted nor found')
        outcomes[index] = { kind: 'duplicate', request_sha256: first.request_sha256, response: first.response }
      }
    }
    await consumeApprovals(trx, batch, outcomes)
    const requests = batch.map((item, index) => (item.limits && outcomes[index]!.kind === 'logged' ? item.limits : null))
    const plan = requests.some((request) => request !== null) ? await planLimits(trx, requests, now) : null
    if (plan) {
      for (const [index, verdict] of plan.verdicts.entries()) {
        if (verdict === null) continue
        const item = batch[index]!
        if (verdict.refused) {
          outcomes[index] = { kind: 'limit_exceeded', hit: verdict.refused }
          await freeKey(trx, item)
        } else item.onLimits?.(verdict)
      }
    }
    for (const [index, first] of repeats) {
      const outcome = outcomes[first]!
      if (outcome.kind === 'consume_lost' || outcome.kind === 'limit_exceeded') {
        outcomes[index] = outcome
        continue
      }
      const entry = batch[first]!.idempotency!
      outcomes[index] = outcome.kind === 'duplicate' ? outcome : { kind: 'duplicate', request_sha256: entry.request_sha256, response: entry.response }
    }
    const logging = batch.filter((_, index) => outcomes[index]!.kind === 'logged')
    const stale = logging.length > 0 ? await insertDecisions(trx, logging) : new Set<string>()
    batch.forEach((item, index) => {
      if (stale.has(item.record.decision_id)) outcomes[index] = { kind: 'stale' }
    })
    const creating = batch.filter((item, index) => item.approval && outcomes[index]!.kind === 'logged')
    await insertApprovals(trx, creating.map((item) => item.approval!))
    await recordEvents(trx, creating.map((item) => approvalRequestedEvent(item.approval!, item.audit ?? BY_SYSTEM, item.record.evaluated_at)))
    // After the approvals: a pending approval's reservation refers to it.
    if (plan) {
      const logged = new Set<number>()
      const approvals = new Map<number, string>()
      batch.forEach((item, index) => {
        if (outcomes[index]!.kind !== 'logged') return
        logged.add(index)
        if (item.approval) approvals.set(index, item.approval.approval_id)
      })
      await plan.commit(trx, logged, approvals, now)
    }
    return outcomes
  })
}

/**
 * Consumes the approvals the batch's logged decisions use, one conditional update each, in the
 * batch's transaction: of two uses (in this batch or a concurrent one) exactly one finds the
 * approval still approved. A decision that lost is not logged and its idempotency key is freed;
 * the caller decides again.
 */
async function consumeApprovals(trx: Transaction<Database>, batch: readonly PendingDecision[], outcomes: WriteOutcome[]): Promise<void> {
  for (const [index, item] of batch.entries()) {
    if (!item.consume || outcomes[index]!.kind !== 'logged') continue
    const { record } = item
    const consumed = await consumeApproval(trx, record.organization_id, item.consume, record.decision_id, record.evaluated_at)
    if (consumed) {
      await recordEvents(trx, [approvalConsumedEvent(consumed, item.audit ?? BY_SYSTEM, record.evaluated_at)])
      // What the approval reserved when requested is this use: nothing is counted again.
      await settleReservations(trx, item.consume)
      continue
    }
    outcomes[index] = { kind: 'consume_lost' }
    await freeKey(trx, item)
  }
}

/** A decision that was not logged frees the idempotency key it took in this transaction. */
async function freeKey(trx: Transaction<Database>, item: PendingDecision): Promise<void> {
  if (!item.idempotency) return
  const { record } = item
  await trx
    .deleteFrom('decision_idempotency')
    .where('organization_id', '=', record.organization_id)
    .where('requested_by', '=', record.requested_by)
    .where('idempotency_key', '=', item.idempotency.key)
    .where('decision_id', '=', record.decision_id)
    .execute()
}

/** The first answer to an idempotency key of this credential within the window, if any. */
export async function findIdempotent(db: Db, organizationId: string, requestedBy: string, key: string, now: Date): Promise<{ request_sha256: string; response: unknown } | null> {
  const row = await db
    .selectFrom('decision_idempotency')
    .select(['request_sha256', 'response'])
    .where('organization_id', '=', organizationId)
    .where('requested_by', '=', requestedBy)
    .where('idempotency_key', '=', key)
    .where('created_at', '>=', new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS))
    .executeTakeFirst()
  if (!row) return null
  const stored = parse(row.response)
  return { request_sha256: row.request_sha256, response: typeof stored === 'string' ? JSON.parse(stored) : stored }
}

