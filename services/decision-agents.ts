// The agent a decision is about, with the organization's settings and revision (its context):
// read afresh, or taken from the contexts this process kept (services/decision-contexts.ts); an
// unknown handle discovered; and the agent's last_seen_at kept roughly current without a write
// per decision.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import { SYSTEM } from '../domain/audit.ts'
import { HttpError } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import { discoverAgent, touchAgents, type Agent } from '../storage/agents.ts'
import type { Cap } from '../storage/caps.ts'
import { readDecisionContext, type DecisionContext } from '../storage/decision-context.ts'
import type { Database } from '../database/schema.ts'
import { INVALID_CREDENTIAL } from './credentials.ts'
import type { DecisionPrincipal } from './decision-answers.ts'
import type { AgentRef, DecisionContextCache } from './decision-contexts.ts'

const TOUCH_INTERVAL_MS = 60_000
const MAX_TOUCHED = 100_000

/** The cap on an organization's agents, created or discovered. */
export function agentCap(source: { readonly config: Pick<Config, 'maxAgentsPerOrg'> }): Cap {
  return { limit: source.config.maxAgentsPerOrg, what: 'agents', setting: 'MAX_AGENTS_PER_ORG' }
}

/** A decision's context with the handle of the agent it is about. */
export interface AgentContext {
  readonly found: DecisionContext
  readonly handle: string
}

export interface DecisionAgents {
  /** The context read afresh: an agent key's own agent, or the handle named (refused when neither fits). */
  read(principal: DecisionPrincipal, named: string | undefined): Promise<AgentContext>
  /**
   * The context a decision may start from without reading it: one this process cached. Null when
   * none is cached, or when the cached one would refuse the request: a fresh read then answers that.
   */
  cached(principal: DecisionPrincipal, named: string | undefined): AgentContext | null
  /** Keeps a context just read for the next decisions. */
  remember(principal: DecisionPrincipal, context: AgentContext): void
  /** Drops a cached context that turned out stale. */
  forget(principal: DecisionPrincipal, handle: string): void
  /** The context's agent, discovered first when the handle is unknown (refused at the agent cap). */
  agentOf(principal: DecisionPrincipal, context: AgentContext, now: Date, requestId: string | null): Promise<Agent>
  /** Records that the agent was seen, at most once a minute per agent from this process. */
  touch(agent: Agent, now: number): void
}

export interface DecisionAgentDeps {
  readonly db: Kysely<Database>
  readonly logger: Logger
  readonly config: Pick<Config, 'maxAgentsPerOrg'>
  readonly contexts: DecisionContextCache
}

/** The agent a request is about, as the context cache names it: an agent key's own, or the handle. */
const agentRefOf = (principal: DecisionPrincipal, handle: string): AgentRef => (principal.agentId !== null ? { agentId: principal.agentId } : { handle })

export function createDecisionAgents(deps: DecisionAgentDeps): DecisionAgents {
  const { db, logger, config, contexts } = deps
  const lastTouched = new Map<string, number>()
  return {
    async read(principal, named) {
      if (principal.agentId !== null) {
        const found = await readDecisionContext(db, principal.organizationId, { agentId: principal.agentId })
        if (!found || !found.agent) throw INVALID_CREDENTIAL
        if (named !== undefined && named !== found.agent.handle) throw new HttpError(403, `This key is bound to agent ${found.agent.handle}; it may not ask for another agent`)
        return { found, handle: found.agent.handle }
      }
      if (named === undefined) throw new HttpError(400, 'Field agent is required')
      const found = await readDecisionContext(db, principal.organizationId, { handle: named })
      if (!found) throw INVALID_CREDENTIAL
      return { found, handle: named }
    },
    cached(principal, named) {
      if (principal.agentId !== null) {
        const found = contexts.get(principal.organizationId, { agentId: principal.agentId })
        if (!found?.agent || (named !== undefined && named !== found.agent.handle)) return null
        return { found, handle: found.agent.handle }
      }
      if (named === undefined) return null
      const found = contexts.get(principal.organizationId, { handle: named })
      return found?.agent ? { found, handle: named } : null
    },
    remember(principal, context) {
      contexts.remember(principal.organizationId, agentRefOf(principal, context.handle), context.found)
    },
    forget(principal, handle) {
      contexts.forget(principal.organizationId, agentRefOf(principal, handle))
    },
    async agentOf(principal, { found, handle }, now, requestId) {
      if (found.agent !== null) return found.agent
      const agent = await discoverAgent(db, principal.organizationId, handle, now, agentCap({ config }), { actor: SYSTEM, requestId })
      if (agent === null) throw new HttpError(409, `This organization has reached its limit of ${config.maxAgentsPerOrg} agents (MAX_AGENTS_PER_ORG); agent ${handle} cannot be discovered`)
      return agent
    },
    touch(agent, now) {
      const last = lastTouched.get(agent.agent_id) ?? agent.last_seen_at?.getTime() ?? 0
      if (now - last < TOUCH_INTERVAL_MS) return
      lastTouched.set(agent.agent_id, now)
      if (lastTouched.size > MAX_TOUCHED) lastTouched.delete(lastTouched.keys().next().value!)
      touchAgents(db, [agent.agent_id], new Date(now)).catch((error: { code?: string }) => logger.log('warn', 'could not record agent last_seen_at', { code: error.code ?? null }))
    },
  }
}
