// The public body of a webhook delivery, built from an outbox row (storage/webhook-fanout.ts):
// `{type, timestamp, data}`, data being the event's own fields with the approval it is about and
// links into the API. The text is stored once per event and sent as it is, so a retry or a replay
// carries the same bytes.
import { withoutSecrets } from '../domain/audit.ts'
import type { OutboxApproval, OutboxDecision, OutboxEvent, OutboxRow, PayloadOf } from '../storage/webhook-fanout.ts'

/** The builder fan-out uses: every link under `apiUrl`, the product API's public URL. */
export function webhookPayloads(apiUrl: string, unsubscribeUrl?: UnsubscribeUrl): PayloadOf {
  return (row) => webhookPayload(row, apiUrl, unsubscribeUrl)
}

/** A newsletter lead's one-click unsubscribe URL (services/lead-mail.ts), for lead.created. */
export type UnsubscribeUrl = (leadId: number) => string | null

/** The delivery body (JSON text) of one outbox row. */
export function webhookPayload(row: OutboxRow, apiUrl: string, unsubscribeUrl?: UnsubscribeUrl): string {
  return row.kind === 'event' ? eventPayload(row, apiUrl, unsubscribeUrl) : deniedDecisionPayload(row, apiUrl)
}

/** lead.created of a newsletter signup carries the subscriber's unsubscribe URL, for whatever mails them. */
function leadExtras(event: OutboxEvent, unsubscribeUrl: UnsubscribeUrl | undefined): Record<string, unknown> {
  const data = event.data as { list?: unknown; lead_id?: unknown } | null
  if (event.type !== 'lead.created' || !unsubscribeUrl || data?.list !== 'newsletter' || typeof data.lead_id !== 'number') return {}
  return { unsubscribe_url: unsubscribeUrl(data.lead_id) }
}

function body(type: string, occurredAt: Date, data: Record<string, unknown>): string {
  return JSON.stringify({ type, timestamp: occurredAt.toISOString(), data: withoutSecrets(data) })
}

function approvalData(approval: OutboxApproval, apiUrl: string): Record<string, unknown> {
  const base = `${apiUrl}/approvals/${approval.approval_id}`
  return {
    approval_id: approval.approval_id,
    decision_id: approval.decision_id,
    agent: { agent_id: approval.agent_id, handle: approval.agent_handle },
    action: approval.action,
    resource: approval.resource,
    args: approval.args,
    context: approval.context,
    expires_at: approval.expires_at ? approval.expires_at.toISOString() : null,
    approvers_required: approval.approvers_required,
    approver_roles: approval.approver_roles,
    links: { approval: base, approve: `${base}/approve`, deny: `${base}/deny` },
  }
}

function eventPayload(event: OutboxEvent, apiUrl: string, unsubscribeUrl?: UnsubscribeUrl): string {
  return body(event.type, event.occurred_at, {
    ...(event.approval ? approvalData(event.approval, apiUrl) : {}),
    ...event.data,
    ...leadExtras(event, unsubscribeUrl),
    organization_id: event.organization_id,
    event_id: event.event_id,
    actor: { type: event.actor_type, id: event.actor_id },
    target: { type: event.target_type, id: event.target_id },
  })
}

function deniedDecisionPayload(decision: OutboxDecision, apiUrl: string): string {
  const [kind, id] = decision.requested_by.split(':')
  return body('decision.denied', decision.evaluated_at, {
    decision_id: decision.decision_id,
    agent: { agent_id: decision.agent_id, handle: decision.agent_handle },
    action: decision.action,
    resource: decision.resource,
    decision: 'deny',
    reasons: decision.reasons,
    args_sha256: decision.args_sha256,
    links: { decision: `${apiUrl}/decisions/${decision.decision_id}` },
    organization_id: decision.organization_id,
    event_id: null,
    actor: { type: kind === 'user' ? 'user' : kind === 'agent-key' ? 'agent' : 'key', id: id ?? null },
    target: { type: 'decision', id: decision.decision_id },
  })
}
