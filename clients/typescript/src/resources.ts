// A method for every product route, grouped as the API reference groups them. Each is a thin
// call of the generated operation table (types.gen.ts): its parameters, body and answer are
// the types the server validates with. List methods answer a Paginator over next_cursor.
import { ApprovalTimeout } from './errors.ts'
import type { Core, Paginator } from './core.ts'
import type * as T from './types.gen.ts'
import type { Operations } from './types.gen.ts'

type Query<K extends keyof Operations> = Partial<Record<Exclude<keyof Operations[K]['query'], 'cursor'>, string | number | boolean>>
type Body<K extends keyof Operations> = Operations[K]['body']
type Answer<K extends keyof Operations> = Promise<Operations[K]['response']>
type Item<K extends keyof Operations, F extends keyof Operations[K]['response']> = Operations[K]['response'][F] extends Array<infer I> ? I : never

/** A random idempotency key; crypto.randomUUID is missing from browsers' insecure contexts. */
function randomKey(): string {
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID()
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('')
}

abstract class Namespace {
  protected readonly c: Core
  constructor(core: Core) {
    this.c = core
  }
  protected paged<K extends keyof Operations, F extends keyof Operations[K]['response'] & string>(id: K, field: F, query: Record<string, unknown>, params?: Operations[K]['params']): Paginator<Item<K, F>> {
    return this.c.paginate<Item<K, F>>(async (cursor) => (await this.c.call(id, { params, query: { ...query, ...(cursor ? { cursor } : {}) } } as never)) as Record<string, unknown>, field)
  }
}

export class Auth extends Namespace {
  /** POST /auth/login: a token for a password, an API key or an OAuth grant. Prefer `steward.signIn()`, which keeps the session. */
  login(body: Body<'login'>): Answer<'login'> {
    return this.c.request<T.TokenResponse>('POST', '/auth/login', { body, auth: false }).then((r) => r.body)
  }
  /** POST /auth/refresh: a new access token for a refresh token (spent on use). */
  refresh(body: Body<'refreshToken'>): Answer<'refreshToken'> {
    return this.c.request<T.TokenResponse>('POST', '/auth/refresh', { body, auth: false, safeToRetry: true }).then((r) => r.body)
  }
}

export class Policies extends Namespace {
  /** GET /policies: those in force (archived ones with `{archived: true}`), oldest first. */
  list(query: Omit<Query<'listPolicies'>, 'organization_id'> = {}): Paginator<T.Policy> {
    return this.c.paginate<T.Policy>(async (cursor) => this.c.call('listPolicies', { query: { ...query, organization_id: await this.c.organizationId(), ...(cursor ? { cursor } : {}) } }) as never, 'policies')
  }
  async create(body: Body<'createPolicy'>): Answer<'createPolicy'> {
    return this.c.call('createPolicy', { query: { organization_id: body.organization_id ?? (await this.c.organizationId()) }, body })
  }
  get(policyId: string): Answer<'getPolicy'> {
    return this.c.call('getPolicy', { params: { policy_id: policyId } })
  }
  update(policyId: string, body: Body<'updatePolicy'>): Answer<'updatePolicy'> {
    return this.c.call('updatePolicy', { params: { policy_id: policyId }, body })
  }
  /** DELETE /policies/{id}: archives the policy. */
  delete(policyId: string): Answer<'deletePolicy'> {
    return this.c.call('deletePolicy', { params: { policy_id: policyId } })
  }
  versions(policyId: string, query: Query<'listPolicyVersions'> = {}): Paginator<T.PolicyVersion> {
    return this.paged('listPolicyVersions', 'versions', query, { policy_id: policyId })
  }
  version(policyId: string, version: number): Answer<'getPolicyVersion'> {
    return this.c.call('getPolicyVersion', { params: { policy_id: policyId, version: String(version) } })
  }
  rollback(policyId: string, version: number): Answer<'rollbackPolicy'> {
    return this.c.call('rollbackPolicy', { params: { policy_id: policyId }, body: { version } as Body<'rollbackPolicy'> })
  }
  /** POST /policies/replay: what drafts would have decided on the logged decisions. Writes nothing. */
  replay(body: Body<'replayPolicies'>): Answer<'replayPolicies'> {
    return this.c.call('replayPolicies', { body }, { safeToRetry: true })
  }
  /** POST /policies/plan: the difference between a whole policy set and the one in force. Writes nothing. */
  plan(body: Body<'planPolicySet'>): Answer<'planPolicySet'> {
    return this.c.call('planPolicySet', { body }, { safeToRetry: true })
  }
  /** POST /policies/apply: writes a plan (its `base`) as one ruleset revision; 409 ConflictError when the set moved. */
  apply(body: Body<'applyPolicySet'>): Answer<'applyPolicySet'> {
    // Safe to repeat: a second apply of the same base is refused, and of an applied set is a no-op.
    return this.c.call('applyPolicySet', { body })
  }
}

export class Organization extends Namespace {
  get(): Answer<'getOrganization'> {
    return this.c.call('getOrganization')
  }
  update(body: Body<'updateOrganization'>): Answer<'updateOrganization'> {
    return this.c.call('updateOrganization', { body })
  }
}

export class Keys extends Namespace {
  list(query: Query<'listApiKeys'> = {}): Answer<'listApiKeys'> {
    return this.c.call('listApiKeys', { query })
  }
  create(body: Body<'createApiKey'>): Answer<'createApiKey'> {
    return this.c.call('createApiKey', { body })
  }
  get(keyId: string): Answer<'getApiKey'> {
    return this.c.call('getApiKey', { params: { key_id: keyId } })
  }
  revoke(keyId: string): Answer<'revokeApiKey'> {
    return this.c.call('revokeApiKey', { params: { key_id: keyId } })
  }
  rotate(keyId: string, body: Body<'rotateApiKey'> = {} as Body<'rotateApiKey'>): Answer<'rotateApiKey'> {
    return this.c.call('rotateApiKey', { params: { key_id: keyId }, body })
  }
}

export class Members extends Namespace {
  list(): Answer<'listMembers'> {
    return this.c.call('listMembers')
  }
  update(userId: string, body: Body<'updateMember'>): Answer<'updateMember'> {
    return this.c.call('updateMember', { params: { user_id: userId }, body })
  }
  remove(userId: string): Answer<'removeMember'> {
    return this.c.call('removeMember', { params: { user_id: userId } })
  }
}

export class Invitations extends Namespace {
  list(): Answer<'listInvitations'> {
    return this.c.call('listInvitations')
  }
  create(body: Body<'createInvitation'>): Answer<'createInvitation'> {
    return this.c.call('createInvitation', { body })
  }
  revoke(invitationId: string): Answer<'revokeInvitation'> {
    return this.c.call('revokeInvitation', { params: { invitation_id: invitationId } })
  }
  /** POST /invitations/accept: no credential; the invitation's token and a password. */
  accept(body: Body<'acceptInvitation'>): Answer<'acceptInvitation'> {
    return this.c.request<Operations['acceptInvitation']['response']>('POST', '/invitations/accept', { body, auth: false }).then((r) => r.body)
  }
}

export class Agents extends Namespace {
  list(query: Query<'listAgents'> = {}): Paginator<T.Agent> {
    return this.paged('listAgents', 'agents', query)
  }
  create(body: Body<'createAgent'>): Answer<'createAgent'> {
    return this.c.call('createAgent', { body })
  }
  get(agentId: string): Answer<'getAgent'> {
    return this.c.call('getAgent', { params: { agent_id: agentId } })
  }
  update(agentId: string, body: Body<'updateAgent'>): Answer<'updateAgent'> {
    return this.c.call('updateAgent', { params: { agent_id: agentId }, body })
  }
  delete(agentId: string): Answer<'deleteAgent'> {
    return this.c.call('deleteAgent', { params: { agent_id: agentId } })
  }
  createKey(agentId: string, body: Body<'createAgentKey'> = {} as Body<'createAgentKey'>): Answer<'createAgentKey'> {
    return this.c.call('createAgentKey', { params: { agent_id: agentId }, body })
  }
  capabilities(agentId: string): Answer<'getAgentCapabilities'> {
    return this.c.call('getAgentCapabilities', { params: { agent_id: agentId } })
  }
  /** GET /agents/me/capabilities: an agent key's own. */
  myCapabilities(): Answer<'getOwnCapabilities'> {
    return this.c.call('getOwnCapabilities')
  }
  usage(agentId: string): Answer<'getAgentUsage'> {
    return this.c.call('getAgentUsage', { params: { agent_id: agentId } })
  }
  myUsage(): Answer<'getOwnUsage'> {
    return this.c.call('getOwnUsage')
  }
}

export class Decisions extends Namespace {
  /**
   * POST /decisions. An idempotency_key is added when none is given, and it stays the same on
   * every retry: a retried decision is answered with the first one, never decided twice.
   */
  decide(body: Body<'decide'>): Answer<'decide'> {
    const keyed = { ...body, idempotency_key: body.idempotency_key ?? randomKey() }
    return this.c.call('decide', { body: keyed }, { safeToRetry: true })
  }
  /** POST /decisions/simulate: what would be decided; nothing is logged. */
  simulate(body: Body<'simulateDecision'>): Answer<'simulateDecision'> {
    return this.c.call('simulateDecision', { body }, { safeToRetry: true })
  }
  list(query: Query<'listDecisions'> = {}): Paginator<T.Decision> {
    return this.paged('listDecisions', 'decisions', query)
  }
  get(decisionId: string): Answer<'getDecision'> {
    return this.c.call('getDecision', { params: { decision_id: decisionId } })
  }
}

export class Toolhive extends Namespace {
  /** POST /toolhive/decision: ToolHive's authorization webhook, for completeness. */
  decision(body: Body<'toolhiveDecision'>, query: Query<'toolhiveDecision'> = {}): Answer<'toolhiveDecision'> {
    return this.c.call('toolhiveDecision', { body, query })
  }
}

export class Leads extends Namespace {
  demoRequests(query: Query<'listDemoRequestLeads'> = {}): Paginator<Item<'listDemoRequestLeads', 'leads'>> {
    return this.paged('listDemoRequestLeads', 'leads', query)
  }
  newsletter(query: Query<'listNewsletterLeads'> = {}): Paginator<Item<'listNewsletterLeads', 'leads'>> {
    return this.paged('listNewsletterLeads', 'leads', query)
  }
  lists(): Answer<'listLeadLists'> {
    return this.c.call('listLeadLists')
  }
  getList(list: string): Answer<'getLeadList'> {
    return this.c.call('getLeadList', { params: { list } as Operations['getLeadList']['params'] })
  }
  updateList(list: string, body: Body<'updateLeadList'>): Answer<'updateLeadList'> {
    return this.c.call('updateLeadList', { params: { list } as Operations['updateLeadList']['params'], body })
  }
  outbox(query: Query<'listLeadMail'> = {}): Paginator<Item<'listLeadMail', 'mails'>> {
    return this.paged('listLeadMail', 'mails', query)
  }
  /** GET /leads/lists/{list}/spam: the list's spam protection (honeypot, CAPTCHA, retention). */
  spamSettings(list: string): Answer<'getLeadListSpam'> {
    return this.c.call('getLeadListSpam', { params: { list } })
  }
  updateSpamSettings(list: string, body: Body<'updateLeadListSpam'>): Answer<'updateLeadListSpam'> {
    return this.c.call('updateLeadListSpam', { params: { list }, body })
  }
  /** GET /leads/spam: submissions held as spam. */
  spam(query: Query<'listLeadSpam'> = {}): Paginator<Item<'listLeadSpam', 'spam'>> {
    return this.paged('listLeadSpam', 'spam', query)
  }
  restoreSpam(id: string | number): Answer<'restoreLeadSpam'> {
    return this.c.call('restoreLeadSpam', { params: { id: String(id) } })
  }
  /** POST /leads/people/export: everything kept about a person (the email travels in the body, never the URL). */
  exportPerson(body: Body<'exportLeadPerson'>): Answer<'exportLeadPerson'> {
    return this.c.call('exportLeadPerson', { body }, { safeToRetry: true })
  }
  /** POST /leads/people/erase: erases a person's lead data. */
  erasePerson(body: Body<'eraseLeadPerson'>): Answer<'eraseLeadPerson'> {
    return this.c.call('eraseLeadPerson', { body })
  }
  /** POST /leads/people/erasures: the erasures recorded for a person. */
  erasures(body: Body<'listLeadPersonErasures'>): Answer<'listLeadPersonErasures'> {
    return this.c.call('listLeadPersonErasures', { body }, { safeToRetry: true })
  }
}

export class Approvals extends Namespace {
  list(query: Query<'listApprovals'> = {}): Paginator<T.Approval> {
    return this.paged('listApprovals', 'approvals', query)
  }
  /** GET /approvals/{id}; with `waitSeconds` (0–60) the server holds the answer while it is pending. */
  get(approvalId: string, waitSeconds?: number): Answer<'getApproval'> {
    const query = waitSeconds === undefined ? {} : { wait: String(Math.max(0, Math.min(60, Math.floor(waitSeconds)))) }
    return this.c.call('getApproval', { params: { approval_id: approvalId }, query }, { timeoutMs: Math.max(this.c.timeoutMs, ((waitSeconds ?? 0) + 30) * 1000) })
  }
  /** Waits until the approval is no longer pending (long polls of up to 60 s); ApprovalTimeout after `timeoutMs`. */
  async wait(approvalId: string, timeoutMs = 900_000): Promise<T.Approval> {
    const deadline = this.c.now() + timeoutMs
    for (;;) {
      const left = deadline - this.c.now()
      const approval = await this.get(approvalId, Math.max(0, Math.min(60, Math.floor(left / 1000))))
      if (approval.status !== 'pending') return approval
      if (deadline - this.c.now() <= 0) {
        throw new ApprovalTimeout(`Approval ${approvalId} is still pending after ${timeoutMs} ms`, { action: approval.action, approval: approval as never })
      }
      if (left < 1000) await this.c.sleep(Math.max(0, Math.min(1000, deadline - this.c.now())))
    }
  }
  approve(approvalId: string, note?: string): Answer<'approveApproval'> {
    return this.c.call('approveApproval', { params: { approval_id: approvalId }, body: note === undefined ? {} : { note } })
  }
  deny(approvalId: string, note?: string): Answer<'denyApproval'> {
    return this.c.call('denyApproval', { params: { approval_id: approvalId }, body: note === undefined ? {} : { note } })
  }
  cancel(approvalId: string): Answer<'cancelApproval'> {
    return this.c.call('cancelApproval', { params: { approval_id: approvalId } })
  }
}

export class Audit extends Namespace {
  list(query: Query<'listAuditEvents'> = {}): Paginator<Item<'listAuditEvents', 'events'>> {
    return this.paged('listAuditEvents', 'events', query)
  }
  verify(query: Query<'verifyAuditLog'> = {}): Answer<'verifyAuditLog'> {
    return this.c.call('verifyAuditLog', { query })
  }
}

export class Webhooks extends Namespace {
  list(query: Query<'listWebhooks'> = {}): Paginator<T.Webhook> {
    return this.paged('listWebhooks', 'webhooks', query)
  }
  create(body: Body<'createWebhook'>): Answer<'createWebhook'> {
    return this.c.call('createWebhook', { body })
  }
  get(webhookId: string): Answer<'getWebhook'> {
    return this.c.call('getWebhook', { params: { webhook_id: webhookId } })
  }
  delete(webhookId: string): Answer<'deleteWebhook'> {
    return this.c.call('deleteWebhook', { params: { webhook_id: webhookId } })
  }
  deliveries(webhookId: string, query: Query<'listWebhookDeliveries'> = {}): Paginator<T.WebhookDelivery> {
    return this.paged('listWebhookDeliveries', 'deliveries', query, { webhook_id: webhookId })
  }
  delivery(webhookId: string, deliveryId: string): Answer<'getWebhookDelivery'> {
    return this.c.call('getWebhookDelivery', { params: { webhook_id: webhookId, delivery_id: deliveryId } })
  }
  replayDelivery(webhookId: string, deliveryId: string): Answer<'replayWebhookDelivery'> {
    return this.c.call('replayWebhookDelivery', { params: { webhook_id: webhookId, delivery_id: deliveryId } })
  }
}

export class McpServers extends Namespace {
  list(query: Query<'listMcpServers'> = {}): Paginator<T.McpServer> {
    return this.paged('listMcpServers', 'servers', query)
  }
  create(body: Body<'createMcpServer'>): Answer<'createMcpServer'> {
    return this.c.call('createMcpServer', { body })
  }
  get(serverId: string): Answer<'getMcpServer'> {
    return this.c.call('getMcpServer', { params: { server_id: serverId } })
  }
  update(serverId: string, body: Body<'updateMcpServer'>): Answer<'updateMcpServer'> {
    return this.c.call('updateMcpServer', { params: { server_id: serverId }, body })
  }
  delete(serverId: string): Answer<'deleteMcpServer'> {
    return this.c.call('deleteMcpServer', { params: { server_id: serverId } })
  }
}

export class Reports extends Namespace {
  decisions(query: Query<'reportDecisions'> = {}): Answer<'reportDecisions'> {
    return this.c.call('reportDecisions', { query })
  }
  denials(query: Query<'reportDenials'> = {}): Answer<'reportDenials'> {
    return this.c.call('reportDenials', { query })
  }
  approvals(query: Query<'reportApprovals'> = {}): Answer<'reportApprovals'> {
    return this.c.call('reportApprovals', { query })
  }
  policies(query: Query<'reportPolicies'> = {}): Answer<'reportPolicies'> {
    return this.c.call('reportPolicies', { query })
  }
  policy(policyId: string, query: Query<'reportPolicy'> = {}): Answer<'reportPolicy'> {
    return this.c.call('reportPolicy', { params: { policy_id: policyId }, query })
  }
  agents(query: Query<'reportAgents'> = {}): Answer<'reportAgents'> {
    return this.c.call('reportAgents', { query })
  }
  leads(query: Query<'reportLeads'> = {}): Answer<'reportLeads'> {
    return this.c.call('reportLeads', { query })
  }
}
