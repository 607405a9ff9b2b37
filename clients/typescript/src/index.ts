// The Steward TypeScript client: `new Steward()` reads STEWARD_API_KEY and STEWARD_BASE_URL (or
// takes apiKey and baseUrl), and has a namespace per resource, `guard` for async functions and
// `guardTool` for agent tools. fetch only; no dependencies.
import { Core, type ClientOptions } from './core.ts'
import { guardFunction, guardToolWith, type ExecutableTool, type GuardOptions, type ToolGuardOptions } from './guard.ts'
import { Agents, Approvals, Audit, Auth, Decisions, Invitations, Keys, Leads, McpServers, Members, Organization, Policies, Reports, Toolhive, Webhooks } from './resources.ts'

export class Steward {
  readonly core: Core
  readonly auth: Auth
  readonly policies: Policies
  readonly organization: Organization
  readonly keys: Keys
  readonly members: Members
  readonly invitations: Invitations
  readonly agents: Agents
  readonly decisions: Decisions
  readonly toolhive: Toolhive
  readonly leads: Leads
  readonly approvals: Approvals
  readonly audit: Audit
  readonly webhooks: Webhooks
  readonly mcpServers: McpServers
  readonly reports: Reports

  constructor(options: ClientOptions = {}) {
    this.core = new Core(options)
    this.auth = new Auth(this.core)
    this.policies = new Policies(this.core)
    this.organization = new Organization(this.core)
    this.keys = new Keys(this.core)
    this.members = new Members(this.core)
    this.invitations = new Invitations(this.core)
    this.agents = new Agents(this.core)
    this.decisions = new Decisions(this.core)
    this.toolhive = new Toolhive(this.core)
    this.leads = new Leads(this.core)
    this.approvals = new Approvals(this.core)
    this.audit = new Audit(this.core)
    this.webhooks = new Webhooks(this.core)
    this.mcpServers = new McpServers(this.core)
    this.reports = new Reports(this.core)
  }

  get baseUrl(): string {
    return this.core.baseUrl
  }

  /** Signs a person in; the session is refreshed before it expires, transparently. */
  signIn(email: string, password: string, organizationId?: string) {
    return this.core.signIn(email, password, organizationId)
  }

  signOut(): void {
    this.core.signOut()
  }

  /**
   * `fn` governed: each call asks Steward first. allow runs it; deny throws ActionDenied;
   * require_approval waits for the people (`approvalTimeoutMs`), then decides again with the
   * approval for exactly these arguments, and runs.
   */
  guard<A extends unknown[], R>(fn: (...args: A) => R | Promise<R>, options: GuardOptions<A>): (...args: A) => Promise<R> {
    return guardFunction(this.decisions, this.approvals, fn, options)
  }

  /** An agent tool (`{name, parameters, execute}`) whose execute is governed like `guard`. */
  guardTool<Tool extends ExecutableTool>(tool: Tool, options: ToolGuardOptions<Parameters<Tool['execute']>[0]> = {}): Tool {
    return guardToolWith(this.decisions, this.approvals, tool, options)
  }

  toJSON(): Record<string, unknown> {
    return this.core.toJSON()
  }
}

export { Core, Paginator, segment, VERSION, type ClientOptions, type Page, type RawResponse, type RequestOptions } from './core.ts'
export * from './errors.ts'
export type { ExecutableTool, GuardOptions, ToolGuardOptions } from './guard.ts'
export type * from './types.gen.ts'
export { ROUTE_TABLE } from './routes.ts'
