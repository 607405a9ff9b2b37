// Agents: the non-human actors of an organization, named in policies by their handle. Every
// query is scoped by the organization. Every change (discovery included) bumps the ruleset
// revision in the same transaction, so decisions everywhere see it on their next request.
// Knows nothing of HTTP.
import type { Kysely, Selectable, Transaction } from 'kysely'
import { eventBy, recordEvent, type AuditBy } from './audit.ts'
import { assertBelowCap, lockOrganization, type Cap } from './caps.ts'
import { bumpRulesetRevision } from './ruleset.ts'
import type { AgentTable, Database } from '../database/schema.ts'

export type Agent = Selectable<AgentTable>

export type AgentStatus = Agent['status']

/** What a client may set on an agent. */
export type AgentFields = Pick<Agent, 'handle' | 'display_name' | 'description' | 'owner_user_id' | 'labels' | 'status'>

/** Keyset position for newest-first pages: created_at, then agent_id. */
export interface AgentCursor {
  createdAt: Date
  agentId: string
}

const COLUMNS = ['agent_id', 'organization_id', 'handle', 'display_name', 'description', 'owner_user_id', 'labels', 'status', 'created_at', 'updated_at', 'last_seen_at'] as const

type Db = Kysely<Database> | Transaction<Database>

/** The agent's columns of a row that holds others too (storage/decision-context.ts joins it with its organization's). */
export function toAgent(row: Record<string, unknown>): Agent {
  return {
    agent_id: row.agent_id as string,
    organization_id: row.organization_id as string,
    handle: row.handle as string,
    display_name: row.display_name as string,
    description: row.description as string,
    owner_user_id: row.owner_user_id as string | null,
    labels: row.labels as Record<string, string>,
    status: row.status as AgentStatus,
    created_at: row.created_at as Date,
    updated_at: row.updated_at as Date,
    last_seen_at: row.last_seen_at as Date | null,
  }
}

/** Thrown when the handle is already taken in the organization. */
export class HandleTakenError extends Error {
  override name = 'HandleTakenError'
}

/** Thrown when owner_user_id is not a member of the organization. */
export class OwnerNotMemberError extends Error {
  override name = 'OwnerNotMemberError'
}

async function countAgents(db: Db, organizationId: string): Promise<number> {
  const row = await db.selectFrom('agents').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', organizationId).executeTakeFirstOrThrow()
  return Number(row.n)
}

async function assertOwnerIsMember(db: Db, organizationId: string, userId: string | null): Promise<void> {
  if (userId === null) return
  const row = await db.selectFrom('memberships').select('user_id').where('organization_id', '=', organizationId).where('user_id', '=', userId).executeTakeFirst()
  if (!row) throw new OwnerNotMemberError('owner_user_id is not a member of this organization')
}

/** What an agent event says about the agent. */
function agentData(agent: Agent): Record<string, unknown> {
  return { agent_id: agent.agent_id, handle: agent.handle, status: agent.status, display_name: agent.display_name, owner_user_id: agent.owner_user_id }
}

/** Creates an agent under the cap; HandleTakenError when the handle is in use. */
export async function createAgent(db: Kysely<Database>, organizationId: string, fields: AgentFields, now: Date, cap: Cap, by: AuditBy): Promise<Agent> {
  return db.transaction().execute(async (trx) => {
    await lockOrganization(trx, organizationId)
    await assertOwnerIsMember(trx, organizationId, fields.owner_user_id)
    const taken = await trx.selectFrom('agents').select('agent_id').where('organization_id', '=', organizationId).where('handle', '=', fields.handle).executeTakeFirst()
    if (taken) throw new HandleTakenError(`An agent with handle ${fields.handle} already exists`)
    assertBelowCap(await countAgents(trx, organizationId), cap)
    const row = await trx
      .insertInto('agents')
      .values({ ...fields, labels: JSON.stringify(fields.labels), agent_id: crypto.randomUUID(), organization_id: organizationId, created_at: now, updated_at: now })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    await bumpRulesetRevision(trx, organizationId)
    await recordEvent(trx, eventBy(by, organizationId, 'agent.created', { type: 'agent', id: row.agent_id }, { ...agentData(row), labels: row.labels }, now))
    return row
  })
}

/**
 * The agent for a handle named in a decision, creating it as `discovered` when it is new.
 * Parallel first decisions for one handle make one row: insert … on conflict do nothing, then
 * read. Null when the organization is at its agent cap (nothing is created).
 */
export async function discoverAgent(db: Kysely<Database>, organizationId: string, handle: string, now: Date, cap: Cap, by: AuditBy): Promise<Agent | null> {
  return db.transaction().execute(async (trx) => {
    await lockOrganization(trx, organizationId)
    const existing = await trx.selectFrom('agents').select(COLUMNS).where('organization_id', '=', organizationId).where('handle', '=', handle).executeTakeFirst()
    if (existing) return existing
    if ((await countAgents(trx, organizationId)) >= cap.limit) return null
    const inserted = await trx
      .insertInto('agents')
      .values({ agent_id: crypto.randomUUID(), organization_id: organizationId, handle, status: 'discovered', labels: '{}', created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(['organization_id', 'handle']).doNothing())
      .returning(COLUMNS)
      .executeTakeFirst()
    if (inserted) {
      await bumpRulesetRevision(trx, organizationId)
      await recordEvent(trx, eventBy(by, organizationId, 'agent.discovered', { type: 'agent', id: inserted.agent_id }, agentData(inserted), now))
    }
    return inserted ?? (await trx.selectFrom('agents').select(COLUMNS).where('organization_id', '=', organizationId).where('handle', '=', handle).executeTakeFirstOrThrow())
  })
}

export async function findAgent(db: Db, organizationId: string, agentId: string): Promise<Agent | null> {
  const row = await db.selectFrom('agents').select(COLUMNS).where('organization_id', '=', organizationId).where('agent_id', '=', agentId).executeTakeFirst()
  return row ?? null
}

export async function findAgentByHandle(db: Db, organizationId: string, handle: string): Promise<Agent | null> {
  const row = await db.selectFrom('agents').select(COLUMNS).where('organization_id', '=', organizationId).where('handle', '=', handle).executeTakeFirst()
  return row ?? null
}

/** Newest first; `status` filters. */
export async function listAgents(db: Db, organizationId: string, page: { status: AgentStatus | null; after: AgentCursor | null; limit: number }): Promise<Agent[]> {
  let query = db.selectFrom('agents').select(COLUMNS).where('organization_id', '=', organizationId)
  if (page.status !== null) query = query.where('status', '=', page.status)
  const after = page.after
  if (after) {
    query = query.where((eb) => eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('agent_id', '<', after.agentId)])]))
  }
  return query.orderBy('created_at', 'desc').orderBy('agent_id', 'desc').limit(page.limit).execute()
}

/** Applies the changed fields; null when the agent is not in the organization. */
export async function updateAgent(db: Kysely<Database>, organizationId: string, agentId: string, changes: Partial<AgentFields>, now: Date, by: AuditBy): Promise<Agent | null> {
  return db.transaction().execute(async (trx) => {
    if (changes.owner_user_id !== undefined) await assertOwnerIsMember(trx, organizationId, changes.owner_user_id)
    if (changes.handle !== undefined) {
      const taken = await trx
        .selectFrom('agents')
        .select('agent_id')
        .where('organization_id', '=', organizationId)
        .where('handle', '=', changes.handle)
        .where('agent_id', '<>', agentId)
        .executeTakeFirst()
      if (taken) throw new HandleTakenError(`An agent with handle ${changes.handle} already exists`)
    }
    const { labels, ...rest } = changes
    const row = await trx
      .updateTable('agents')
      .set({ ...rest, ...(labels !== undefined ? { labels: JSON.stringify(labels) } : {}), updated_at: now })
      .where('organization_id', '=', organizationId)
      .where('agent_id', '=', agentId)
      .returning(COLUMNS)
      .executeTakeFirst()
    if (!row) return null
    await bumpRulesetRevision(trx, organizationId)
    // A change that suspends is recorded as a suspension; any other change (resuming included) as an update.
    const type = changes.status === 'suspended' ? 'agent.suspended' : 'agent.updated'
    await recordEvent(trx, eventBy(by, organizationId, type, { type: 'agent', id: agentId }, { ...agentData(row), changed: Object.keys(changes), changes }, now))
    return row
  })
}

/** Deletes the agent and (by cascade) its keys; its logged decisions stay. */
export async function deleteAgent(db: Kysely<Database>, organizationId: string, agentId: string, now: Date, by: AuditBy): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const deleted = await trx.deleteFrom('agents').where('organization_id', '=', organizationId).where('agent_id', '=', agentId).returning(COLUMNS).executeTakeFirst()
    if (!deleted) return false
    await bumpRulesetRevision(trx, organizationId)
    await recordEvent(trx, eventBy(by, organizationId, 'agent.deleted', { type: 'agent', id: agentId }, agentData(deleted), now))
    return true
  })
}

/** Records that agents were seen, never moving last_seen_at backwards. */
export async function touchAgents(db: Db, agentIds: readonly string[], now: Date): Promise<void> {
  if (agentIds.length === 0) return
  await db
    .updateTable('agents')
    .set({ last_seen_at: now })
    .where('agent_id', 'in', [...agentIds])
    .where((eb) => eb.or([eb('last_seen_at', 'is', null), eb('last_seen_at', '<', now)]))
    .execute()
}

/** Ids of active keys bound to the agent (to forget cached lookups when it goes). */
export async function agentKeyIds(db: Db, agentId: string): Promise<string[]> {
  const rows = await db.selectFrom('api_keys').select('id').where('agent_id', '=', agentId).execute()
  return rows.map((row) => row.id)
}
