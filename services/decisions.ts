// The decision use case (docs/api.md#decisions), one function for every caller of it (the HTTP
// route, an MCP gateway): decide asks whether an agent may do something now and answers allow,
// deny or require_approval with why, once the decision's row is committed (group commit,
// services/decision-writer.ts); simulate answers the same without writing anything. A refusal
// is thrown as HttpError, the status the route answers it with.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import { decide as evaluate, type DecisionOutcome, type Reason } from '../engine/index.ts'
import { HttpError } from '../http/errors.ts'
import type { Logger } from '../log.ts'
import { findIdempotent, type DecisionRecord } from '../storage/decisions.ts'
import type { Database } from '../database/schema.ts'
import type { LimitHit } from '../storage/budgets.ts'
import { INVALID_CREDENTIAL } from './credentials.ts'
import { createDecisionAgents, type AgentContext } from './decision-agents.ts'
import { createApproval, lostUse, useApproval, type Settled } from './decision-approvals.ts'
import { checkWithoutCounting, hitReason, monitorWith, NO_LIMIT_PLAN, planOf } from './budgets.ts'
import {
  answerOf,
  assertPayloadBound,
  auditOf,
  boundCall,
  boundHash,
  draftsToSet,
  requesterOf,
  requestHash,
  type DecisionAnswer,
  type DecisionInput,
  type DecisionPrincipal,
  type SimulateInput,
} from './decision-answers.ts'
import { createDecisionContextCache, type DecisionContextCache } from './decision-contexts.ts'
import type { DecisionWriter } from './decision-writer.ts'
import type { PolicySetCache } from './policyset-cache.ts'

export { MAX_PAYLOAD_BYTES, type DecisionAnswer, type DecisionInput, type DecisionPrincipal, type DecisionVia, type DraftPolicy, type SimulateInput } from './decision-answers.ts'

export const IDEMPOTENCY_CONFLICT = 'idempotency_key was already used by this credential for a different request within the last 24 hours; use a new key'
export const NOT_RECORDED = 'The decision could not be recorded, so none is given; retry'

/** The request a decision is made for. */
export interface DecisionCall {
  /** Its id, for the audit events and logs of the decision; null when there is none. */
  readonly requestId: string | null
  /** Milliseconds since the epoch the decision is made at; the service's clock when absent. */
  readonly now?: number
}

export interface DecisionResult {
  readonly answer: DecisionAnswer
  /** The stored first answer to the idempotency key (over HTTP: Idempotent-Replayed: true). */
  readonly replayed: boolean
}

export interface DecisionService {
  /** Decides and logs the decision; answers once it is committed (503 when it cannot be). */
  decide(principal: DecisionPrincipal, input: DecisionInput, call?: DecisionCall): Promise<DecisionResult>
  /** What the decision would be, with the stored policies or the drafts given; writes nothing. */
  simulate(principal: DecisionPrincipal, input: SimulateInput, call?: DecisionCall): Promise<DecisionAnswer>
}

export interface DecisionServiceDeps {
  readonly db: Kysely<Database>
  /** Milliseconds since the epoch, for a call that brings no time of its own. */
  readonly clock: () => number
  readonly logger: Logger
  readonly config: Pick<Config, 'maxAgentsPerOrg'>
  readonly sets: PolicySetCache
  readonly writer: DecisionWriter
  /** The decision contexts this process keeps; a cache of its own when absent. */
  readonly contexts?: DecisionContextCache
  /**
   * Told of each decision made and logged (not replays), with the seconds it took: metrics and
   * traces (services/telemetry-observe.ts). Called here rather than by a wrapper around decide:
   * one more async layer per decision cost more than the counting.
   */
  readonly onDecided?: DecidedHook
}

export type DecidedHook = (answer: DecisionAnswer, principal: DecisionPrincipal, input: DecisionInput, requestId: string | null, seconds: number) => void

/** What decideAndLog answers when its cached context turned out stale (nothing was written). */
const STALE: unique symbol = Symbol('stale context')

/** A limit refuses: deny, no approval created or used. */
function limitDeny(reason: Reason): Settled {
  return { decision: 'deny', reasons: [reason], ref: null, create: null, consume: null }
}

export function createDecisionService(deps: DecisionServiceDeps): DecisionService {
  const { db, clock, logger, config, sets, writer } = deps
  const agents = createDecisionAgents({ db, logger, config, contexts: deps.contexts ?? createDecisionContextCache() })
  // One in-flight answer per idempotency key in this process; others in other processes meet in the database.
  const inflight = new Map<string, Promise<{ sha: string; answer: DecisionAnswer }>>()

  const onDecided = deps.onDecided ?? null

  async function evaluateAndLog(principal: DecisionPrincipal, input: DecisionInput, requestSha: string | null, call: Required<DecisionCall>): Promise<DecisionAnswer> {
    const started = onDecided !== null ? performance.now() : 0
    // Requests with an idempotency key or an approval write in a transaction with more than the
    // decision: they always read afresh, and their contexts are not kept.
    const cacheable = input.idempotency_key === null && input.approval_id === null
    const cached = cacheable ? agents.cached(principal, input.agent) : null
    let answer: DecisionAnswer | typeof STALE = STALE
    if (cached) answer = await decideAndLog(principal, input, requestSha, cached, true, call)
    if (answer === STALE) {
      const fresh = await agents.read(principal, input.agent)
      if (cacheable) agents.remember(principal, fresh)
      answer = (await decideAndLog(principal, input, requestSha, fresh, false, call)) as DecisionAnswer
    }
    onDecided?.(answer, principal, input, call.requestId, (performance.now() - started) / 1000)
    return answer
  }

  /**
   * Decides from the context and logs the decision. From a cached context (`cached`), the row is
   * written only if the organization is still at the context's revision (the guard, checked by
   * the insert; every agent change bumps it too); STALE when not, with nothing written, or when the
   * decision creates an approval (a transaction): the caller then reads the context afresh.
   */
  async function decideAndLog(
    principal: DecisionPrincipal,
    input: DecisionInput,
    requestSha: string | null,
    context: AgentContext,
    cached: boolean,
    call: Required<DecisionCall>,
  ): Promise<DecisionAnswer | typeof STALE> {
    const { found, handle } = context
    const now = new Date(call.now)
    const agent = await agents.agentOf(principal, context, now, call.requestId)
    const set = await sets.get(principal.organizationId, found.settings.ruleset_revision)
    if (!set) throw INVALID_CREDENTIAL
    const outcome = evaluate(set, found.settings, {
      agent: { id: agent.agent_id, handle: agent.handle, labels: agent.labels, status: agent.status },
      action: input.action,
      resource: input.resource,
      args: input.args,
      context: input.context,
      now,
    })
    // A newer policy set than the cached context: the context is behind.
    if (cached && outcome.ruleset_revision !== found.settings.ruleset_revision) {
      agents.forget(principal, handle)
      return STALE
    }
    const argsHash = boundHash(principal.organizationId, handle, input)
    let decisionId = crypto.randomUUID()
    let settled = input.approval_id === null
      ? createApproval(principal, agent, input, outcome, decisionId, argsHash, now)
      : await useApproval(db, principal, agent, input.approval_id, outcome, argsHash, now)
    if (cached && settled.create !== null) return STALE
    const guard = cached ? { revision: found.settings.ruleset_revision } : null
    // Budgets (docs/budgets.md): an allow or a require_approval of its own takes from the limits
    // of the applying policies; an approved use took its share when it was requested.
    let limits = input.approval_id === null && settled.decision !== 'deny' ? planOf(outcome.limits, principal.organizationId, agent.agent_id, input.resource, call.now) : NO_LIMIT_PLAN
    if (limits.deny) settled = limitDeny(limits.deny)
    let monitor = monitorWith(outcome.monitor, limits.deny ? [limits.deny, ...limits.monitor] : limits.monitor)
    for (;;) {
      let answer = answerOf(decisionId, { ...outcome, decision: settled.decision, reasons: settled.reasons, monitor }, argsHash, now, settled.ref)
      const record: DecisionRecord = {
        ...boundCall(principal, agent, input, decisionId, argsHash),
        decision: settled.decision,
        policy_decision: outcome.decision,
        reasons: [...settled.reasons],
        monitor,
        errors: [...outcome.errors],
        approval_id: settled.ref?.approval_id ?? input.approval_id,
        ruleset_revision: outcome.ruleset_revision,
        requested_by: requesterOf(principal),
        evaluated_at: now,
        via: input.via ?? null,
      }
      const idempotency = input.idempotency_key !== null && requestSha !== null ? { key: input.idempotency_key, request_sha256: requestSha, response: answer as unknown } : null
      const request = settled.decision === 'deny' ? null : limits.request
      // Monitor-mode limits that would have refused are known only under the counters' locks.
      const onLimits = (verdict: { monitor: readonly LimitHit[] }) => {
        if (verdict.monitor.length === 0) return
        monitor = monitorWith(outcome.monitor, [...limits.monitor, ...verdict.monitor.map(hitReason)])
        record.monitor = monitor
        answer = answerOf(decisionId, { ...outcome, decision: settled.decision, reasons: settled.reasons, monitor }, argsHash, now, settled.ref)
        if (idempotency) idempotency.response = answer
      }
      let written
      try {
        written = await writer.write({ record, idempotency, approval: settled.create, consume: settled.consume, audit: auditOf(principal, call.requestId), guard, limits: request, onLimits: request ? onLimits : null })
      } catch (error) {
        logger.log('warn', 'decision not recorded', { requestId: call.requestId, code: (error as { code?: string }).code ?? null })
        throw new HttpError(503, NOT_RECORDED, { headers: { 'Retry-After': '1' } })
      }
      if (written.kind === 'stale') {
        agents.forget(principal, handle)
        return STALE
      }
      if (written.kind === 'consume_lost') {
        // Nothing was logged: decide again, as the deny this use now is.
        settled = await lostUse(db, principal, settled.consume!, now)
        decisionId = crypto.randomUUID()
        continue
      }
      if (written.kind === 'limit_exceeded') {
        // Nothing was logged: this decision is the deny the limit makes it.
        const reason = hitReason(written.hit)
        settled = limitDeny(reason)
        monitor = monitorWith(outcome.monitor, [reason, ...limits.monitor])
        limits = NO_LIMIT_PLAN
        decisionId = crypto.randomUUID()
        continue
      }
      agents.touch(agent, call.now)
      if (written.kind === 'duplicate') {
        if (written.request_sha256 !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
        return written.response as DecisionAnswer
      }
      return answer
    }
  }

  const callOf = (call: DecisionCall | undefined): Required<DecisionCall> => ({ requestId: call?.requestId ?? null, now: call?.now ?? clock() })

  async function decide(principal: DecisionPrincipal, input: DecisionInput, given?: DecisionCall): Promise<DecisionResult> {
    const call = callOf(given)
    assertPayloadBound(input)
    if (input.idempotency_key === null) return { answer: await evaluateAndLog(principal, input, null, call), replayed: false }
    const requester = requesterOf(principal)
    const requestSha = requestHash(input)
    const slot = `${principal.organizationId}|${requester}|${input.idempotency_key}`
    const running = inflight.get(slot)
    if (running) {
      const first = await running
      if (first.sha !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
      return { answer: first.answer, replayed: true }
    }
    const stored = await findIdempotent(db, principal.organizationId, requester, input.idempotency_key, new Date(call.now))
    if (stored) {
      if (stored.request_sha256 !== requestSha) throw new HttpError(409, IDEMPOTENCY_CONFLICT)
      return { answer: stored.response as DecisionAnswer, replayed: true }
    }
    const work = evaluateAndLog(principal, input, requestSha, call).then((answer) => ({ sha: requestSha, answer }))
    inflight.set(slot, work)
    try {
      return { answer: (await work).answer, replayed: false }
    } finally {
      inflight.delete(slot)
    }
  }

  async function simulate(principal: DecisionPrincipal, input: SimulateInput, given?: DecisionCall): Promise<DecisionAnswer> {
    const call = callOf(given)
    assertPayloadBound(input)
    const { found, handle } = await agents.read(principal, input.agent)
    const stored = input.policies === undefined ? await sets.get(principal.organizationId, found.settings.ruleset_revision) : null
    const set = input.policies === undefined ? stored : draftsToSet(input.policies, found.settings.ruleset_revision)
    if (!set) throw INVALID_CREDENTIAL
    const agent = found.agent
    const now = new Date(call.now)
    const simulated = evaluate(set, found.settings, {
      // An unknown handle is simulated as a discovered agent, without creating it.
      agent: agent ? { id: agent.agent_id, handle: agent.handle, labels: agent.labels, status: agent.status } : { id: '', handle, labels: {}, status: 'discovered' },
      action: input.action,
      resource: input.resource,
      args: input.args,
      context: input.context,
      now,
    })
    // Limits are checked against the counters as they stand; nothing is reserved.
    let outcome: Pick<DecisionOutcome, 'decision' | 'reasons' | 'monitor' | 'errors' | 'ruleset_revision'> = simulated
    if (agent && simulated.decision !== 'deny' && input.approval_id === null) {
      const checked = await checkWithoutCounting(db, principal.organizationId, planOf(simulated.limits, principal.organizationId, agent.agent_id, input.resource, call.now))
      const monitor = monitorWith(simulated.monitor, checked.deny ? [checked.deny, ...checked.monitor] : checked.monitor)
      outcome = checked.deny ? { ...simulated, decision: 'deny', reasons: [checked.deny], monitor } : { ...simulated, monitor }
    }
    return answerOf(null, outcome, boundHash(principal.organizationId, handle, input), now)
  }

  return { decide, simulate }
}
