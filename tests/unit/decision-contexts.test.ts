// The per-process cache of decision contexts (services/decision-contexts.ts): what it keeps, how
// entries are named (organization and agent, by id or by handle), and its bound. Whether a
// cached context may decide is the guarded insert's job (tests/http/decisions.test.ts).
import t from 'tap'
import { createDecisionContextCache } from '../../services/decision-contexts.ts'
import type { DecisionContext } from '../../storage/decision-context.ts'

const ORG_A = '00000000-0000-4000-8000-00000000000a'
const ORG_B = '00000000-0000-4000-8000-00000000000b'

function context(handle: string | null, revision = 1): DecisionContext {
  const at = new Date('2026-11-24T00:00:00.000Z')
  return {
    settings: { default_decision: 'deny', unknown_agents: 'deny', ruleset_revision: revision },
    agent: handle === null ? null : {
      agent_id: crypto.randomUUID(), organization_id: ORG_A, handle, display_name: null, description: '', owner_user_id: null,
      labels: {}, status: 'active', created_at: at, updated_at: at, last_seen_at: null,
    },
  } as DecisionContext
}

t.test('entries are per organization and per kind of name; only contexts with an agent are kept', async (t) => {
  const cache = createDecisionContextCache()
  const bot = context('bot')
  cache.remember(ORG_A, { handle: 'bot' }, bot)
  t.equal(cache.get(ORG_A, { handle: 'bot' }), bot)
  t.equal(cache.get(ORG_B, { handle: 'bot' }), null, 'another organization never sees it')
  t.equal(cache.get(ORG_A, { agentId: 'bot' }), null, 'a handle is not an agent id')
  cache.remember(ORG_A, { handle: 'nobody' }, context(null))
  t.equal(cache.get(ORG_A, { handle: 'nobody' }), null, 'an unknown agent is not kept (it is discovered first)')
  const newer = context('bot', 2)
  cache.remember(ORG_A, { handle: 'bot' }, newer)
  t.equal(cache.get(ORG_A, { handle: 'bot' }), newer, 'a newer read replaces the entry')
  cache.forget(ORG_A, { handle: 'bot' })
  t.equal(cache.get(ORG_A, { handle: 'bot' }), null)
  t.same(cache.stats, { hits: 2, stale: 1 })
  t.equal(cache.size, 0)
})

t.test('the cache is bounded: the oldest entry goes first', async (t) => {
  const cache = createDecisionContextCache(3)
  for (const handle of ['a', 'b', 'c']) cache.remember(ORG_A, { handle }, context(handle))
  cache.remember(ORG_A, { handle: 'a' }, context('a', 2)) // a read again: now the newest
  cache.remember(ORG_A, { handle: 'd' }, context('d'))
  t.equal(cache.size, 3)
  t.same(['a', 'b', 'c', 'd'].map((handle) => cache.get(ORG_A, { handle }) !== null), [true, false, true, true])
})
