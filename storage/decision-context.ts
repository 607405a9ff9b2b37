// What a decision reads before it decides: one query for the organization's settings, its
// ruleset revision and the agent (batched with the reads of concurrent decisions), and one
// statement for the policies in force. Knows nothing of HTTP.
import { CompiledQuery, sql, type Kysely, type Transaction } from 'kysely'
import type { PolicyInput } from '../engine/index.ts'
import { toAgent, type Agent } from './agents.ts'
import type { Database } from '../database/schema.ts'

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
      // Alone, the plain statement is cheaper than the unnest.
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
      p.condition, p.approval, p.mode, p.enabled, p.limits
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
      limits: (typeof row.limits === 'string' ? JSON.parse(row.limits) : (row.limits ?? [])) as PolicyInput['limits'],
    })
  }
  return { revision: Number(rows[0]!.ruleset_revision), policies }
}

function jsonArray(value: unknown): string[] {
  const parsed = typeof value === 'string' ? JSON.parse(value) : value
  return Array.isArray(parsed) ? parsed.map(String) : []
}
