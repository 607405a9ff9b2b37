// The parts of a decision that read nothing: who is asking, what a request may hold and the
// hashes bound to it, the answer's shape, and draft policies compiled for a simulation. Shared by
// the decision use case (services/decisions.ts) and its approvals (services/decision-approvals.ts).
import { argsSha256, canonicalSha256, CanonicalJsonError, compileCondition, compilePolicySet, type CompiledPolicySet, type DecisionOutcome, type PolicyInput, type Reason } from '../engine/index.ts'
import { HttpError } from '../http/errors.ts'
import type { AuditBy } from '../storage/audit.ts'

export const MAX_PAYLOAD_BYTES = 16_384

/**
 * Who asks for a decision: the calling credential, as much of it as a decision uses. An
 * authenticated principal of services/credentials.ts is one.
 */
export interface DecisionPrincipal {
  readonly organizationId: string
  /** Set for an agent key (and its tokens): it asks for its own agent only. */
  readonly agentId: string | null
  /** The API key behind the credential, if any. */
  readonly keyId: string | null
  /** The signed-in user of a session, if any. */
  readonly userId: string | null
}

/** Where a decision was asked from besides POST /decisions: the MCP gateway, or the ToolHive authorizer route. */
export type DecisionVia = 'mcp' | 'toolhive'

/** What a decision is asked about, as validated by its caller. */
export interface DecisionInput {
  /** The agent handle: implied by an agent key, required otherwise. */
  readonly agent?: string | undefined
  readonly action: string
  readonly resource: string
  readonly args: Record<string, unknown>
  readonly context: Record<string, unknown>
  /** An approval to use (lower-case UUID), or null. */
  readonly approval_id: string | null
  /** The same key from the same credential within the window returns the first answer. */
  readonly idempotency_key: string | null
  /** The door the decision came through, logged with it; absent or null: POST /decisions. */
  readonly via?: DecisionVia | null
}

/** A policy draft a simulation decides with instead of the stored policies. */
export interface DraftPolicy {
  readonly policy_id?: string | undefined
  readonly version: number
  readonly name: string
  readonly effect: PolicyInput['effect']
  readonly agents: string[]
  readonly actions: string[]
  readonly resources: string[]
  readonly condition: string | null
  readonly mode: PolicyInput['mode']
  readonly enabled: boolean
  readonly limits?: PolicyInput['limits']
}

export interface SimulateInput extends DecisionInput {
  /** Drafts that replace the stored policies for this call. */
  readonly policies?: readonly DraftPolicy[] | undefined
}

export type ApprovalRef = { approval_id: string; status: string; expires_at: string } | null

/** The settled decision, as answered (and as stored for an idempotency key). */
export interface DecisionAnswer {
  readonly decision_id: string | null
  readonly decision: DecisionOutcome['decision']
  readonly reasons: readonly Reason[]
  readonly monitor: DecisionOutcome['monitor']
  readonly errors: DecisionOutcome['errors']
  readonly approval: ApprovalRef
  readonly args_sha256: string
  readonly ruleset_revision: number
  readonly evaluated_at: string
}

/**
 * The call a decision is about, as both its log row and the approval it may create record it:
 * who (organization, agent), what (action, resource, args, context) and the args' bound hash.
 */
export function boundCall(principal: DecisionPrincipal, agent: { agent_id: string; handle: string }, input: DecisionInput, decisionId: string, argsHash: string) {
  return {
    decision_id: decisionId,
    organization_id: principal.organizationId,
    agent_id: agent.agent_id,
    agent_handle: agent.handle,
    action: input.action,
    resource: input.resource,
    args: input.args,
    context: input.context,
    args_sha256: argsHash,
  }
}

/** Who asked, as logged and as the scope of idempotency keys. */
export function requesterOf(principal: DecisionPrincipal): string {
  if (principal.agentId !== null) return `agent-key:${principal.keyId}`
  return principal.userId ? `user:${principal.userId}` : `key:${principal.keyId}`
}

/** Who the audit log records for the approvals a decision creates or uses (as routes/access.ts auditBy). */
export function auditOf(principal: DecisionPrincipal, requestId: string | null): AuditBy {
  if (principal.agentId !== null) return { actor: { type: 'agent', id: principal.agentId }, requestId }
  if (principal.userId !== null) return { actor: { type: 'user', id: principal.userId }, requestId }
  return { actor: { type: 'key', id: principal.keyId }, requestId }
}

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8')
}

/** Refuses a request whose args and context together are larger than MAX_PAYLOAD_BYTES. */
export function assertPayloadBound(input: Pick<DecisionInput, 'args' | 'context'>): void {
  if (byteLength(input.args) + byteLength(input.context) > MAX_PAYLOAD_BYTES) throw new HttpError(400, `Fields args and context together are larger than ${MAX_PAYLOAD_BYTES} bytes`)
}

/** The hash an idempotency key is bound to: the whole request but its key and approval. */
export function requestHash(input: DecisionInput): string {
  try {
    return canonicalSha256({ agent: input.agent ?? null, action: input.action, resource: input.resource, args: input.args, context: input.context })
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new HttpError(400, 'Fields args and context must hold JSON that has a canonical form (finite numbers only)')
    throw error
  }
}

/** args_sha256: what an approval is bound to. */
export function boundHash(organizationId: string, handle: string, input: DecisionInput): string {
  try {
    return argsSha256({ organization_id: organizationId, agent: handle, action: input.action, resource: input.resource, args: input.args })
  } catch (error) {
    if (error instanceof CanonicalJsonError) throw new HttpError(400, 'Field args must hold JSON that has a canonical form (finite numbers only)')
    throw error
  }
}

export function answerOf(
  decisionId: string | null,
  outcome: Pick<DecisionOutcome, 'decision' | 'reasons' | 'monitor' | 'errors' | 'ruleset_revision'>,
  argsHash: string,
  evaluatedAt: Date,
  approval: ApprovalRef = null,
): DecisionAnswer {
  return {
    decision_id: decisionId,
    decision: outcome.decision,
    reasons: outcome.reasons,
    monitor: outcome.monitor,
    errors: outcome.errors,
    approval,
    args_sha256: argsHash,
    ruleset_revision: outcome.ruleset_revision,
    evaluated_at: evaluatedAt.toISOString(),
  }
}

/** The drafts of a simulation compiled as a policy set; a condition that does not compile is refused. */
export function draftsToSet(drafts: readonly DraftPolicy[], revision: number): CompiledPolicySet {
  const inputs: PolicyInput[] = drafts.map((draft, index) => {
    if (draft.condition !== null) {
      const compiled = compileCondition(draft.condition)
      if (!compiled.ok) throw new HttpError(400, `policies.${index}.condition does not compile (line ${compiled.error.line}, column ${compiled.error.column}): ${compiled.error.message}`)
    }
    return { ...draft, policy_id: draft.policy_id ?? '00000000-0000-0000-0000-000000000000', archived: false, approval: null }
  })
  return compilePolicySet(inputs, revision)
}
