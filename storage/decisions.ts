// The decision log: what a decision reads (one query for the organization's settings, its
// ruleset revision and the agent; one statement for the policies in force), the durable write
// of decision rows with their idempotency keys, and the listings. Knows nothing of HTTP.
import { CompiledQuery, sql, type Kysely, type Transaction } from 'kysely'
import type { PolicyInput } from '../engine/index.ts'
import { toAgent, type Agent } from './agents.ts'
import { approvalConsumedEvent, approvalRequestedEvent, consumeApproval, insertApprovals, type NewApproval } from './approvals.ts'
import { BY_SYSTEM, recordEvents, type AuditBy } from './audit.ts'
import { preparedText } from '../database/prepared.ts'
import type { Database, DecisionTable } from '../database/schema.ts'

type Db = Kysely<Database> | Transaction<Database>

export interface DecisionSettings {
  default_decision: 'deny' | 'require_approval' | 'allow'
  unknown_agents: 'deny' | 'evaluate'
  ruleset_revision: number
}

/** What one decision starts from: read in one query, so the revision and the agent agree. */
export interface DecisionContext {
  settings: DecisionSettings
  /** Null when no agent has the handle (or id). */
  agent: Agent | null
}

const CONTEXT_COLUMNS = `o.default_decision, o.unknown_agents, o.ruleset_revision,
      a.agent_id, a.organization_id, a.handle, a.display_name, a.description, a.owner_user_id, a.labels, a.status,
      a.created_at, a.updated_at, a.last_seen_at`

/** The statements of a batch of context reads, one per kind of lookup: by handle, by agent id. */
const CONTEXT_BATCH = {
  handle: `select r.i, ${CONTEXT_COLUMNS}
    from unnest($1::uuid[], $2::text[]) with ordinality as r(org, name, i)
    join organizations o on o.id = r.org
    left join agents a on a.organization_id = o.id and a.handle = r.name`,
  agentId: `select r.i, ${CONTEXT_COLUMNS}
    from unnest($1::uuid[], $2::uuid[]) with ordinality as r(org, name, i)
    join organizations o on o.id = r.org
    left join agents a on a.organization_id = o.id and a.agent_id = r.name`,
} as const

type ContextKind = keyof typeof CONTEXT_BATCH

interface ContextRead {
  organizationId: string
  name: string
  resolve(context: DecisionContext | null): void
  reject(error: unknown): void
}

/**
 * Concurrent context reads on one database are sent together: the reads queued during one turn of
 * the event loop become one statement per kind (an `unnest` of the organizations and names asked
 * for). Each read still starts after its request arrived, so it sees every change committed
 * before: batching saves round trips and statement overhead, never freshness.
 */
function contextBatcher(db: Kysely<Database>): (kind: ContextKind, organizationId: string, name: string) => Promise<DecisionContext | null> {
  const queues: Record<ContextKind, ContextRead[]> = { handle: [], agentId: [] }
  let scheduled = false
  function flush(): void {
    scheduled = false
    for (const kind of ['handle', 'agentId'] as const) {
      const batch = queues[kind]
      if (batch.length === 0) continue
      queues[kind] = []
      void runBatch(kind, batch)
    }
  }
  async function runBatch(kind: ContextKind, batch: ContextRead[]): Promise<void> {
    try {
      // Alone, the plain statement is cheaper than the unnest (about 20 % on PGlite).
      if (batch.length === 1) {
        const read = batch[0]!
        return read.resolve(await readContextNow(db, read.organizationId, kind === 'handle' ? { handle: read.name } : { agentId: read.name }))
      }
      const query = CompiledQuery.raw(CONTEXT_BATCH[kind], [batch.map((read) => read.organizationId), batch.map((read) => read.name)])
      const { rows } = await db.executeQuery<Record<string, unknown>>(query)
      const found: (Record<string, unknown> | undefined)[] = Array.from({ length: batch.length })
      for (const row of rows) found[Number(row.i) - 1] = row
      batch.forEach((read, index) => read.resolve(contextOf(found[index])))
    } catch (error) {
      for (const read of batch) read.reject(error)
    }
  }
  return (kind, organizationId, name) =>
    new Promise((resolve, reject) => {
      queues[kind].push({ organizationId, name, resolve, reject })
      if (!scheduled) {
        scheduled = true
        setImmediate(flush)
      }
    })
}

const batchers = new WeakMap<Kysely<Database>, ReturnType<typeof contextBatcher>>()
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

function contextOf(row: Record<string, unknown> | undefined): DecisionContext | null {
  if (!row) return null
  return {
    settings: {
      default_decision: row.default_decision as DecisionSettings['default_decision'],
      unknown_agents: row.unknown_agents as DecisionSettings['unknown_agents'],
      ruleset_revision: Number(row.ruleset_revision),
    },
    agent: row.agent_id ? toAgent(row) : null,
  }
}

/** The organization's settings and revision with the agent named by handle (or by id, for an agent key). */
export async function readDecisionContext(db: Db, organizationId: string, agent: { handle: string } | { agentId: string }): Promise<DecisionContext | null> {
  // Ids that are not uuids cannot match (and must not fail a batch that casts them).
  if (!UUID_TEXT.test(organizationId) || ('agentId' in agent && !UUID_TEXT.test(agent.agentId))) return null
  if (db.isTransaction) return readContextNow(db, organizationId, agent)
  let batcher = batchers.get(db)
  if (!batcher) batchers.set(db, (batcher = contextBatcher(db)))
  return 'handle' in agent ? batcher('handle', organizationId, agent.handle) : batcher('agentId', organizationId, agent.agentId)
}

const CONTEXT_ONE = {
  handle: `select ${CONTEXT_COLUMNS} from organizations o left join agents a on a.organization_id = o.id and a.handle = $2 where o.id = $1`,
  agentId: `select ${CONTEXT_COLUMNS} from organizations o left join agents a on a.organization_id = o.id and a.agent_id = $2 where o.id = $1`,
} as const

async function readContextNow(db: Db, organizationId: string, agent: { handle: string } | { agentId: string }): Promise<DecisionContext | null> {
  const query = 'handle' in agent ? CompiledQuery.raw(CONTEXT_ONE.handle, [organizationId, agent.handle]) : CompiledQuery.raw(CONTEXT_ONE.agentId, [organizationId, agent.agentId])
  const { rows } = await db.executeQuery<Record<string, unknown>>(query)
  return contextOf(rows[0])
}

/**
 * The policies in force (enabled, not archived) with the revision they belong to, read by one
 * statement: one snapshot, so a change committing meanwhile is either wholly in or wholly out,
 * and the revision names exactly this set.
 */
export async function loadPoliciesInForce(db: Db, organizationId: string): Promise<{ revision: number; policies: PolicyInput[] } | null> {
  const { rows } = await sql<Record<string, unknown>>`
    select o.ruleset_revision, p.policy_id, p.version, p.name, p.effect, p.agents, p.actions, p.resources,
      p.condition, p.approval, p.mode, p.enabled
    from organizations o
    left join policies p on p.organization_id = o.id and p.enabled and p.archived_at is null
    where o.id = ${organizationId}
    order by p.created_at, p.policy_id
  `.execute(db)
  if (rows.length === 0) return null
  const policies: PolicyInput[] = []
  for (const row of rows) {
    if (row.policy_id === null || row.policy_id === undefined) continue
    policies.push({
      policy_id: row.policy_id as string,
      version: Number(row.version),
      name: row.name as string,
      effect: row.effect as PolicyInput['effect'],
      agents: jsonArray(row.agents),
      actions: jsonArray(row.actions),
      resources: jsonArray(row.resources),
      condition: (row.condition as string | null) ?? null,
      approval: (typeof row.approval === 'string' ? JSON.parse(row.approval) : row.approval) as PolicyInput['approval'],
      mode: row.mode as PolicyInput['mode'],
      enabled: true,
      archived: false,
    })
  }
  return { revision: Number(rows[0]!.ruleset_revision), policies }
}

function jsonArray(value: unknown): string[] {
  const parsed = typeof value === 'string' ? JSON.parse(value) : value
  return Array.isArray(parsed) ? parsed.map(String) : []
}

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

const parse = (value: unknown) => (typeof value === 'string' ? JSON.parse(value) : value)

export function toDecisionRecord(row: Record<string, unknown>): DecisionRecord {
  return {
    decision_id: row.decision_id as string,
    organization_id: row.organization_id as string,
    agent_id: row.agent_id as string,
    agent_handle: row.agent_handle as string,
    action: row.action as string,
    resource: row.resource as string,
    args: parse(row.args) as Record<string, unknown>,
    context: parse(row.context) as Record<string, unknown>,
    args_sha256: row.args_sha256 as string,
    decision: row.decision as DecisionRecord['decision'],
    policy_decision: row.policy_decision as DecisionRecord['policy_decision'],
    reasons: parse(row.reasons) as unknown[],
    monitor: parse(row.monitor),
    errors: parse(row.errors) as unknown[],
    approval_id: (row.approval_id as string | null) ?? null,
    ruleset_revision: Number(row.ruleset_revision),
    requested_by: row.requested_by as string,
    evaluated_at: new Date(row.evaluated_at as Date),
  }
}

const DECISION_COLUMNS = [
  'decision_id', 'organization_id', 'agent_id', 'agent_handle', 'action', 'resource', 'args', 'context', 'args_sha256',
  'decision', 'policy_decision', 'reasons', 'monitor', 'errors', 'approval_id', 'ruleset_revision', 'requested_by', 'evaluated_at',
] as const

/** Each column's type, for the guarded insert whose values are not typed by the target columns. */
const DECISION_TYPES: Record<(typeof DECISION_COLUMNS)[number], string> = {
  decision_id: 'uuid', organization_id: 'uuid', agent_id: 'uuid', agent_handle: 'text', action: 'text', resource: 'text',
  args: 'jsonb', context: 'jsonb', args_sha256: 'text', decision: 'text', policy_decision: 'text', reasons: 'jsonb',
  monitor: 'jsonb', errors: 'jsonb', approval_id: 'uuid', ruleset_revision: 'integer', requested_by: 'text', evaluated_at: 'timestamptz',
}

/**
 * Batches of up to PREPARED_ROWS rows (what a decision meets below saturation, where latency
 * counts) go out as prepared statements on PostgreSQL: at most 2 × 16 texts per connection. A
 * larger batch spreads its planning over its rows and is sent unnamed.
 */
const PREPARED_ROWS = 16
function hot(text: string, rows: number): string {
  return rows <= PREPARED_ROWS ? preparedText(text) : text
}

/** The multi-row insert's text for `rows` rows, made once per batch size (the text the query builder made). */
const insertTexts = new Map<number, string>()
function insertText(rows: number): string {
  let text = insertTexts.get(rows)
  if (text === undefined) {
    const width = DECISION_COLUMNS.length
    const tuples = Array.from({ length: rows }, (_, row) => `(${DECISION_COLUMNS.map((_, column) => `$${row * width + column + 1}`).join(', ')})`)
    text = hot(`insert into "decisions" (${DECISION_COLUMNS.map((c) => `"${c}"`).join(', ')}) values ${tuples.join(', ')}`, rows)
    insertTexts.set(rows, text)
  }
  return text
}

/**
 * The same insert when some rows carry a guard (one more value per row: the ruleset revision it
 * was decided under, null for a row without a guard). A guarded row is inserted only if its
 * organization is still at that revision, checked by the insert itself, so no change can commit
 * between the check and the write; `returning` names the rows written. Only the organization's
 * row is read: every change to its settings, policies or agents bumps the revision. (Checking the
 * agent's row too cost 10-15 % of the decision rate on PostgreSQL, for no case the revision misses;
 * this scalar comparison measured 5-10 % cheaper per statement than an `exists`.)
 */
const guardedTexts = new Map<number, string>()
function guardedInsertText(rows: number): string {
  let text = guardedTexts.get(rows)
  if (text === undefined) {
    const width = DECISION_COLUMNS.length + 1
    const tuples = Array.from({ length: rows }, (_, row) => {
      const at = (column: number) => `$${row * width + column + 1}`
      return `(${DECISION_COLUMNS.map((name, column) => `${at(column)}::${DECISION_TYPES[name]}`).join(', ')}, ${at(width - 1)}::integer)`
    })
    const columns = DECISION_COLUMNS.map((c) => `"${c}"`).join(', ')
    text = hot(
      `insert into "decisions" (${columns}) select ${DECISION_COLUMNS.map((c) => `v."${c}"`).join(', ')} ` +
        `from (values ${tuples.join(', ')}) as v(${columns}, "guard_revision") ` +
        `where v."guard_revision" is null ` +
        `or v."guard_revision" = (select o."ruleset_revision" from "organizations" o where o."id" = v."organization_id") ` +
        `returning "decision_id"`,
      rows,
    )
    guardedTexts.set(rows, text)
  }
  return text
}

/**
 * Logs decision rows with one statement. Sent as a fixed text with its parameters instead of
 * through the query builder: building and compiling a 256-row insert was the largest single
 * cost of a decision in this process (docs/architecture.md, performance idioms). Returns the
 * ids of the guarded rows whose guard failed (nothing was written for them).
 */
async function insertDecisions(db: Db, items: readonly PendingDecision[]): Promise<Set<string>> {
  const guarded = items.some((item) => item.guard)
  const values: unknown[] = []
  for (const { record: r, guard } of items) {
    values.push(
      r.decision_id, r.organization_id, r.agent_id, r.agent_handle, r.action, r.resource, JSON.stringify(r.args), JSON.stringify(r.context), r.args_sha256,
      r.decision, r.policy_decision, JSON.stringify(r.reasons), JSON.stringify(r.monitor), JSON.stringify(r.errors), r.approval_id, r.ruleset_revision, r.requested_by, r.evaluated_at.toISOString(),
    )
    if (guarded) values.push(guard?.revision ?? null)
  }
  if (!guarded) {
    await db.executeQuery(CompiledQuery.raw(insertText(items.length), values))
    return new Set()
  }
  const { rows } = await db.executeQuery<{ decision_id: string }>(CompiledQuery.raw(guardedInsertText(items.length), values))
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
  if (batch.every((item) => item.idempotency === null && !item.approval && !item.consume)) {
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
    for (const [index, first] of repeats) {
      const outcome = outcomes[first]!
      if (outcome.kind === 'consume_lost') {
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
      continue
    }
    outcomes[index] = { kind: 'consume_lost' }
    if (item.idempotency) {
      await trx
        .deleteFrom('decision_idempotency')
        .where('organization_id', '=', record.organization_id)
        .where('requested_by', '=', record.requested_by)
        .where('idempotency_key', '=', item.idempotency.key)
        .where('decision_id', '=', record.decision_id)
        .execute()
    }
  }
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

export interface DecisionFilter {
  agentHandle: string | null
  /** Only this agent's decisions (an agent key sees its own only). */
  agentId: string | null
  action: string | null
  decision: DecisionRecord['decision'] | null
  from: Date | null
  to: Date | null
}

export interface DecisionCursor {
  evaluatedAt: Date
  decisionId: string
}

/** Newest first. */
export async function listDecisions(db: Db, organizationId: string, filter: DecisionFilter, page: { after: DecisionCursor | null; limit: number }): Promise<DecisionRecord[]> {
  let query = db.selectFrom('decisions').selectAll().where('organization_id', '=', organizationId)
  if (filter.agentHandle !== null) query = query.where('agent_handle', '=', filter.agentHandle)
  if (filter.agentId !== null) query = query.where('agent_id', '=', filter.agentId)
  if (filter.action !== null) query = query.where('action', '=', filter.action)
  if (filter.decision !== null) query = query.where('decision', '=', filter.decision)
  if (filter.from !== null) query = query.where('evaluated_at', '>=', filter.from)
  if (filter.to !== null) query = query.where('evaluated_at', '<', filter.to)
  const after = page.after
  if (after) {
    query = query.where((eb) =>
      eb.or([eb('evaluated_at', '<', after.evaluatedAt), eb.and([eb('evaluated_at', '=', after.evaluatedAt), eb('decision_id', '<', after.decisionId)])]),
    )
  }
  const rows = await query.orderBy('evaluated_at', 'desc').orderBy('decision_id', 'desc').limit(page.limit).execute()
  return rows.map((row) => toDecisionRecord(row as Record<string, unknown>))
}

export async function findDecision(db: Db, organizationId: string, decisionId: string, agentId: string | null): Promise<DecisionRecord | null> {
  let query = db.selectFrom('decisions').selectAll().where('organization_id', '=', organizationId).where('decision_id', '=', decisionId)
  if (agentId !== null) query = query.where('agent_id', '=', agentId)
  const row = await query.executeTakeFirst()
  return row ? toDecisionRecord(row as Record<string, unknown>) : null
}
