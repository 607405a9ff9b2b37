// guard: run an async function only when Steward allows it. The decision's args are the call's
// arguments, made JSON-safe once per call so that the very same arguments are decided and, after
// an approval, decided again: the approval is bound to their hash and refused for any others.
import { ActionDenied, ApprovalExpired, ApprovalTimeout } from './errors.ts'
import type { Approvals, Decisions } from './resources.ts'
import type { DecisionAnswer } from './types.gen.ts'

export interface GuardOptions<A extends unknown[]> {
  /** The action decided, e.g. "payments.refund". */
  action: string
  /** What it acts on: a string, or a function of the call's arguments. */
  resource?: string | ((...args: A) => string)
  /** The agent's handle; an agent key implies its own. */
  agent?: string
  context?: Record<string, unknown>
  /**
   * The decision's args. Default: the call's only argument when it is a plain object (the usual
   * shape of a tool's input), else `{"args": [...]}`.
   */
  args?: (...args: A) => Record<string, unknown>
  /** How long to wait for the people when approval is required (default 15 minutes); then ApprovalTimeout. */
  approvalTimeoutMs?: number
  /** Called once when an approval is requested (to tell the user whom they wait for). */
  onApproval?: (approval: NonNullable<DecisionAnswer['approval']>) => void
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** A JSON round trip: the arguments decided are exactly what JSON can carry. */
function jsonable(value: unknown): Record<string, unknown> {
  return JSON.parse(JSON.stringify(value ?? {}, (_key, v) => (typeof v === 'bigint' ? String(v) : v)))
}

function summary(decision: DecisionAnswer): string {
  const names = (decision.reasons ?? []).map((reason) => String(reason.name ?? reason.rule ?? reason.policy_id ?? '?'))
  return names.join(', ') || 'no reason given'
}

/** The arguments a guard decides for one call. */
export function decisionArgs<A extends unknown[]>(options: GuardOptions<A>, args: A): Record<string, unknown> {
  if (options.args) return jsonable(options.args(...args))
  if (args.length === 1 && isPlainObject(args[0])) return jsonable(args[0])
  return jsonable({ args })
}

/**
 * Asks for a decision and waits for an approval when one is required: resolves with the allowing
 * decision, or throws ActionDenied (deny, a denied or cancelled approval), ApprovalExpired or
 * ApprovalTimeout.
 */
export async function authorize(decisions: Decisions, approvals: Approvals, options: GuardOptions<never[]> & { resource?: string }, args: Record<string, unknown>): Promise<DecisionAnswer> {
  const { action } = options
  const decide = (approvalId: string | null) =>
    decisions.decide({ action, resource: options.resource ?? '', args, ...(options.context ? { context: options.context } : {}), ...(options.agent ? { agent: options.agent } : {}), approval_id: approvalId })
  const decision = await decide(null)
  if (decision.decision === 'allow') return decision
  if (decision.decision !== 'require_approval') throw new ActionDenied(`Steward denied ${action}: ${summary(decision)}`, { action, decision: decision as never })
  const approvalId = decision.approval?.approval_id
  if (!approvalId) throw new ActionDenied(`Steward asked for an approval of ${action} but named none`, { action, decision: decision as never })
  options.onApproval?.(decision.approval!)
  let final
  try {
    final = await approvals.wait(approvalId, options.approvalTimeoutMs ?? 900_000)
  } catch (error) {
    if (error instanceof ApprovalTimeout) throw new ApprovalTimeout(error.message, { action, decision: decision as never, approval: error.approval })
    throw error
  }
  if (final.status === 'expired') throw new ApprovalExpired(`Approval ${approvalId} of ${action} expired: a deny`, { action, decision: decision as never, approval: final as never })
  if (final.status !== 'approved') throw new ActionDenied(`Approval ${approvalId} of ${action} is ${final.status}`, { action, decision: decision as never, approval: final as never })
  const used = await decide(approvalId)
  if (used.decision !== 'allow') throw new ActionDenied(`Steward denied ${action} with approval ${approvalId}: ${summary(used)}`, { action, decision: used as never, approval: final as never })
  return used
}

/** Wraps an async function: each call is decided first, and runs only when allowed. */
export function guardFunction<A extends unknown[], R>(decisions: Decisions, approvals: Approvals, fn: (...args: A) => R | Promise<R>, options: GuardOptions<A>): (...args: A) => Promise<R> {
  if (typeof options?.action !== 'string' || options.action === '') throw new TypeError("guard needs an action, e.g. guard(fn, { action: 'payments.refund' })")
  return async (...args: A): Promise<R> => {
    const resource = typeof options.resource === 'function' ? String(options.resource(...args)) : options.resource
    await authorize(decisions, approvals, { ...options, resource } as never, decisionArgs(options, args))
    return fn(...args)
  }
}

/**
 * A tool in the shape the OpenAI Agents SDK, the Vercel AI SDK and most agent frameworks share:
 * a name, a JSON Schema of its input, and `execute(input, ...rest)`.
 */
export interface ExecutableTool<I = any, R = unknown> {
  name?: string
  description?: string
  parameters?: unknown
  execute: (input: I, ...rest: any[]) => R | Promise<R>
  [other: string]: unknown
}

export interface ToolGuardOptions<I> {
  /** Default: the tool's name. */
  action?: string
  resource?: string | ((input: I) => string)
  agent?: string
  context?: Record<string, unknown>
  approvalTimeoutMs?: number
  /** 'throw' (default) lets the framework report the error; 'return' answers the model a short refusal instead. */
  onDeny?: 'throw' | 'return'
}

/**
 * The same tool with `execute` governed: its input is the decision's args, its name the action
 * (unless given). Every other property is kept as it is.
 */
export function guardToolWith<Tool extends ExecutableTool>(decisions: Decisions, approvals: Approvals, tool: Tool, options: ToolGuardOptions<Parameters<Tool['execute']>[0]> = {}): Tool {
  type I = Parameters<Tool['execute']>[0]
  const action = options.action ?? tool.name
  if (!action) throw new TypeError('guardTool needs an action: the tool has no name')
  const execute = async (input: I, ...rest: unknown[]) => {
    const resource = typeof options.resource === 'function' ? String(options.resource(input)) : options.resource
    try {
      await authorize(decisions, approvals, { action, resource, agent: options.agent, context: options.context, approvalTimeoutMs: options.approvalTimeoutMs } as never, isPlainObject(input) ? jsonable(input) : jsonable({ input }))
    } catch (error) {
      if (options.onDeny === 'return' && error instanceof ActionDenied) return `Not allowed: ${error.message}`
      throw error
    }
    return tool.execute(input, ...rest)
  }
  return { ...tool, execute }
}
