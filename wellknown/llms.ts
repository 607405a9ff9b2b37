// /llms.txt (llmstxt.org): "# Title", "> summary", a paragraph, then "## Section" blocks whose
// every line is "- [name](absolute-url): note"; "## Optional" last.
import type { Config } from '../config.ts'

export interface LlmsLink {
  readonly name: string
  readonly url: string
  readonly note: string
}

interface OperationLike {
  operationId?: unknown
  summary?: unknown
  security?: unknown
  deprecated?: unknown
  tags?: unknown
}

/** Link text may not hold brackets or line breaks; notes stay on one line. */
function oneLine(text: string): string {
  return text.replace(/[\r\n]+/g, ' ').replace(/[[\]]/g, '').trim()
}

function line(link: LlmsLink): string {
  return `- [${oneLine(link.name)}](${link.url}): ${oneLine(link.note)}`
}

/** Operations grouped by their first tag; links only for paths without parameters (valid URLs). */
function operationSections(openapi: { servers?: { url: string }[]; paths?: Record<string, Record<string, unknown>> }): Map<string, LlmsLink[]> {
  const sections = new Map<string, LlmsLink[]>()
  const defaultServer = openapi.servers?.[0]?.url ?? ''
  for (const [path, item] of Object.entries(openapi.paths ?? {})) {
    if (path.includes('{')) continue
    const server = (item.servers as { url: string }[] | undefined)?.[0]?.url ?? defaultServer
    for (const [method, value] of Object.entries(item)) {
      const operation = value as OperationLike
      if (method === 'servers' || typeof operation?.operationId !== 'string') continue
      const tag = Array.isArray(operation.tags) && typeof operation.tags[0] === 'string' ? operation.tags[0] : 'API'
      if (tag === 'Discovery') continue
      const access = Array.isArray(operation.security) && operation.security.length === 0 ? 'public' : 'bearer token'
      const deprecated = operation.deprecated === true ? ', deprecated' : ''
      const links = sections.get(tag) ?? []
      links.push({
        name: typeof operation.summary === 'string' ? operation.summary : operation.operationId,
        url: `${server}${path}`,
        note: `${method.toUpperCase()} ${path} (${operation.operationId}; ${access}${deprecated})`,
      })
      sections.set(tag, links)
    }
  }
  return sections
}

export function buildLlmsTxt(config: Config, openapi: { servers?: { url: string }[]; paths?: Record<string, Record<string, unknown>> }): string {
  const out: string[] = [
    '# Steward',
    '',
    '> Public lead capture (demo requests, newsletter) and a bearer-token product API that governs what autonomous AI agents in an enterprise may do.',
    '',
    'The product API reads and enforces policies on agent actions and adds human approval to sensitive ones. It is not a content generator. ' +
      'Policies match agents, actions and resources by patterns (* matches any run of characters), may carry a CEL condition, keep every version, and can be replayed as drafts against logged decisions before they are enforced. ' +
      `Access is provisioned per organization by a human in the console at ${config.appUrl}; agents cannot self-provision. ` +
      `Exchange a key for a token at ${config.productApiUrl}/auth/login and send "Authorization: Bearer <token>". ` +
      'The lead-capture operations need no credentials.',
    '',
    `To ask whether an agent may act, send POST ${config.productApiUrl}/decisions with a JSON body {"agent": "<handle>", "action": "payments.refund", "resource": "order/8812", "args": {…}, "context": {…}} ` +
      '(with a key bound to the agent, "agent" may be left out; "resource" defaults to ""; args and context are JSON objects, together at most 16 KiB). ' +
      'Every decision answers 200 with "decision": "allow", "deny" or "require_approval", the "reasons" (the policies, or a rule such as default_decision, agent_suspended or unknown_agent), a "decision_id" and "args_sha256". ' +
      'Act only on allow; treat any other answer, and any error (a 503 means the decision could not be recorded), as a refusal. ' +
      'Send an "idempotency_key" to retry safely: the same key from the same credential within 24 hours returns the first answer. ' +
      `POST ${config.productApiUrl}/decisions/simulate answers the same without recording anything, and GET ${config.productApiUrl}/agents/me/capabilities lists what an agent key may do. ` +
      `A policy may carry budgets: a "deny" with the rule limit_exceeded names the limit, its window, what was used and what remains (its "message" says it in one sentence); GET ${config.productApiUrl}/agents/me/usage says what is left of each limit and when it resets.`,
    '',
    'When the decision is "require_approval", a person must approve this exact action first; the answer carries "approval": {"approval_id", "status": "pending", "expires_at"}. ' +
      `Wait with GET ${config.productApiUrl}/approvals/<approval_id>?wait=60, repeating while "status" is "pending" (each call holds up to 60 seconds and answers as soon as a person decides). ` +
      'When it is "approved", send the same POST /decisions again (same agent, action, resource and args) with "approval_id": "<approval_id>": the answer is "allow" (reason rule "approval"), once, before "use_by". ' +
      'Other args answer "deny" (approval_mismatch); a second use, or a "denied", "expired" or "cancelled" approval, answers "deny" (approval_unusable). A timeout is a deny; never act without an allow.',
  ]
  for (const [tag, links] of operationSections(openapi)) {
    out.push('', `## ${oneLine(tag)}`, '', ...links.map(line))
  }
  out.push(
    '',
    '## Discovery',
    '',
    line({ name: 'OpenAPI 3.1 description', url: `${config.appUrl}/openapi.json`, note: 'every operation, schema and security requirement' }),
    line({ name: 'OAuth protected resource metadata', url: `${config.appUrl}/.well-known/oauth-protected-resource`, note: 'RFC 9728: resource, scopes, authorization server' }),
    line({ name: 'OAuth authorization server metadata', url: `${config.appUrl}/.well-known/oauth-authorization-server`, note: 'RFC 8414: token endpoint and grant types' }),
    '',
    '## Optional',
    '',
    line({ name: 'API catalog', url: `${config.appUrl}/.well-known/api-catalog`, note: 'RFC 9727 linkset of the APIs on this server' }),
    line({ name: 'agents.json', url: `${config.appUrl}/agents.json`, note: 'task flows mapped to OpenAPI operations' }),
    line({ name: 'AI plugin manifest', url: `${config.appUrl}/.well-known/ai-plugin.json`, note: 'plugin manifest v1' }),
  )
  return out.join('\n') + '\n'
}
