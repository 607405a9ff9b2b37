// Operator commands for agents, the decision log and approvals: create, list and suspend agents,
// list logged decisions, list approvals and vote on one as a named member. They use the same
// storage functions (and vote rules) as the API (a suspension bumps the ruleset revision, so every
// server applies it from the very next decision; a vote notifies waiting servers on PostgreSQL).
import { createAgent, findAgentByHandle, HandleTakenError, listAgents, updateAgent, type Agent } from '../storage/agents.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { CapReachedError } from '../storage/caps.ts'
import { listDecisions } from '../storage/decision-log.ts'
import type { DecisionRecord } from '../storage/decisions.ts'
import { findOrganization } from '../storage/organizations.ts'
import { asOf, listApprovals, voteOnApproval, type ApprovalRecord } from '../storage/approvals.ts'
import { findMember, findUserByEmail } from '../storage/users.ts'
import { voteRefusal } from '../domain/approvals.ts'
import { UUID } from '../domain/uuid.ts'
import { HANDLE } from '../domain/agents.ts'
import { CommandFailed, UsageError, type Command, type Options, type OptionSpec } from './command.ts'
import { withDatabase } from './database.ts'
import type { DatabaseHandle } from '../database/connect.ts'

const ORG: OptionSpec = { type: 'string', value: 'ID', description: "the organization's id, as org create prints it", required: true }
const FORMAT: OptionSpec = { type: 'string', value: 'FORMAT', description: 'aligned columns for people, or a JSON array for scripts', choices: ['table', 'json'], default: 'table' }
const HANDLE_RULE = '1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'

function text(options: Options, name: string): string {
  const value = options[name]
  return typeof value === 'string' ? value : ''
}

function orgOption(options: Options): string {
  const value = text(options, 'org')
  if (!UUID.test(value)) throw new UsageError('--org must be a UUID')
  return value.toLowerCase()
}

function handleOption(options: Options, name = 'handle'): string {
  const value = text(options, name)
  if (!HANDLE.test(value)) throw new UsageError(`--${name} must be ${HANDLE_RULE}`)
  return value
}

async function requireOrganization(db: DatabaseHandle['db'], orgId: string): Promise<void> {
  if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
}

/** Aligned columns; a value cannot break the layout (control characters become spaces). */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = [header, ...rows.map((row) => row.map((cell) => cell.replace(/[\u0000-\u001f\u007f]/g, ' ')))]
  const widths = header.map((_, column) => Math.max(...cells.map((line) => line[column]!.length)))
  return cells.map((line) => line.map((cell, column) => (column === line.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n') + '\n'
}

const iso = (date: Date | null) => (date ? date.toISOString().replace(/\.\d{3}Z$/, 'Z') : 'never')

const agentCreate: Command = {
  name: 'agent create',
  summary: 'register an agent (active); prints its id',
  options: {
    org: ORG,
    handle: { type: 'string', value: 'HANDLE', description: `what policies match: ${HANDLE_RULE}`, required: true },
    name: { type: 'string', value: 'NAME', description: 'display name', default: '' },
    description: { type: 'string', value: 'TEXT', description: 'what the agent is for', default: '' },
  },
  async run({ options, config, io, database }) {
    const orgId = orgOption(options)
    const handle = handleOption(options)
    const name = text(options, 'name')
    const description = text(options, 'description')
    if (name.length > 200 || description.length > 2000) throw new UsageError('--name has at most 200 characters, --description at most 2000')
    return withDatabase({ config, database }, async ({ db }) => {
      await requireOrganization(db, orgId)
      let agent: Agent
      try {
        const fields = { handle, display_name: name, description, owner_user_id: null, labels: {}, status: 'active' as const }
        agent = await createAgent(db, orgId, fields, new Date(), { limit: config.maxAgentsPerOrg, what: 'agents', setting: 'MAX_AGENTS_PER_ORG' }, BY_OPERATOR)
      } catch (error) {
        if (error instanceof HandleTakenError || error instanceof CapReachedError) throw new CommandFailed(error.message)
        throw error
      }
      io.stderr.write(`created agent ${handle}\n`)
      io.stdout.write(`${agent.agent_id}\n`)
      return 0
    })
  },
}

const agentList: Command = {
  name: 'agent list',
  summary: "list an organization's agents, newest first",
  options: {
    org: ORG,
    status: { type: 'string', value: 'STATUS', description: 'only agents in this status', choices: ['active', 'suspended', 'discovered'] },
    format: FORMAT,
  },
  async run({ options, config, io, database }) {
    const orgId = orgOption(options)
    const status = typeof options.status === 'string' ? (options.status as Agent['status']) : null
    return withDatabase({ config, database }, async ({ db }) => {
      await requireOrganization(db, orgId)
      const agents = await listAgents(db, orgId, { status, after: null, limit: config.maxAgentsPerOrg })
      if (options.format === 'json') {
        const rows = agents.map((a) => ({ agent_id: a.agent_id, handle: a.handle, display_name: a.display_name, status: a.status, created_at: a.created_at.toISOString(), last_seen_at: a.last_seen_at?.toISOString() ?? null }))
        io.stdout.write(`${JSON.stringify(rows, null, 2)}\n`)
      } else {
        io.stdout.write(table(['agent_id', 'handle', 'status', 'created', 'last_seen'], agents.map((a) => [a.agent_id, a.handle, a.status, iso(a.created_at), iso(a.last_seen_at)])))
      }
      return 0
    })
  },
}

const agentSuspend: Command = {
  name: 'agent suspend',
  summary: 'suspend an agent: every decision for it is deny from the next one on (--resume: active again)',
  options: {
    org: ORG,
    handle: { type: 'string', value: 'HANDLE', description: 'the agent to suspend', required: true },
    resume: { type: 'boolean', description: 'set the agent active instead' },
  },
  async run({ options, config, io, database }) {
    const orgId = orgOption(options)
    const handle = handleOption(options)
    const status = options.resume === true ? 'active' : 'suspended'
    return withDatabase({ config, database }, async ({ db }) => {
      await requireOrganization(db, orgId)
      const agent = await findAgentByHandle(db, orgId, handle)
      if (!agent) throw new UsageError(`no agent ${handle} in ${orgId}`)
      await updateAgent(db, orgId, agent.agent_id, { status }, new Date(), BY_OPERATOR)
      io.stdout.write(`${handle} is ${status}\n`)
      return 0
    })
  },
}

const decisionList: Command = {
  name: 'decision list',
  summary: "list an organization's logged decisions, newest first",
  options: {
    org: ORG,
    agent: { type: 'string', value: 'HANDLE', description: 'only decisions for this agent' },
    decision: { type: 'string', value: 'DECISION', description: 'only this outcome', choices: ['allow', 'deny', 'require_approval'] },
    limit: { type: 'string', value: 'N', description: 'at most N decisions (1 to 10000)', default: '100' },
    format: FORMAT,
  },
  async run({ options, config, io, database }) {
    const orgId = orgOption(options)
    const agent = options.agent === undefined ? null : handleOption(options, 'agent')
    const rawLimit = text(options, 'limit')
    if (!/^\d{1,5}$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 10_000) throw new UsageError('--limit must be a whole number from 1 to 10000')
    const filter = { agentHandle: agent, agentId: null, action: null, decision: (options.decision as DecisionRecord['decision'] | undefined) ?? null, from: null, to: null }
    return withDatabase({ config, database }, async ({ db }) => {
      await requireOrganization(db, orgId)
      const rows = await listDecisions(db, orgId, filter, { after: null, limit: Number(rawLimit) })
      if (options.format === 'json') {
        io.stdout.write(`${JSON.stringify(rows.map((row) => ({ ...row, evaluated_at: row.evaluated_at.toISOString() })), null, 2)}\n`)
      } else {
        const why = (row: DecisionRecord) => (row.reasons as { name?: string; rule?: string }[]).map((reason) => reason.rule ?? reason.name ?? '').join('; ')
        io.stdout.write(table(['evaluated_at', 'decision_id', 'agent', 'action', 'resource', 'decision', 'why'], rows.map((row) => [iso(row.evaluated_at), row.decision_id, row.agent_handle, row.action, row.resource, row.decision, why(row)])))
      }
      return 0
    })
  },
}

const approvalList: Command = {
  name: 'approval list',
  summary: "list an organization's approvals, oldest first (pending ones by default)",
  options: {
    org: ORG,
    status: { type: 'string', value: 'STATUS', description: 'only approvals in this state (as of now)', choices: ['pending', 'approved', 'denied', 'expired', 'cancelled', 'consumed'], default: 'pending' },
    format: FORMAT,
  },
  async run({ options, config, io, database }) {
    const orgId = orgOption(options)
    const status = text(options, 'status') as ApprovalRecord['status']
    return withDatabase({ config, database }, async ({ db }) => {
      await requireOrganization(db, orgId)
      const rows = await listApprovals(db, orgId, { status, agentId: null }, new Date(), { after: null, limit: 10_000 })
      if (options.format === 'json') {
        io.stdout.write(`${JSON.stringify(rows.map((row) => ({ approval_id: row.approval_id, status: row.status, agent: row.agent_handle, action: row.action, resource: row.resource, args: row.args, context: row.context, policies: row.policies, created_at: row.created_at.toISOString(), expires_at: row.expires_at.toISOString() })), null, 2)}\n`)
      } else {
        io.stdout.write(table(['created_at', 'approval_id', 'status', 'agent', 'action', 'resource', 'expires_at'], rows.map((row) => [iso(row.created_at), row.approval_id, row.status, row.agent_handle, row.action, row.resource, iso(row.expires_at)])))
      }
      return 0
    })
  },
}

function approvalVote(kind: 'approve' | 'deny'): Command {
  return {
    name: `approval ${kind}`,
    summary: `${kind} a pending approval, recorded as the member named by --as (their role and the no-self-approval rule apply)`,
    options: {
      org: ORG,
      id: { type: 'string', value: 'ID', description: 'the approval id', required: true },
      as: { type: 'string', value: 'EMAIL', description: 'the member who decides', required: true },
      note: { type: 'string', value: 'TEXT', description: 'why (at most 1000 characters)' },
    },
    async run({ options, config, io, database }) {
      const orgId = orgOption(options)
      const id = text(options, 'id')
      if (!UUID.test(id)) throw new UsageError('--id must be a UUID')
      const note = typeof options.note === 'string' ? options.note : null
      if (note !== null && (note.length > 1000 || note.includes('\u0000'))) throw new UsageError('--note has at most 1000 characters and no NUL')
      return withDatabase({ config, database }, async ({ db }) => {
        await requireOrganization(db, orgId)
        const user = await findUserByEmail(db, text(options, 'as'))
        const member = user ? await findMember(db, orgId, user.id) : null
        if (!user || !member) throw new UsageError(`${text(options, 'as')} is not a member of ${orgId}`)
        const now = new Date()
        const outcome = await voteOnApproval(db, orgId, id.toLowerCase(), { userId: user.id, vote: kind, note }, now, (approval, facts) => {
          const refusal = voteRefusal(approval, { role: member.role, userId: user.id, email: facts.voterEmail, ownerUserId: facts.ownerUserId })
          if (refusal !== null) throw new CommandFailed(refusal)
        }, BY_OPERATOR)
        if (outcome.kind === 'not_found') throw new UsageError(`no approval ${id} in ${orgId}`)
        if (outcome.kind === 'closed') throw new CommandFailed(`This approval is no longer pending: it is ${outcome.approval.status}`)
        if (outcome.kind === 'repeat') throw new CommandFailed(`${user.email} has already voted on this approval; each person counts once`)
        io.stdout.write(`${asOf(outcome.approval, now).status}\n`)
        return 0
      })
    },
  }
}

export const governanceCommands: readonly Command[] = [agentCreate, agentList, agentSuspend, decisionList, approvalList, approvalVote('approve'), approvalVote('deny')]
