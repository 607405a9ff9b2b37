// Budgets (docs/budgets.md): the limits a policy carries, how much of one a request takes, and
// the windows they are counted in. Pure: the counters themselves live in storage/budgets.ts,
// which calls the window arithmetic here inside the decision's transaction.
import { compileExpression, type ConditionVariables } from './condition.ts'

export type LimitKind = 'count' | 'spend'
export type LimitScope = 'agent' | 'agent_resource' | 'organization'
export type WindowType = 'hour' | 'day' | 'week' | 'month' | 'rolling' | 'all_time' | 'per_call'
export type LimitMode = 'enforce' | 'monitor'

export interface LimitWindow {
  readonly type: WindowType
  /** IANA zone the calendar windows (hour, day, week, month) start in; UTC when absent. */
  readonly tz?: string | null | undefined
  /** Length of a rolling window. */
  readonly seconds?: number | null | undefined
}

/** One limit as a policy stores it. */
export interface LimitInput {
  readonly name: string
  readonly kind: LimitKind
  /** Most allowed decisions (count) or largest sum in minor units (spend) per window. */
  readonly max: number
  /** Spend only: a CEL expression over the request returning a whole number of minor units. */
  readonly amount?: string | null | undefined
  /** Spend only: ISO 4217 code, for display. */
  readonly currency?: string | null | undefined
  readonly scope: LimitScope
  readonly window: LimitWindow
  readonly mode: LimitMode
}

/** The largest amount or max accepted: every sum of them stays an exact JavaScript integer. */
export const MAX_LIMIT_VALUE = 1_000_000_000_000_000
export const MAX_LIMITS_PER_POLICY = 10
export const ROLLING_BUCKETS = 120

export interface CompiledLimit extends LimitInput {
  readonly evaluateAmount: ((variables: ConditionVariables) => AmountOutcome) | null
}

export type AmountOutcome = { readonly ok: true; readonly value: number } | { readonly ok: false; readonly message: string }

/** A limit that applies to a request, with what the request takes of it. */
export interface AppliedLimit {
  readonly policy_id: string
  readonly policy_version: number
  readonly policy_name: string
  readonly limit: CompiledLimit
  /** False for a monitor-mode limit or a limit of a monitor-mode policy: it records, never refuses. */
  readonly enforce: boolean
  /** What the request takes: 1 for a count, the evaluated amount for a spend; null on error. */
  readonly amount: number | null
  /** Why the amount could not be taken (the decision then fails closed); null otherwise. */
  readonly error: string | null
}

/** Compiles a limit's amount expression; a problem is a sentence for a 400. */
export function compileLimit(limit: LimitInput): { ok: true; limit: CompiledLimit } | { ok: false; message: string } {
  if (limit.kind === 'count') return { ok: true, limit: Object.freeze({ ...limit, evaluateAmount: null }) }
  const source = limit.amount ?? ''
  const compiled = compileExpression(source)
  if (!compiled.ok) return { ok: false, message: `amount does not compile (line ${compiled.error.line}, column ${compiled.error.column}): ${compiled.error.message}` }
  const run = compiled.evaluate
  return { ok: true, limit: Object.freeze({ ...limit, evaluateAmount: (variables: ConditionVariables) => amountOf(run(variables)) }) }
}

/** An amount must be a whole number of minor units from 0 to MAX_LIMIT_VALUE. */
function amountOf(result: { ok: true; value: unknown } | { ok: false; message: string }): AmountOutcome {
  if (!result.ok) return { ok: false, message: `amount could not be evaluated: ${result.message}` }
  const value = result.value
  let number: number
  if (typeof value === 'bigint') {
    if (value < 0n) return { ok: false, message: `amount is negative (${value})` }
    if (value > BigInt(MAX_LIMIT_VALUE)) return { ok: false, message: `amount ${value} is larger than ${MAX_LIMIT_VALUE}` }
    number = Number(value)
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value) || !Number.isInteger(value)) return { ok: false, message: `amount ${value} is not a whole number of minor units` }
    if (value < 0) return { ok: false, message: `amount is negative (${value})` }
    if (value > MAX_LIMIT_VALUE) return { ok: false, message: `amount ${value} is larger than ${MAX_LIMIT_VALUE}` }
    number = value
  } else {
    return { ok: false, message: `amount returned ${value === null ? 'null' : typeof value === 'string' ? 'a string' : `a ${typeof value}`}, not a whole number` }
  }
  return { ok: true, value: number }
}

/** What each limit of the applying policies takes from this request. */
export function applyLimits(
  policies: readonly { readonly policy_id: string; readonly version: number; readonly name: string; readonly mode: LimitMode; readonly limits: readonly CompiledLimit[] }[],
  variables: () => ConditionVariables,
): AppliedLimit[] {
  const out: AppliedLimit[] = []
  for (const policy of policies) {
    for (const limit of policy.limits) {
      let amount: number | null = 1
      let error: string | null = null
      if (limit.evaluateAmount !== null) {
        const outcome = limit.evaluateAmount(variables())
        if (outcome.ok) amount = outcome.value
        else {
          amount = null
          error = outcome.message
        }
      }
      out.push({ policy_id: policy.policy_id, policy_version: policy.version, policy_name: policy.name, limit, enforce: policy.mode === 'enforce' && limit.mode === 'enforce', amount, error })
    }
  }
  return out
}

// ---- Windows -------------------------------------------------------------------------------

/** The window a limit counts in at `now`: its start and when it resets (null: never, or rolling). */
export interface WindowSpan {
  readonly start: number
  readonly end: number | null
}

const formatters = new Map<string, Intl.DateTimeFormat>()
function formatter(tz: string): Intl.DateTimeFormat {
  let found = formatters.get(tz)
  if (!found) {
    found = new Intl.DateTimeFormat('en-US', { timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', weekday: 'short' })
    formatters.set(tz, found)
  }
  return found
}

/** True when `tz` is a time zone this runtime knows. */
export function isTimeZone(tz: string): boolean {
  try {
    formatter(tz)
    return true
  } catch {
    return false
  }
}

interface Local {
  y: number
  m: number
  d: number
  h: number
  min: number
  s: number
  weekday: number
}
const WEEKDAYS: Record<string, number> = { Mon: 0, Tue: 1, Wed: 2, Thu: 3, Fri: 4, Sat: 5, Sun: 6 }

function localOf(ms: number, tz: string): Local {
  const parts: Record<string, string> = {}
  for (const part of formatter(tz).formatToParts(new Date(ms))) parts[part.type] = part.value
  return { y: Number(parts.year), m: Number(parts.month), d: Number(parts.day), h: Number(parts.hour), min: Number(parts.minute), s: Number(parts.second), weekday: WEEKDAYS[parts.weekday!] ?? 0 }
}

/** Milliseconds the zone is ahead of UTC at `ms`. */
function offsetAt(ms: number, tz: string): number {
  const l = localOf(ms, tz)
  return Date.UTC(l.y, l.m - 1, l.d, l.h, l.min, l.s) - Math.floor(ms / 1000) * 1000
}

/** The instant a local wall time (fields may overflow, Date.UTC normalizes them) happens in `tz`. */
function instantOf(tz: string, y: number, m: number, d: number, h = 0): number {
  const wall = Date.UTC(y, m - 1, d, h)
  const first = wall - offsetAt(wall, tz)
  return wall - offsetAt(first, tz)
}

/** The last calendar span computed per window type and zone: most decisions fall in it again. */
const spans = new Map<string, WindowSpan>()

/** The window of `window` holding `now` (milliseconds since the epoch). */
export function windowAt(window: LimitWindow, now: number): WindowSpan {
  if (window.type === 'all_time' || window.type === 'per_call') return { start: 0, end: null }
  if (window.type === 'rolling') return { start: now - (window.seconds ?? 0) * 1000, end: null }
  const id = `${window.type}@${window.tz ?? 'UTC'}`
  const known = spans.get(id)
  if (known && known.start <= now && now < known.end!) return known
  const span = calendarSpan(window, now)
  if (spans.size > 1000) spans.clear()
  spans.set(id, span)
  return span
}

function calendarSpan(window: LimitWindow, now: number): WindowSpan {
  const tz = window.tz ?? 'UTC'
  switch (window.type) {
    case 'all_time':
    case 'per_call':
      return { start: 0, end: null }
    case 'rolling':
      return { start: now - (window.seconds ?? 0) * 1000, end: null }
    case 'hour': {
      const l = localOf(now, tz)
      return { start: instantOf(tz, l.y, l.m, l.d, l.h), end: instantOf(tz, l.y, l.m, l.d, l.h + 1) }
    }
    case 'day': {
      const l = localOf(now, tz)
      return { start: instantOf(tz, l.y, l.m, l.d), end: instantOf(tz, l.y, l.m, l.d + 1) }
    }
    case 'week': {
      // Weeks start on Monday (ISO 8601).
      const l = localOf(now, tz)
      return { start: instantOf(tz, l.y, l.m, l.d - l.weekday), end: instantOf(tz, l.y, l.m, l.d - l.weekday + 7) }
    }
    case 'month': {
      const l = localOf(now, tz)
      return { start: instantOf(tz, l.y, l.m, 1), end: instantOf(tz, l.y, l.m + 1, 1) }
    }
  }
}

/** Width of one bucket of a rolling window: 1/120 of it, whole seconds. */
export function bucketWidthMs(window: LimitWindow): number {
  return Math.max(1, Math.ceil((window.seconds ?? 1) / ROLLING_BUCKETS)) * 1000
}

/** A counter as stored: a calendar window's start and use, or a rolling window's buckets. */
export interface CounterState {
  window_start: number
  used: number
  /** Rolling windows: used per bucket start (milliseconds since the epoch, as text). */
  buckets: Record<string, number> | null
}

/**
 * What the counter holds for the window at `now`. A calendar counter whose stored window is
 * older starts again at 0; one whose stored window is newer (a clock behind another process's)
 * counts into that newer window, the conservative choice. A rolling counter sums the buckets
 * that end after now − seconds: a unit counts for at least `seconds` and at most one bucket
 * width more.
 */
export function currentOf(window: LimitWindow, state: CounterState | null, now: number): CounterState {
  if (window.type === 'rolling') {
    const width = bucketWidthMs(window)
    const since = now - (window.seconds ?? 0) * 1000
    const buckets: Record<string, number> = {}
    let used = 0
    for (const [start, value] of Object.entries(state?.buckets ?? {})) {
      if (Number(start) + width <= since || value <= 0) continue
      buckets[start] = value
      used += value
    }
    return { window_start: 0, used, buckets }
  }
  const start = windowAt(window, now).start
  if (state === null || state.window_start < start) return { window_start: start, used: 0, buckets: null }
  return { window_start: state.window_start, used: state.used, buckets: null }
}

/** Adds `amount` at `now` to a current state (from currentOf). */
export function addTo(window: LimitWindow, state: CounterState, amount: number, now: number): CounterState {
  if (window.type !== 'rolling') return { ...state, used: state.used + amount }
  const width = bucketWidthMs(window)
  const key = String(Math.floor(now / width) * width)
  const buckets: Record<string, number> = { ...state.buckets }
  buckets[key] = (buckets[key] ?? 0) + amount
  return { window_start: 0, used: state.used + amount, buckets }
}

/** Where a reservation sits: the calendar window's start, or the rolling bucket's. */
export function slotOf(window: LimitWindow, state: CounterState, now: number): number {
  if (window.type !== 'rolling') return state.window_start
  const width = bucketWidthMs(window)
  return Math.floor(now / width) * width
}

/** Takes back a reservation made in `slot`, if that window (or bucket) is still the counter's. */
export function releaseFrom(window: LimitWindow, state: CounterState, slot: number, amount: number): CounterState | null {
  if (window.type === 'rolling') {
    const key = String(slot)
    const held = state.buckets?.[key]
    if (held === undefined) return null
    const buckets = { ...state.buckets }
    buckets[key] = Math.max(0, held - amount)
    return { window_start: 0, used: Math.max(0, state.used - Math.min(held, amount)), buckets }
  }
  if (state.window_start !== slot) return null
  return { ...state, used: Math.max(0, state.used - amount) }
}

/** When a rolling window next frees something: the oldest counted bucket's end + seconds. */
export function resetsAt(window: LimitWindow, state: CounterState, now: number): number | null {
  if (window.type === 'rolling') {
    const starts = Object.keys(state.buckets ?? {}).map(Number)
    if (starts.length === 0) return null
    return Math.min(...starts) + bucketWidthMs(window) + (window.seconds ?? 0) * 1000
  }
  return windowAt(window, now).end
}

/** Identity of a counter: the limit (policy and name, not version) with its window, and the scope. */
export function counterKey(policyId: string, limit: LimitInput, agentId: string, resource: string): string {
  const w = limit.window
  const windowPart = w.type === 'rolling' ? `rolling:${w.seconds}` : w.type === 'all_time' || w.type === 'per_call' ? w.type : `${w.type}@${w.tz ?? 'UTC'}`
  const scope = limit.scope === 'organization' ? '*' : limit.scope === 'agent' ? agentId : `${agentId}|${resource}`
  return `${policyId}|${limit.name}|${windowPart}|${scope}`
}

/** The window's name in a sentence: "day (Europe/Paris)", "rolling 3600 s". */
export function windowLabel(window: LimitWindow): string {
  if (window.type === 'rolling') return `rolling ${window.seconds} s`
  if (window.type === 'all_time' || window.type === 'per_call') return window.type
  return `${window.type} (${window.tz ?? 'UTC'})`
}

/** Max and amounts as a reason says them: "12 refunds" or "2000 EUR minor units". */
export function unitsLabel(limit: LimitInput, value: number): string {
  return limit.kind === 'count' ? `${value}` : `${value}${limit.currency ? ` ${limit.currency}` : ''}`
}

/**
 * Counters in memory for a replay: the logged decisions, oldest first, counted as the draft
 * would have counted them from the start of the replayed range (use before the range is not
 * known, so windows that began before it start empty). Returns the decision with the limits.
 */
export function replayCounter(): (decision: 'allow' | 'deny' | 'require_approval', limits: readonly AppliedLimit[] | undefined, agentId: string, resource: string, now: number) => { decision: 'allow' | 'deny' | 'require_approval'; limit: AppliedLimit | null } {
  const states = new Map<string, CounterState>()
  return (decision, limits, agentId, resource, now) => {
    if (decision === 'deny' || !limits || limits.length === 0) return { decision, limit: null }
    const next = new Map<string, CounterState>()
    for (const applied of limits) {
      if (!applied.enforce) continue
      if (applied.amount === null) return { decision: 'deny', limit: applied }
      if (applied.limit.window.type === 'per_call') {
        if (applied.amount > applied.limit.max) return { decision: 'deny', limit: applied }
        continue
      }
      const key = counterKey(applied.policy_id, applied.limit, agentId, resource)
      const current = next.get(key) ?? currentOf(applied.limit.window, states.get(key) ?? null, now)
      if (current.used + applied.amount > applied.limit.max) return { decision: 'deny', limit: applied }
      next.set(key, addTo(applied.limit.window, current, applied.amount, now))
    }
    for (const [key, state] of next) states.set(key, state)
    return { decision, limit: null }
  }
}
