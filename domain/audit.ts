// The audit vocabulary: who acts, what happened, to what. One list, shared by the writers, the
// read API's filter, the webhook event filter and the docs.

export const ACTOR_TYPES = ['user', 'key', 'agent', 'operator', 'system'] as const
export type ActorType = (typeof ACTOR_TYPES)[number]

/** Who made a change. `id` is a user, key or agent uuid; null for the operator and the system. */
export interface Actor {
  readonly type: ActorType
  readonly id: string | null
}

export const OPERATOR: Actor = Object.freeze({ type: 'operator', id: null })
export const SYSTEM: Actor = Object.freeze({ type: 'system', id: null })

/** Every event type an audit row may carry (`<target>.<what happened>`). */
export const AUDIT_EVENT_TYPES = [
  'policy.created',
  'policy.updated',
  'policy.archived',
  'policy.rolled_back',
  'agent.created',
  'agent.updated',
  'agent.suspended',
  'agent.discovered',
  'agent.deleted',
  'key.created',
  'key.rotated',
  'key.revoked',
  'member.added',
  'member.changed',
  'member.removed',
  'invitation.created',
  'invitation.revoked',
  'login.succeeded',
  'login.failed',
  'approval.requested',
  'approval.approved',
  'approval.denied',
  'approval.expired',
  'approval.cancelled',
  'approval.consumed',
  'settings.changed',
  'lead.created',
  'lead.exported',
  'lead.erased',
  'webhook.created',
  'webhook.deleted',
  'webhook.disabled',
  'mcp_server.created',
  'mcp_server.updated',
  'mcp_server.deleted',
  'audit.exported',
  'audit.pruned',
  'limit.reached',
  'limit.changed',
] as const
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number]

/** Keys whose values never go into an event's data, at any depth. */
const SECRET_KEY = /secret|password|token|api_key|hash|authorization|cookie/i

/** A copy of `data` without any value stored under a secret-looking key. */
export function withoutSecrets(data: unknown): unknown {
  if (Array.isArray(data)) return data.map(withoutSecrets)
  if (data === null || typeof data !== 'object') return data
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(data)) {
    if (SECRET_KEY.test(key) && key !== 'args_sha256') continue
    out[key] = withoutSecrets(value)
  }
  return out
}
