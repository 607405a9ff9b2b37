// The report routes' answers as valibot schemas, for the OpenAPI document (docs/reports.md).
import * as v from 'valibot'

const instant = (description: string) => v.pipe(v.string(), v.isoTimestamp(), v.description(description))
const count = v.pipe(v.number(), v.integer(), v.minValue(0))
const from = instant('Start of the window counted (UTC).')
const to = instant('End of the window counted, exclusive (UTC).')
const tz = v.pipe(v.string(), v.description('The time zone the buckets follow.'))
const bucket = v.picklist(['hour', 'day'])
const Point = v.pipe(v.object({ t: instant('Start of the bucket (UTC).'), count }), v.title('ReportPoint'))
const points = v.pipe(v.array(Point), v.description('Every bucket of the window, oldest first, zeros included.'))
const nullableId = v.nullable(v.pipe(v.string(), v.uuid()))
const mode = v.picklist(['enforce', 'monitor'])

const decisions = v.pipe(
  v.object({
    from,
    to,
    tz,
    bucket,
    group: v.picklist(['outcome', 'agent', 'action', 'policy']),
    total: count,
    series: v.array(
      v.object({
        key: v.pipe(v.string(), v.description('Outcome, agent handle, action, or policy id (rule:<rule> when a rule decided).')),
        label: v.string(),
        total: count,
        points,
      }),
    ),
    other: v.nullable(v.object({ keys: count, total: count, points })),
  }),
  v.title('DecisionsReport'),
)

const denials = v.pipe(
  v.object({
    from,
    to,
    total: count,
    agents: v.array(v.object({ agent: v.string(), agent_id: nullableId, count })),
    actions: v.array(v.object({ action: v.string(), count })),
  }),
  v.title('DenialsReport'),
)

const seconds = v.nullable(v.number())
const approvals = v.pipe(
  v.object({
    from,
    to,
    requested: count,
    approved: count,
    denied: count,
    expired: count,
    cancelled: count,
    consumed: count,
    time_to_decision_seconds: v.object({ p50: seconds, p90: seconds }),
    pending_total: count,
    pending: v.array(
      v.object({
        approval_id: v.pipe(v.string(), v.uuid()),
        action: v.string(),
        agent: v.string(),
        agent_id: v.pipe(v.string(), v.uuid()),
        created_at: instant('When it was requested.'),
        expires_at: instant('When it expires undecided.'),
        waiting_seconds: count,
      }),
    ),
  }),
  v.title('ApprovalsReport'),
)

const policies = v.pipe(
  v.object({
    from,
    to,
    policies: v.array(
      v.object({
        policy_id: v.pipe(v.string(), v.uuid()),
        name: v.string(),
        mode,
        effect: v.string(),
        in_force: v.boolean(),
        hits: v.array(v.object({ version: count, count })),
        total: count,
        would_change: v.pipe(v.nullable(count), v.description('Monitor-mode policies: decisions whose answer enforcing it would have changed.')),
      }),
    ),
    unmatched: v.array(v.object({ policy_id: v.pipe(v.string(), v.uuid()), name: v.string(), mode })),
  }),
  v.title('PoliciesReport'),
)

const policy = v.pipe(
  v.object({
    from,
    to,
    tz,
    bucket,
    policy: v.object({ policy_id: v.pipe(v.string(), v.uuid()), name: v.string(), mode, effect: v.string(), version: count, in_force: v.boolean() }),
    hits: points,
    would_change: v.nullable(points),
  }),
  v.title('PolicyReport'),
)

const agents = v.pipe(
  v.object({
    from,
    to,
    active: count,
    agents: v.array(v.object({ agent_id: nullableId, handle: v.string(), status: v.nullable(v.string()), last_seen_at: v.nullable(instant('Last decision.')), decisions: count })),
    gone: v.array(
      v.object({ agent_id: v.pipe(v.string(), v.uuid()), handle: v.string(), status: v.string(), created_at: instant('When it was discovered.'), last_seen_at: v.nullable(instant('Last decision.')) }),
    ),
  }),
  v.title('AgentsReport'),
)

const leads = v.pipe(
  v.object({
    from,
    to,
    tz,
    bucket,
    total: count,
    per_day: points,
    per_source: v.array(v.object({ source: v.nullable(v.string()), count })),
    per_list: v.array(v.object({ list: v.picklist(['demo-requests', 'newsletter']), count })),
    duplicates_refused: count,
  }),
  v.title('LeadsReport'),
)

export const ReportSchemas = { decisions, denials, approvals, policies, policy, agents, leads }
