// Capabilities (what one agent gets per action pattern) and replay (logged decisions decided
// again against a draft set).
import t from 'tap'
import { capabilitiesOf, compilePolicySet, decide, replay, type DecisionRequest, type LoggedDecision } from '../../engine/index.ts'
import type { OrganizationSettings, PolicyInput } from '../../engine/types.ts'

const SETTINGS: OrganizationSettings = { default_decision: 'deny', unknown_agents: 'deny' }
const policy = (fields: Partial<PolicyInput> & Pick<PolicyInput, 'policy_id' | 'effect' | 'actions'>): PolicyInput => ({
  version: 1, name: fields.policy_id, agents: ['*'], resources: ['*'], condition: null, mode: 'enforce', enabled: true, archived: false, ...fields,
})
const summary = (entries: ReturnType<typeof capabilitiesOf>) => entries.map((e) => [e.action, e.decision, e.condition, e.otherwise, e.policies.map((p) => p.policy_id)])

t.test('capabilities per action pattern', async (t) => {
  const set = compilePolicySet(
    [
      policy({ policy_id: 'pay', effect: 'allow', actions: ['payments.*'] }),
      policy({ policy_id: 'big', effect: 'deny', actions: ['payments.refund'], condition: 'args.amount > 1000' }),
      policy({ policy_id: 'mail', effect: 'allow', actions: ['email.send'], condition: 'args.to.endsWith("@acme.example")' }),
      policy({ policy_id: 'orders', effect: 'require_approval', actions: ['orders.cancel'], resources: ['order/*'] }),
      policy({ policy_id: 'no-delete', effect: 'deny', actions: ['*.delete'] }),
      policy({ policy_id: 'other-agent', effect: 'allow', actions: ['secrets.read'], agents: ['billing-*'] }),
      policy({ policy_id: 'shadow', effect: 'deny', actions: ['email.send'], mode: 'monitor' }),
    ],
    1,
  )
  t.same(summary(capabilitiesOf(set, SETTINGS, { handle: 'support-bot', status: 'active' })), [
    ['payments.*', 'allow', null, null, ['pay']],
    ['payments.refund', 'conditional', 'args.amount > 1000', 'allow', ['pay', 'big']],
    ['email.send', 'conditional', 'args.to.endsWith("@acme.example")', 'deny', ['mail']],
    ['orders.cancel', 'conditional', 'resource like "order/*"', 'deny', ['orders']],
    ['*.delete', 'deny', null, null, ['no-delete']],
  ])
  const suspended = capabilitiesOf(set, SETTINGS, { handle: 'support-bot', status: 'suspended' })
  t.ok(suspended.every((e) => e.decision === 'deny' && e.rule === 'agent_suspended' && e.policies.length === 0))
  t.ok(capabilitiesOf(set, SETTINGS, { handle: 'x', status: 'discovered' }).every((e) => e.rule === 'unknown_agent'))
  t.same(
    summary(capabilitiesOf(set, { default_decision: 'allow', unknown_agents: 'evaluate' }, { handle: 'billing-bot', status: 'discovered' })).find((e) => e[0] === 'secrets.read'),
    ['secrets.read', 'allow', null, null, ['other-agent']],
  )
})

t.test('replay counts changed outcomes and samples them in input order', async (t) => {
  const stored = compilePolicySet([policy({ policy_id: 'refunds', effect: 'allow', actions: ['payments.refund'] })], 1)
  const draft = compilePolicySet([policy({ policy_id: 'refunds', version: 2, effect: 'allow', actions: ['payments.refund'], condition: 'args.amount <= 100' })], 2)
  const request = (amount: number, action = 'payments.refund'): DecisionRequest => ({
    agent: { id: 'a', handle: 'bot', labels: {}, status: 'active' }, action, resource: '', args: { amount }, context: {}, now: new Date(0),
  })
  const logged: LoggedDecision[] = [50, 150, 250, 80, 999].map((amount, i) => ({ decision_id: `d${i}`, decision: decide(stored, SETTINGS, request(amount)).decision, request: request(amount) }))
  logged.push({ decision_id: 'd5', decision: 'deny', request: request(1, 'email.send') })
  const result = replay(draft, SETTINGS, logged, 2)
  t.equal(result.evaluated, 6)
  t.same(result.changed, { 'allow→deny': 3 })
  t.same(result.sample, [
    { decision_id: 'd1', from: 'allow', to: 'deny', reasons: [{ rule: 'default_decision' }] },
    { decision_id: 'd2', from: 'allow', to: 'deny', reasons: [{ rule: 'default_decision' }] },
  ])
  t.same(replay(stored, SETTINGS, logged), { evaluated: 6, changed: {}, sample: [] }, 'the same set changes nothing')
})
