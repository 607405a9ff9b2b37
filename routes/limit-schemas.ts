// What a client may write as a policy's limits (docs/budgets.md): each field checked where it is
// parsed, the combinations (a spend needs an amount and a currency, per_call is for spends only…)
// checked on the whole limit, the amount compiled by the engine. The answers' shape is LimitAnswerSchema.
import * as v from 'valibot'
import { compileLimit, isTimeZone, MAX_CONDITION_BYTES, MAX_LIMIT_VALUE, MAX_LIMITS_PER_POLICY, type LimitInput } from '../engine/index.ts'
import { unknownField } from '../http/body.ts'
import { jsonObject } from './input.ts'

const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/
const LIMIT_NOT_AN_OBJECT = 'Each limit must be a JSON object'
const WINDOW_NOT_AN_OBJECT = 'Field window of a limit must be a JSON object'
const MAX_ROLLING_SECONDS = 366 * 86_400

const whole = (name: string, min: number, max: number) => {
  const message = `Field ${name} of a limit must be a whole number from ${min} to ${max}`
  return v.pipe(v.number(message), v.integer(message), v.minValue(min, message), v.maxValue(max, message))
}

const WindowSchema = jsonObject(
  v.strictObject(
    {
      type: v.pipe(
        v.picklist(['hour', 'day', 'week', 'month', 'rolling', 'all_time', 'per_call'], 'Field window.type of a limit must be hour, day, week, month, rolling, all_time or per_call'),
        v.description('hour, day, week (from Monday), month: calendar windows in tz; rolling: the last `seconds`; all_time; per_call (spend only: each request alone).'),
      ),
      tz: v.optional(
        v.pipe(
          v.string('Field window.tz of a limit must be an IANA time zone'),
          v.check((tz) => tz.length <= 64 && isTimeZone(tz), 'Field window.tz of a limit must be an IANA time zone such as Europe/Paris'),
          v.description('IANA zone calendar windows start in (default UTC).'),
        ),
      ),
      seconds: v.optional(v.pipe(whole('window.seconds', 60, MAX_ROLLING_SECONDS), v.description('Length of a rolling window, 60 s to 366 days.'))),
    },
    unknownField([], { notAnObject: WINDOW_NOT_AN_OBJECT }),
  ),
  WINDOW_NOT_AN_OBJECT,
)

const LimitObject = v.strictObject(
  {
    name: v.pipe(
      v.string('Field name of a limit must be a string'),
      v.trim(),
      v.nonEmpty('Field name of a limit is required'),
      v.maxLength(100, 'Field name of a limit is longer than 100 characters'),
      v.check((text) => NO_CONTROL.test(text), 'Field name of a limit holds a control character'),
      v.description('Unique within the policy; with the policy it names the counter, across versions.'),
    ),
    kind: v.pipe(v.picklist(['count', 'spend'], 'Field kind of a limit must be count or spend'), v.description('count: allowed decisions; spend: the sum of amount.')),
    max: v.pipe(whole('max', 0, MAX_LIMIT_VALUE), v.description('Most decisions (count) or largest sum in minor units (spend) per window.')),
    amount: v.optional(
      v.nullable(
        v.pipe(
          v.string('Field amount of a limit must be a CEL expression'),
          v.maxLength(MAX_CONDITION_BYTES, `Field amount of a limit is longer than ${MAX_CONDITION_BYTES} bytes`),
          v.description('Spend only: CEL over the request (args, context, resource, agent, action, now) returning a whole number of minor units, such as args.amount_cents.'),
        ),
      ),
      null,
    ),
    currency: v.optional(
      v.nullable(v.pipe(v.string('Field currency of a limit must be an ISO 4217 code'), v.regex(/^[A-Z]{3}$/, 'Field currency of a limit must be an ISO 4217 code such as EUR'), v.description('Spend only.'))),
      null,
    ),
    scope: v.optional(
      v.pipe(
        v.picklist(['agent', 'agent_resource', 'organization'], 'Field scope of a limit must be agent, agent_resource or organization'),
        v.description('Whose use is counted together: each agent (default), each agent and resource, or the whole organization.'),
      ),
      'agent',
    ),
    window: WindowSchema,
    mode: v.optional(v.pipe(v.picklist(['enforce', 'monitor'], 'Field mode of a limit must be enforce or monitor'), v.description('monitor records "would have exceeded" and never refuses.')), 'enforce'),
  },
  unknownField([], { notAnObject: LIMIT_NOT_AN_OBJECT }),
)

/** Why a parsed limit cannot be kept, or null. */
export function limitProblem(limit: LimitInput): string | null {
  const w = limit.window
  if (limit.kind === 'count') {
    if (limit.amount != null || limit.currency != null) return `Limit "${limit.name}": amount and currency are for spend limits only`
    if (w.type === 'per_call') return `Limit "${limit.name}": a per_call window is for spend limits only`
  } else {
    if (limit.amount == null) return `Limit "${limit.name}": a spend limit needs amount, a CEL expression returning minor units`
    if (limit.currency == null) return `Limit "${limit.name}": a spend limit needs currency, an ISO 4217 code`
    const compiled = compileLimit(limit)
    if (!compiled.ok) return `Limit "${limit.name}": ${compiled.message}`
  }
  if (w.type === 'rolling' && w.seconds == null) return `Limit "${limit.name}": a rolling window needs seconds`
  if (w.type !== 'rolling' && w.seconds != null) return `Limit "${limit.name}": window.seconds is for rolling windows only`
  if (w.tz != null && !['hour', 'day', 'week', 'month'].includes(w.type)) return `Limit "${limit.name}": window.tz is for hour, day, week and month windows only`
  return null
}

export const LimitSchema = jsonObject(
  v.pipe(
    LimitObject,
    v.check(
      (limit) => limitProblem(limit as LimitInput) === null,
      (issue) => limitProblem(issue.input as LimitInput) ?? 'The limit is not valid',
    ),
  ),
  LIMIT_NOT_AN_OBJECT,
)

export const LimitsSchema = v.pipe(
  v.array(LimitSchema, 'Field limits must be an array of limits'),
  v.maxLength(MAX_LIMITS_PER_POLICY, `Field limits holds more than ${MAX_LIMITS_PER_POLICY} limits`),
  v.check((limits) => new Set(limits.map((limit) => limit.name)).size === limits.length, 'Field limits names a limit twice'),
  v.description('Budgets counted while this policy applies (docs/budgets.md): at most N decisions, or a sum of amounts, per window.'),
)

export const LimitAnswerSchema = v.object({
  name: v.string(),
  kind: v.picklist(['count', 'spend']),
  max: v.number(),
  amount: v.nullable(v.string()),
  currency: v.nullable(v.string()),
  scope: v.picklist(['agent', 'agent_resource', 'organization']),
  window: v.object({ type: v.string(), tz: v.optional(v.string()), seconds: v.optional(v.number()) }),
  mode: v.picklist(['enforce', 'monitor']),
})
