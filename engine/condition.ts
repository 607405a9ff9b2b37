// Policy conditions: CEL expressions compiled once (when a policy is written, and again when an
// organization's set is compiled) and evaluated per decision with no I/O.
//
// Values reach CEL as they came out of JSON: numbers are CEL doubles (as for google.protobuf.Value),
// objects are maps, arrays are lists. Comparisons across int and double work (`args.amount > 100`);
// arithmetic mixing them does not (`args.amount * 2` is an error, `args.amount * 2.0` is not).
import { Environment, type ASTNode } from '@marcbachmann/cel-js'

/** Longest condition accepted, in UTF-8 bytes: it also bounds nesting and literal sizes. */
export const MAX_CONDITION_BYTES = 4096

/** The variables a condition can read. `now` is the decision time, passed in (never read from a clock). */
export interface ConditionVariables {
  readonly agent: { readonly id: string; readonly handle: string; readonly labels: Readonly<Record<string, string>> }
  readonly action: string
  readonly resource: string
  readonly args: Readonly<Record<string, unknown>>
  readonly context: Readonly<Record<string, unknown>>
  readonly now: Date
}

/** Where a condition failed to compile: a 0-based UTF-16 offset and 1-based line and column. */
export interface ConditionCompileError {
  readonly message: string
  readonly offset: number
  readonly line: number
  readonly column: number
}

export type ConditionOutcome = { readonly ok: true; readonly value: boolean } | { readonly ok: false; readonly message: string }

export interface CompiledCondition {
  readonly source: string
  evaluate(variables: ConditionVariables): ConditionOutcome
}

export type ConditionCompileResult =
  | { readonly ok: true; readonly condition: CompiledCondition }
  | { readonly ok: false; readonly error: ConditionCompileError }

// One environment for the process: building one is the expensive part, parsing against it is not.
/**
 * Library options: mixed list and map literals are allowed (as the CEL specification and cel-go
 * do); nesting is bounded well below the library's default of 250, which a 4 KiB condition never
 * needs.
 */
export const CEL_OPTIONS = Object.freeze({ homogeneousAggregateLiterals: false, limits: Object.freeze({ maxDepth: 32, maxAstNodes: 4096 }) })

let environment: Environment | null = null
function celEnvironment(): Environment {
  environment ??= new Environment(CEL_OPTIONS)
    .registerVariable('agent', 'map')
    .registerVariable('action', 'string')
    .registerVariable('resource', 'string')
    .registerVariable('args', 'map')
    .registerVariable('context', 'map')
    .registerVariable('now', 'google.protobuf.Timestamp')
  return environment
}

// Macros that loop over a list or map taken from the request. One loop costs O(n) over at most
// 16 KiB of args; a loop inside a loop would cost O(n²) (and deeper, worse) on input an agent
// controls, so nesting is refused when the condition is written.
const LOOP_MACROS = new Set(['all', 'exists', 'exists_one', 'existsOne', 'map', 'filter', 'transformList', 'transformMap', 'transformMapEntry'])

/** Compiles a condition, or says what is wrong and where (for a 400 on policy write). */
export function compileCondition(source: string): ConditionCompileResult {
  if (new TextEncoder().encode(source).length > MAX_CONDITION_BYTES) {
    return failure(source, `Condition is longer than ${MAX_CONDITION_BYTES} bytes`, MAX_CONDITION_BYTES)
  }
  let program: ReturnType<Environment['parse']>
  try {
    program = celEnvironment().parse(source)
  } catch (error) {
    return failure(source, summaryOf(error), startOf(error))
  }
  const checked = program.check()
  if (!checked.valid) return failure(source, summaryOf(checked.error), startOf(checked.error))
  if (checked.type !== 'bool' && checked.type !== 'dyn') {
    return failure(source, `Condition must return a bool, not ${checked.type}`, 0)
  }
  const refused = refusedConstruct(program.ast, false)
  if (refused) return failure(source, refused.message, refused.node.start)
  return { ok: true, condition: { source, evaluate: (variables) => run(program, variables) } }
}

/**
 * Compiles an expression of any type (a limit's amount), with the same environment, size bound
 * and refused constructs as a condition; the caller checks the value it returns.
 */
export function compileExpression(source: string): { ok: true; evaluate: (variables: ConditionVariables) => { ok: true; value: unknown } | { ok: false; message: string } } | { ok: false; error: ConditionCompileError } {
  if (source.trim() === '') return failure(source, 'Expression is empty', 0)
  if (new TextEncoder().encode(source).length > MAX_CONDITION_BYTES) return failure(source, `Expression is longer than ${MAX_CONDITION_BYTES} bytes`, MAX_CONDITION_BYTES)
  let program: ReturnType<Environment['parse']>
  try {
    program = celEnvironment().parse(source)
  } catch (error) {
    return failure(source, summaryOf(error), startOf(error))
  }
  const checked = program.check()
  if (!checked.valid) return failure(source, summaryOf(checked.error), startOf(checked.error))
  const refused = refusedConstruct(program.ast, false)
  if (refused) return failure(source, refused.message, refused.node.start)
  return {
    ok: true,
    evaluate: (variables) => {
      try {
        return { ok: true, value: program(variables) }
      } catch (error) {
        return { ok: false, message: summaryOf(error) }
      }
    },
  }
}

function run(program: (context: ConditionVariables) => unknown, variables: ConditionVariables): ConditionOutcome {
  let value: unknown
  try {
    value = program(variables)
  } catch (error) {
    return { ok: false, message: summaryOf(error) }
  }
  if (typeof value === 'boolean') return { ok: true, value }
  return { ok: false, message: `Condition returned ${describe(value)}, not a bool` }
}

/** Constructs that compile but are refused in policy conditions, with the reason. */
function refusedConstruct(node: ASTNode, insideLoop: boolean): { node: ASTNode; message: string } | null {
  if (node.op === 'call' || node.op === 'rcall') {
    const name = node.args[0]
    // JavaScript regular expressions backtrack: one crafted pattern plus agent-supplied text
    // could stall every decision of the process. CEL specifies RE2, which this runtime lacks.
    if (name === 'matches') {
      return { node, message: 'matches() is not available in conditions: use startsWith, endsWith or contains' }
    }
    if (node.op === 'rcall' && LOOP_MACROS.has(name)) {
      if (insideLoop) return { node, message: `${name}() inside another list macro is not allowed: nested loops over request data are too costly` }
      const receiver = refusedConstruct(node.args[1], insideLoop)
      if (receiver) return receiver
      for (const argument of node.args[2]) {
        const found = refusedConstruct(argument, true)
        if (found) return found
      }
      return null
    }
  }
  for (const child of childrenOf(node)) {
    const found = refusedConstruct(child, insideLoop)
    if (found) return found
  }
  return null
}

function childrenOf(node: ASTNode): ASTNode[] {
  const out: ASTNode[] = []
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) visit(item)
    else if (isNode(value)) out.push(value)
  }
  if (node.op !== 'value' && node.op !== 'id') visit(node.args)
  return out
}

function isNode(value: unknown): value is ASTNode {
  return typeof value === 'object' && value !== null && 'op' in value && 'args' in value
}

function failure(source: string, message: string, offset: number): { ok: false; error: ConditionCompileError } {
  const clamped = Math.max(0, Math.min(offset, source.length))
  const before = source.slice(0, clamped)
  const line = before.split('\n').length
  const column = clamped - (before.lastIndexOf('\n') + 1) + 1
  return { ok: false, error: { message, offset: clamped, line, column } }
}

/** The library's one-line summary (its `message` also carries a source excerpt over several lines). */
function summaryOf(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const summary = (error as { summary?: unknown }).summary
    if (typeof summary === 'string' && summary !== '') return summary
    const message = (error as { message?: unknown }).message
    if (typeof message === 'string' && message !== '') return message.split('\n')[0]!
  }
  return 'Condition could not be evaluated'
}

function startOf(error: unknown): number {
  const range = (error as { range?: { start?: unknown } } | undefined)?.range
  return typeof range?.start === 'number' ? range.start : 0
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'bigint') return 'an int'
  if (typeof value === 'number') return 'a double'
  if (typeof value === 'string') return 'a string'
  if (Array.isArray(value)) return 'a list'
  if (value instanceof Date) return 'a timestamp'
  return `a ${typeof value}`
}
