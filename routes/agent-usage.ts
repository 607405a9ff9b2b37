// An agent's use of its budgets (docs/budgets.md): GET /agents/{agent_id}/usage and, for an agent
// key, GET /agents/me/usage. Each limit of the policies in force that govern the agent, with
// what is used, what remains and when the window resets. Scoped by the credential's
// organization: another organization's agent answers the same 404 as an unknown one.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { UUID } from '../domain/uuid.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import { usageOf } from '../services/budgets.ts'
import type { Principal } from '../services/credentials.ts'
import type { PolicySetCache } from '../services/policyset-cache.ts'
import { readDecisionContext } from '../storage/decision-context.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'

const AGENT_NOT_FOUND = 'Agent not found'

const UsageSchema = v.pipe(
  v.object({
    agent_id: v.pipe(v.string(), v.uuid()),
    handle: v.string(),
    limits: v.array(
      v.object({
        policy_id: v.pipe(v.string(), v.uuid()),
        policy_name: v.string(),
        policy_version: v.number(),
        limit: v.pipe(v.string(), v.description("The limit's name.")),
        kind: v.picklist(['count', 'spend']),
        mode: v.picklist(['enforce', 'monitor']),
        scope: v.picklist(['agent', 'agent_resource', 'organization']),
        actions: v.pipe(v.array(v.string()), v.description("The policy's action patterns: what the limit counts.")),
        window: v.object({ type: v.string(), tz: v.nullable(v.string()), seconds: v.nullable(v.number()) }),
        currency: v.nullable(v.string()),
        resource: v.pipe(v.nullable(v.string()), v.description('agent_resource limits: one entry per resource used (null before any).')),
        max: v.number(),
        used: v.number(),
        remaining: v.number(),
        window_start: v.pipe(v.nullable(v.string()), v.description('Calendar windows: when this one started.')),
        resets_at: v.pipe(v.nullable(v.string()), v.description('When the window resets (rolling: when the oldest use stops counting); null for all_time.')),
      }),
    ),
  }),
  v.title('AgentUsage'),
)

export function agentUsageRoutes(guard: Guard, sets: PolicySetCache): Route[] {
  async function usageFor(ctx: RequestContext, principal: Principal, agentId: string | null): Promise<Reply> {
    const found = agentId ? await readDecisionContext(ctx.deps.db, principal.organizationId, { agentId }) : null
    if (!found || !found.agent) throw new HttpError(404, AGENT_NOT_FOUND)
    const set = await sets.get(principal.organizationId, found.settings.ruleset_revision)
    if (!set) throw new HttpError(404, AGENT_NOT_FOUND)
    const limits = await usageOf(ctx.deps.db, set, principal.organizationId, found.agent, ctx.now)
    return json(200, { agent_id: found.agent.agent_id, handle: found.agent.handle, limits })
  }

  async function usage(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = String(request.params.agent_id ?? '')
    return usageFor(ctx, principal, UUID.test(id) ? id.toLowerCase() : null)
  }

  async function ownUsage(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    if (principal.agentId === null) throw new HttpError(404, 'Only a key bound to an agent has /agents/me; name the agent: /agents/{agent_id}/usage')
    return usageFor(ctx, principal, principal.agentId)
  }

  return [
    { method: 'GET', path: '/agents/me/usage', handler: guard.protect('agents:read', ownUsage, { agentKeys: true }), doc: ownUsageDoc },
    { method: 'GET', path: '/agents/:agent_id/usage', handler: guard.protect('agents:read', usage), doc: usageDoc },
  ]
}

const TAGS = ['Agents']

const usageDoc: OperationDoc = {
  operationId: 'getAgentUsage',
  summary: "The agent's use of each limit that applies to it",
  description: 'Each limit of the policies in force that govern the agent (docs/budgets.md): used, remaining, and when the window resets.',
  tags: TAGS,
  scopes: ['agents:read'],
  responses: { 200: { description: 'The usage.', schema: UsageSchema }, ...protectedErrors({ 404: 'No such agent in the caller\'s organization ("Agent not found").' }) },
}

const ownUsageDoc: OperationDoc = {
  operationId: 'getOwnUsage',
  summary: "An agent key's own use of its limits",
  tags: TAGS,
  scopes: ['agents:read'],
  responses: { 200: { description: 'The usage.', schema: UsageSchema }, ...protectedErrors({ 404: 'The credential is not bound to an agent.' }) },
}
