// Decisions: which policies apply and what follows. Property tests compare the engine (indexed
// by action, compiled matchers and CEL) with a direct reading of the rules over random policy
// sets, and check the invariants one by one: precedence, default, fail closed, monitor mode,
// disabled and archived policies.
import t from 'tap'
import fc from 'fast-check'
import { compilePolicySet, decide, type DecisionRequest } from '../../engine/index.ts'
import type { Effect, OrganizationSettings, PolicyInput, PolicyMode } from '../../engine/types.ts'

const NOW = new Date('2025-03-01T12:00:00Z')
const SETTINGS: OrganizationSettings = { default_decision: 'deny', unknown_agents: 'deny' }

function policy(fields: Partial<PolicyInput> & Pick<PolicyInput, 'policy_id' | 'effect' | 'actions'>): PolicyInput {
  return { version: 1, name: fields.policy_id, agents: ['*'], resources: ['*'], condition: null, mode: 'enforce', enabled: true, archived: false, ...fields }
}

function request(fields: Partial<DecisionRequest> = {}): DecisionRequest {
  return { agent: { id: 'agent-1', handle: 'support-bot', labels: { team: 'support' }, status: 'active' }, action: 'payments.refund', resource: 'order/1', args: { amount: 120 }, context: {}, now: NOW, ...fields }
}

// ---- a direct reading of the rules, used as the reference -------------------------------------

// Conditions the generator picks from, with what each does for a given args.n.
const CONDITIONS: Record<string, (n: number) => boolean | 'error'> = {
  true: () => true,
  false: () => false,
  'args.n > 5': (n) => n > 5,
  'args.missing == 1': () => 'error',
  'args.n / 0.0 > 1.0 || args.nope': (n) => (n > 0 ? true : 'error'),
}

const STRENGTH: Record<Effect, number> = { allow: 1, require_approval: 2, deny: 3 }

function globToRegex(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`, 's')
}

interface Expected {
  decision: Effect
  reasons: string[]
  monitor: Effect
  monitorReasons: string[]
  errors: string[]
}

function expected(policies: PolicyInput[], req: DecisionRequest, settings: OrganizationSettings): Expected {
  const applying: PolicyInput[] = []
  const errors: string[] = []
  for (const p of policies) {
    if (!p.enabled || p.archived) continue
    const matches = (patterns: readonly string[], value: string) => patterns.some((x) => globToRegex(x).test(value))
    if (!matches(p.agents, req.agent.handle) || !matches(p.actions, req.action) || !matches(p.resources, req.resource ?? '')) continue
    let holds = true
    if (p.condition !== null) {
      const result = CONDITIONS[p.condition]!(req.args.n as number)
      if (result === 'error') {
        errors.push(p.policy_id)
        holds = p.effect !== 'allow'
      } else holds = result
    }
    if (holds) applying.push(p)
  }
  const pick = (list: PolicyInput[]) => {
    if (list.length === 0) return { decision: settings.default_decision, reasons: ['rule:default_decision'] }
    const top = list.reduce<Effect>((best, p) => (STRENGTH[p.effect] > STRENGTH[best] ? p.effect : best), 'allow')
    return { decision: top, reasons: list.filter((p) => p.effect === top).map((p) => p.policy_id) }
  }
  const enforced = pick(applying.filter((p) => p.mode === 'enforce'))
  const monitor = pick(applying)
  return { decision: enforced.decision, reasons: enforced.reasons, monitor: monitor.decision, monitorReasons: monitor.reasons, errors }
}

function actual(policies: PolicyInput[], req: DecisionRequest, settings: OrganizationSettings): Expected {
  const outcome = decide(compilePolicySet(policies, 1), settings, req)
  const name = (r: object) => ('rule' in r ? `rule:${r.rule}` : (r as { policy_id: string }).policy_id)
  return {
    decision: outcome.decision,
    reasons: outcome.reasons.map(name),
    monitor: outcome.monitor.decision,
    monitorReasons: outcome.monitor.reasons.map(name),
    errors: outcome.errors.map((e) => e.policy_id),
  }
}

const segment = fc.constantFrom('payments', 'email', 'refund', 'send', 'bot', 'order')
const patternArb = fc.oneof(
  fc.constant('*'),
  fc.tuple(segment, segment).map(([a, b]) => `${a}.${b}`),
  segment.map((a) => `${a}.*`),
  segment.map((a) => `*.${a}`),
  segment.map((a) => `*${a.slice(1, 3)}*`),
  fc.tuple(segment, segment).map(([a, b]) => `${a}.${b.slice(0, 2)}*`),
  segment.map((a) => `${a.slice(0, 3)}*`),
)
const policyArb = (id: number) =>
  fc.record({
    effect: fc.constantFrom<Effect>('allow', 'deny', 'require_approval'),
    agents: fc.array(fc.constantFrom('*', 'support-bot', 'billing-bot', 'support-*', '*-bot'), { minLength: 1, maxLength: 2 }),
    actions: fc.array(patternArb, { minLength: 1, maxLength: 3 }),
    resources: fc.array(fc.constantFrom('*', 'order/*', 'order/1', 'ticket/*', ''), { minLength: 1, maxLength: 2 }),
    condition: fc.constantFrom<string | null>(null, null, ...Object.keys(CONDITIONS)),
    mode: fc.constantFrom<PolicyMode>('enforce', 'enforce', 'monitor'),
    enabled: fc.constantFrom(true, true, true, false),
    archived: fc.constantFrom(false, false, false, true),
  }).map((fields) => policy({ ...fields, policy_id: `p${id}`, name: `Policy ${id}` }))
const policiesArb = fc.integer({ min: 0, max: 12 }).chain((count) => fc.tuple(...Array.from({ length: count }, (_, i) => policyArb(i))))
const requestArb = fc.record({
  handle: fc.constantFrom('support-bot', 'billing-bot', 'other'),
  action: fc.tuple(segment, segment).map(([a, b]) => `${a}.${b}`),
  resource: fc.constantFrom('order/1', 'order/2', 'ticket/9', ''),
  n: fc.integer({ min: -3, max: 10 }),
}).map(({ handle, action, resource, n }) => request({ agent: { id: 'a', handle, labels: {}, status: 'active' }, action, resource, args: { n } }))
const settingsArb = fc.record({ default_decision: fc.constantFrom<Effect>('deny', 'require_approval', 'allow'), unknown_agents: fc.constantFrom<'deny' | 'evaluate'>('deny', 'evaluate') })

t.test('the engine agrees with a direct reading of the rules (precedence, default, fail closed, monitor)', async () => {
  await fc.assert(
    fc.property(policiesArb, requestArb, settingsArb, (policies, req, settings) => {
      const got = actual(policies, req, settings)
      const want = expected(policies, req, settings)
      return JSON.stringify(got) === JSON.stringify(want)
    }),
    { numRuns: 3000 },
  )
})

t.test('monitor-mode policies never change the decision or its reasons', async () => {
  await fc.assert(
    fc.property(policiesArb, requestArb, settingsArb, (policies, req, settings) => {
      const withMonitor = decide(compilePolicySet(policies, 1), settings, req)
      const withoutMonitor = decide(compilePolicySet(policies.filter((p) => p.mode === 'enforce'), 1), settings, req)
      return withMonitor.decision === withoutMonitor.decision && JSON.stringify(withMonitor.reasons) === JSON.stringify(withoutMonitor.reasons)
    }),
    { numRuns: 2000 },
  )
})

t.test('a disabled or archived policy never applies', async () => {
  await fc.assert(
    fc.property(policiesArb, requestArb, settingsArb, (policies, req, settings) => {
      const all = decide(compilePolicySet(policies, 1), settings, req)
      const inForce = decide(compilePolicySet(policies.filter((p) => p.enabled && !p.archived), 1), settings, req)
      const outOfForce = new Set(policies.filter((p) => !p.enabled || p.archived).map((p) => p.policy_id))
      const named = [...all.reasons, ...all.monitor.reasons, ...all.errors].some((r) => 'policy_id' in r && outOfForce.has(r.policy_id))
      return !named && JSON.stringify(all) === JSON.stringify(inForce)
    }),
    { numRuns: 2000 },
  )
})

t.test('precedence: one applying deny beats any number of allows and approvals', async () => {
  await fc.assert(
    fc.property(policiesArb, requestArb, settingsArb, (policies, req, settings) => {
      const deny = policy({ policy_id: 'the-deny', effect: 'deny', actions: [req.action] })
      const outcome = decide(compilePolicySet([...policies, deny], 1), settings, req)
      return outcome.decision === 'deny' && outcome.reasons.some((r) => 'policy_id' in r && r.policy_id === 'the-deny') && outcome.approval === null
    }),
    { numRuns: 1000 },
  )
})

t.test('fail closed: an erroring condition makes deny and require_approval apply, never allow', async (t) => {
  const broken = 'args.currency == "EUR"' // args has no currency: a run-time error
  for (const [effect, settings, want] of [
    ['deny', { default_decision: 'allow', unknown_agents: 'deny' }, 'deny'],
    ['require_approval', { default_decision: 'allow', unknown_agents: 'deny' }, 'require_approval'],
    ['allow', { default_decision: 'deny', unknown_agents: 'deny' }, 'deny'],
    ['allow', { default_decision: 'require_approval', unknown_agents: 'deny' }, 'require_approval'],
  ] as const) {
    const set = compilePolicySet([policy({ policy_id: 'p', version: 7, effect, actions: ['payments.refund'], condition: broken })], 3)
    const outcome = decide(set, settings, request())
    t.equal(outcome.decision, want, `${effect} with an erroring condition`)
    t.same(outcome.errors, [{ policy_id: 'p', version: 7, mode: 'enforce', message: 'No such key: currency' }])
  }
})

t.test('a condition returning a non-bool is an error, and fails closed', async (t) => {
  const set = compilePolicySet([policy({ policy_id: 'p', effect: 'allow', actions: ['*'], condition: 'args.amount' })], 1)
  const outcome = decide(set, SETTINGS, request())
  t.equal(outcome.decision, 'deny')
  t.same(outcome.reasons, [{ rule: 'default_decision' }])
  t.same(outcome.errors, [{ policy_id: 'p', version: 1, mode: 'enforce', message: 'Condition returned a double, not a bool' }])
})

t.test('a stored condition that no longer compiles fails closed and is reported', async (t) => {
  const set = compilePolicySet(
    [policy({ policy_id: 'a', effect: 'allow', actions: ['*'], condition: 'args.amount >' }), policy({ policy_id: 'd', effect: 'deny', actions: ['*'], condition: 'nope(' })],
    1,
  )
  t.equal(set.problems.length, 2)
  const outcome = decide(set, { default_decision: 'allow', unknown_agents: 'deny' }, request())
  t.equal(outcome.decision, 'deny')
  t.same(outcome.reasons.map((r) => 'policy_id' in r && r.policy_id), ['d'])
  t.same(outcome.errors.map((e) => e.policy_id), ['a', 'd'])
  t.match(outcome.errors[0]!.message, /^Condition does not compile \(line 1, column \d+\): /)
})

t.test('the documented answer: reasons with versions, monitor would-be, errors, approval block', async (t) => {
  const set = compilePolicySet(
    [
      policy({ policy_id: 'allow-payments', version: 2, name: 'Payments allowed', effect: 'allow', actions: ['payments.*'] }),
      policy({ policy_id: 'refund-approval', version: 3, name: 'Refunds need a manager', effect: 'require_approval', actions: ['payments.refund'], approval: { approvers_required: 2, approver_roles: ['manager', 'admin'], timeout_seconds: 600 } }),
      policy({ policy_id: 'refund-approval-2', version: 1, name: 'Big refunds need an admin', effect: 'require_approval', actions: ['payments.refund'], condition: 'args.amount >= 100', approval: { approver_roles: ['admin', 'owner'], use_within_seconds: 60 } }),
      policy({ policy_id: 'shadow-deny', version: 1, name: 'Shadow: no refunds in EUR', effect: 'deny', actions: ['payments.refund'], mode: 'monitor', condition: 'args.currency == "EUR"' }),
    ],
    42,
  )
  const outcome = decide(set, SETTINGS, request())
  t.same(outcome, {
    decision: 'require_approval',
    reasons: [
      { policy_id: 'refund-approval', version: 3, name: 'Refunds need a manager', effect: 'require_approval', mode: 'enforce' },
      { policy_id: 'refund-approval-2', version: 1, name: 'Big refunds need an admin', effect: 'require_approval', mode: 'enforce' },
    ],
    monitor: {
      decision: 'deny',
      reasons: [{ policy_id: 'shadow-deny', version: 1, name: 'Shadow: no refunds in EUR', effect: 'deny', mode: 'monitor' }],
    },
    errors: [{ policy_id: 'shadow-deny', version: 1, mode: 'monitor', message: 'No such key: currency' }],
    approval: {
      approvers_required: 2,
      approver_roles: ['admin'],
      timeout_seconds: 600,
      use_within_seconds: 60,
      policies: [
        { policy_id: 'refund-approval', version: 3 },
        { policy_id: 'refund-approval-2', version: 1 },
      ],
      roles_conflict: false,
    },
    // No policy here has limits: nothing to count.
    limits: [],
    ruleset_revision: 42,
  })
})

t.test('approval roles with nothing in common fall to owners, flagged', async (t) => {
  const set = compilePolicySet(
    [
      policy({ policy_id: 'a', effect: 'require_approval', actions: ['*'], approval: { approver_roles: ['manager'] } }),
      policy({ policy_id: 'b', effect: 'require_approval', actions: ['*'], approval: { approver_roles: ['admin'] } }),
    ],
    1,
  )
  const approval = decide(set, SETTINGS, request()).approval
  t.same(approval?.approver_roles, ['owner'])
  t.equal(approval?.roles_conflict, true)
})

t.test('require_approval by default decision carries the default approval block', async (t) => {
  const outcome = decide(compilePolicySet([], 1), { default_decision: 'require_approval', unknown_agents: 'deny' }, request())
  t.equal(outcome.decision, 'require_approval')
  t.same(outcome.reasons, [{ rule: 'default_decision' }])
  t.same(outcome.approval, { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 900, use_within_seconds: 300, policies: [], roles_conflict: false })
})

t.test('agent status: suspended and unknown agents', async (t) => {
  const set = compilePolicySet([policy({ policy_id: 'allow-all', effect: 'allow', actions: ['*'] })], 1)
  const suspended = decide(set, { default_decision: 'allow', unknown_agents: 'evaluate' }, request({ agent: { id: 'a', handle: 'support-bot', labels: {}, status: 'suspended' } }))
  t.same([suspended.decision, suspended.reasons, suspended.monitor], ['deny', [{ rule: 'agent_suspended' }], { decision: 'deny', reasons: [{ rule: 'agent_suspended' }] }])
  const discovered = { agent: { id: 'a', handle: 'support-bot', labels: {}, status: 'discovered' as const } }
  const refused = decide(set, { default_decision: 'allow', unknown_agents: 'deny' }, request(discovered))
  t.same([refused.decision, refused.reasons], ['deny', [{ rule: 'unknown_agent' }]])
  const evaluated = decide(set, { default_decision: 'deny', unknown_agents: 'evaluate' }, request(discovered))
  t.same([evaluated.decision, evaluated.reasons.map((r) => 'policy_id' in r && r.policy_id)], ['allow', ['allow-all']])
})

t.test('conditions see agent, action, resource, args, context and now', async (t) => {
  const condition = [
    'agent.id == "agent-1"',
    'agent.handle == "support-bot"',
    'agent.labels.team == "support"',
    'action == "payments.refund"',
    'resource.startsWith("order/")',
    'args.amount > 100',
    'context.on_behalf_of.endsWith("@acme.example")',
    'now == timestamp("2025-03-01T12:00:00Z")',
    'now.getHours() == 12',
  ].join(' && ')
  const set = compilePolicySet([policy({ policy_id: 'p', effect: 'allow', actions: ['payments.*'], condition })], 1)
  const outcome = decide(set, SETTINGS, request({ context: { on_behalf_of: 'ada@acme.example' } }))
  t.same(outcome.errors, [])
  t.equal(outcome.decision, 'allow')
  const later = decide(set, SETTINGS, request({ context: { on_behalf_of: 'ada@acme.example' }, now: new Date('2025-03-01T13:00:00Z') }))
  t.equal(later.decision, 'deny', 'time is an argument: another now, another answer')
})

t.test('resource defaults to the empty string', async (t) => {
  const set = compilePolicySet([policy({ policy_id: 'p', effect: 'allow', actions: ['*'], resources: [''] })], 1)
  t.equal(decide(set, SETTINGS, request({ resource: undefined })).decision, 'allow')
  t.equal(decide(set, SETTINGS, request({ resource: 'order/1' })).decision, 'deny')
})

t.test('the compiled set is frozen and indexes exact actions apart from wildcards', async (t) => {
  const set = compilePolicySet(
    [
      policy({ policy_id: 'exact', effect: 'allow', actions: ['a.b', 'a.b', 'c.d'] }),
      policy({ policy_id: 'spread', effect: 'allow', actions: ['a.b', 'a.*', 'x.y*', '*.b'] }),
      policy({ policy_id: 'any', effect: 'allow', actions: ['*'] }),
    ],
    5,
  )
  t.ok(Object.isFrozen(set))
  t.ok(Object.isFrozen(set.policies[0]))
  t.same([...set.byAction.keys()], ['a.b', 'c.d'])
  t.same([...set.byNamespace.keys()], ['a.', 'x.'])
  t.same(set.wildcard.map((p) => p.policy_id), ['spread', 'any'])
  t.same([...set.shared].map((p) => p.policy_id), ['spread'])
  const reasonsFor = (action: string) => decide(set, SETTINGS, request({ action })).reasons.map((r) => ('policy_id' in r ? r.policy_id : r.rule))
  t.same(reasonsFor('a.b'), ['exact', 'spread', 'any'], 'each policy once, in input order')
  t.same(reasonsFor('x.yz'), ['spread', 'any'])
  t.same(reasonsFor('x.z'), ['any'])
  t.same(reasonsFor('q.b'), ['spread', 'any'])
})
