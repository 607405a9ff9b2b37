// Policy engine bench: one decision over 1,000 policies of one organization, the same policy set
// in Cedar (cedar-wasm, preparsed) for a ratio, and a replay of 100,000 logged decisions. Pure
// CPU, no database. Run alone:
//
//   node --import tsx bench/engine.ts [--evaluations 100000] [--cedar 2000] [--replay 100000]
//
// Prints a Markdown table. Deterministic inputs (seeded generator), so runs are comparable.
import { createRequire } from 'node:module'
import os from 'node:os'
import { compilePolicySet, decide, replay, type DecisionRequest, type LoggedDecision, type OrganizationSettings, type PolicyInput } from '../engine/index.ts'

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : fallback
}

const EVALUATIONS = flag('evaluations', 100_000)
const CEDAR_REQUESTS = flag('cedar', 2_000)
const REPLAY = flag('replay', 100_000)
const POLICIES = 1_000

// Small deterministic generator (mulberry32): the same policy set and requests every run.
let seed = 0x5eed
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0
  let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296
}
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!

const NAMESPACES = Array.from({ length: 100 }, (_, i) => `svc${i}`)
const VERBS = ['read', 'list', 'create', 'update', 'delete', 'refund', 'send', 'export', 'approve', 'close']
const HANDLES = Array.from({ length: 20 }, (_, i) => (i < 10 ? `support-bot-${i}` : `billing-bot-${i}`))
const CURRENCIES = ['EUR', 'USD', 'GBP']

// A condition in both languages, so the two engines decide the same thing.
interface Condition {
  readonly cel: string
  readonly cedar: string
}
function condition(): Condition {
  const n = Math.floor(random() * 1000)
  const currency = pick(CURRENCIES)
  switch (Math.floor(random() * 3)) {
    case 0:
      return { cel: `args.amount > ${n}`, cedar: `context.args.amount > ${n}` }
    case 1:
      return { cel: `args.currency == "${currency}" && args.amount <= ${n}`, cedar: `context.args.currency == "${currency}" && context.args.amount <= ${n}` }
    default:
      return { cel: `agent.labels.team == "support" || args.amount < ${n}`, cedar: `context.labels.team == "support" || context.args.amount < ${n}` }
  }
}

interface GeneratedPolicy {
  readonly input: PolicyInput
  readonly cedar: string | null
}

function generatePolicy(i: number): GeneratedPolicy {
  const r = random()
  const namespace = pick(NAMESPACES)
  // Realistic mix: mostly exact actions, some namespace wildcards, a few cross-namespace ones.
  const actions = r < 0.6 ? [`${namespace}.${pick(VERBS)}`] : r < 0.85 ? [`${namespace}.*`] : r < 0.9 ? [`*.${pick(VERBS)}`] : [`${namespace}.${pick(VERBS)}`, `${pick(NAMESPACES)}.${pick(VERBS)}`]
  const agents = random() < 0.7 ? ['*'] : [random() < 0.5 ? pick(HANDLES) : 'support-bot-*']
  const resources = random() < 0.8 ? ['*'] : ['order/*']
  const e = random()
  const effect = e < 0.6 ? 'allow' : e < 0.85 ? 'deny' : 'require_approval'
  const cond = random() < 0.3 ? condition() : null
  const mode = random() < 0.1 ? 'monitor' : 'enforce'
  const input: PolicyInput = { policy_id: `p${i}`, version: 1, name: `Policy ${i}`, effect, agents, actions, resources, condition: cond?.cel ?? null, mode, enabled: true, archived: false }
  return { input, cedar: mode === 'enforce' ? toCedar(input, cond) : null }
}

/** Patterns become Cedar `like` tests (same `*` semantics); require_approval counts as "not allowed". */
function toCedar(policy: PolicyInput, cond: Condition | null): string {
  const like = (field: string, patterns: readonly string[]) => `(${patterns.map((p) => `context.${field} like "${p}"`).join(' || ')})`
  const clauses = [like('agent', policy.agents), like('action', policy.actions), like('resource', policy.resources)]
  if (cond) clauses.push(`(${cond.cedar})`)
  return `${policy.effect === 'allow' ? 'permit' : 'forbid'}(principal, action, resource) when { ${clauses.join(' && ')} };`
}

function generateRequest(): DecisionRequest {
  const team = random() < 0.5 ? 'support' : 'billing'
  return {
    agent: { id: 'agent', handle: pick(HANDLES), labels: { team }, status: 'active' },
    action: `${pick(NAMESPACES)}.${pick(VERBS)}`,
    resource: random() < 0.5 ? `order/${Math.floor(random() * 10_000)}` : '',
    args: { amount: Math.floor(random() * 1000), currency: pick(CURRENCIES) },
    context: {},
    now: new Date(1_750_000_000_000),
  }
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

/** CPU time of the whole batch per item (µs): unlike wall time, not inflated by other processes. */
function cpuPerItem<T>(items: readonly T[], count: number, run: (item: T) => unknown): number {
  const started = process.cpuUsage()
  for (let i = 0; i < count; i++) run(items[i % items.length]!)
  const used = process.cpuUsage(started)
  return (used.user + used.system) / count
}

function timeEach<T>(items: readonly T[], count: number, run: (item: T) => unknown): Float64Array {
  const samples = new Float64Array(count)
  for (let i = 0; i < count; i++) {
    const item = items[i % items.length]!
    const started = process.hrtime.bigint()
    run(item)
    samples[i] = Number(process.hrtime.bigint() - started) / 1e6
  }
  return samples.sort()
}

const generated = Array.from({ length: POLICIES }, (_, i) => generatePolicy(i))
const settings: OrganizationSettings = { default_decision: 'deny', unknown_agents: 'deny' }
const compileStarted = performance.now()
const set = compilePolicySet(generated.map((g) => g.input), 1)
const compileMs = performance.now() - compileStarted
const requests = Array.from({ length: 10_000 }, generateRequest)

// ---- Steward engine --------------------------------------------------------------------------
timeEach(requests, 20_000, (req) => decide(set, settings, req)) // warm-up (JIT)
const ours = timeEach(requests, EVALUATIONS, (req) => decide(set, settings, req))
const oursCpu = cpuPerItem(requests, EVALUATIONS, (req) => decide(set, settings, req))
const mix = { allow: 0, deny: 0, require_approval: 0, errors: 0, candidates: 0 }
for (const req of requests) {
  const outcome = decide(set, settings, req)
  mix[outcome.decision] += 1
  if (outcome.errors.length > 0) mix.errors += 1
}

// ---- Cedar, same set (enforce-mode policies; require_approval as forbid) ------------------------
const require = createRequire(import.meta.url)
const cedar = require('@cedar-policy/cedar-wasm/nodejs') as typeof import('@cedar-policy/cedar-wasm/nodejs')
const staticPolicies: Record<string, string> = {}
for (const g of generated) if (g.cedar) staticPolicies[g.input.policy_id] = g.cedar
const preparsed = cedar.preparsePolicySet('bench', { staticPolicies })
if (preparsed.type !== 'success') throw new Error(`cedar could not parse the set: ${JSON.stringify(preparsed.errors[0])}`)
function cedarCall(req: DecisionRequest) {
  return {
    principal: { type: 'Agent', id: req.agent.handle },
    action: { type: 'Action', id: req.action },
    resource: { type: 'Resource', id: req.resource ?? '' },
    context: { agent: req.agent.handle, action: req.action, resource: req.resource ?? '', labels: req.agent.labels, args: req.args as Record<string, string | number> },
    preparsedPolicySetId: 'bench',
    entities: [],
  }
}
function cedarAllows(req: DecisionRequest): boolean {
  const answer = cedar.statefulIsAuthorized(cedarCall(req))
  if (answer.type !== 'success') throw new Error(`cedar failed: ${JSON.stringify(answer.errors[0])}`)
  return answer.response.decision === 'allow'
}
timeEach(requests, Math.min(200, CEDAR_REQUESTS), cedarAllows)
const theirs = timeEach(requests, CEDAR_REQUESTS, cedarAllows)
const theirsCpu = cpuPerItem(requests, Math.min(500, CEDAR_REQUESTS), cedarAllows)
let agree = 0
const checked = Math.min(CEDAR_REQUESTS, requests.length)
for (const req of requests.slice(0, checked)) if (cedarAllows(req) === (decide(set, settings, req).decision === 'allow')) agree += 1

// ---- Replay: 100,000 logged decisions against a draft ------------------------------------------
const logged: LoggedDecision[] = Array.from({ length: REPLAY }, (_, i) => {
  const request = requests[i % requests.length]!
  return { decision_id: `d${i}`, decision: decide(set, settings, request).decision, request }
})
// The draft: every tenth policy flips between allow and deny.
const draftInputs = generated.map((g, i) => (i % 10 === 0 ? { ...g.input, version: 2, effect: g.input.effect === 'allow' ? ('deny' as const) : ('allow' as const) } : g.input))
const replayStarted = performance.now()
const replayCpuStarted = process.cpuUsage()
const draft = compilePolicySet(draftInputs, 2)
const replayed = replay(draft, settings, logged, 20)
const replayMs = performance.now() - replayStarted
const replayCpu = process.cpuUsage(replayCpuStarted)
const replayCpuMs = (replayCpu.user + replayCpu.system) / 1000

// ---- Report ------------------------------------------------------------------------------------
const fmt = (ms: number) => ms.toFixed(4)
const rows: string[][] = [
  ['Steward engine, 1,000 policies', String(EVALUATIONS), fmt(percentile(ours, 50)), fmt(percentile(ours, 99)), fmt(ours[ours.length - 1]!)],
  ['cedar-wasm 4.x, preparsed, same set', String(CEDAR_REQUESTS), fmt(percentile(theirs, 50)), fmt(percentile(theirs, 99)), fmt(theirs[theirs.length - 1]!)],
]
console.log('## Policy engine\n')
console.log(`Node ${process.version}; ${POLICIES} policies (${set.byAction.size} exact actions and ${set.byNamespace.size} namespaces indexed, ${set.wildcard.length} policies scanned on every lookup, ${generated.filter((g) => g.input.condition).length} with conditions, ${generated.filter((g) => g.input.mode === 'monitor').length} monitor-mode); compile ${compileMs.toFixed(1)} ms.\n`)
rows[0]!.push((oursCpu / 1000).toFixed(4))
rows[1]!.push((theirsCpu / 1000).toFixed(4))
console.log(`Load average at the end: ${os.loadavg().map((n) => n.toFixed(1)).join(' ')} on ${os.cpus().length} CPUs (wall-clock percentiles include time taken by other processes; the CPU column does not).\n`)
console.log('| engine | evaluations | p50 ms | p99 ms | max ms | mean CPU ms |')
console.log('|---|---:|---:|---:|---:|---:|')
for (const row of rows) console.log(`| ${row.join(' | ')} |`)
console.log('')
console.log(`- p99 goal ≤ 0.05 ms: ${percentile(ours, 99) <= 0.05 ? 'met' : 'NOT met'} (${fmt(percentile(ours, 99))} ms).`)
console.log(`- Cedar / Steward: ${(percentile(theirs, 50) / percentile(ours, 50)).toFixed(0)}× at p50, ${(percentile(theirs, 99) / percentile(ours, 99)).toFixed(0)}× at p99, ${(theirsCpu / oursCpu).toFixed(0)}× in CPU time.`)
console.log(`- Same answer (allowed or not) as Cedar on ${agree}/${checked} requests (they differ where a condition errors: Cedar skips the policy, Steward fails closed).`)
console.log(`- Decision mix over ${requests.length} requests: allow ${mix.allow}, deny ${mix.deny}, require_approval ${mix.require_approval}; with condition errors ${mix.errors}.`)
console.log(`- Replay: ${replayed.evaluated} logged decisions against a draft (100 policies flipped), compile included: ${replayMs.toFixed(0)} ms wall, ${replayCpuMs.toFixed(0)} ms CPU (goal ≤ 5000 ms: ${replayMs <= 5000 ? 'met' : 'NOT met'}); changed ${JSON.stringify(replayed.changed)}.`)
