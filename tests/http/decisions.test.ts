// Decisions: POST /decisions (every rule of docs/api.md#decisions), simulate, the log routes,
// discovery, suspension, agent keys, idempotency, races, bad input, a failing database.
import { Kysely, PostgresDialect, sql } from 'kysely'
import t from 'tap'
import { argsSha256 } from '../../engine/index.ts'
import { createPostgresPool } from '../../database/connect.ts'
import { writeDecisions, type DecisionRecord, type PendingDecision } from '../../storage/decisions.ts'
import type { Database } from '../../database/schema.ts'
import { silentLogger } from '../../log.ts'
import { countRows, decide, disableAllPolicies, insertPolicy } from '../support/governance-support.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t, { env: { BODY_LIMIT_BYTES: '65536' } })
const { vars } = app
const A = vars.ORG_A!
const NOW = '2026-11-22T12:00:00.000Z'
const at = () => new Date(app.clock.now)

// The seeded require_approval policy on payments.* stays; these are added.
const allowRead = await insertPolicy(app.db, A, { name: 'Read tickets', effect: 'allow', actions: ['tickets.read'] }, at())
const denyBig = await insertPolicy(app.db, A, { name: 'No big refunds', effect: 'deny', actions: ['payments.refund'], condition: 'args.amount > 1000' }, at())
const shadow = await insertPolicy(app.db, A, { name: 'Shadow: no deletes', effect: 'deny', actions: ['tickets.read'], resources: ['ticket/secret*'], mode: 'monitor' }, at())

async function makeAgent(handle: string, status = 'active') {
  const res = await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle, status } })
  if (res.status !== 201) throw new Error(`agent ${handle}: ${res.status}`)
  return jsonOf(res)
}

async function revision(org = A): Promise<number> {
  const row = await app.db.selectFrom('organizations').select('ruleset_revision').where('id', '=', org).executeTakeFirstOrThrow()
  return row.ruleset_revision
}

const billing = await makeAgent('billing')

t.test('an applying policy decides; the answer has every field, and the row is logged', async (t) => {
  const body = { agent: 'billing', action: 'payments.refund', resource: 'order/8812', args: { amount: 120, currency: 'EUR' }, context: { on_behalf_of: 'ada@acme.example' } }
  const answer = await decide(app, vars.MEMBER_KEY_A!, body)
  t.equal(answer.status, 200)
  t.equal(answer.headers.get('cache-control'), 'no-store')
  t.same(answer.body, {
    decision_id: answer.body.decision_id,
    decision: 'require_approval',
    reasons: [{ policy_id: vars.POLICY_A, version: 1, name: 'Payments need approval (A)', effect: 'require_approval', mode: 'enforce' }],
    monitor: { decision: 'require_approval', reasons: [{ policy_id: vars.POLICY_A, version: 1, name: 'Payments need approval (A)', effect: 'require_approval', mode: 'enforce' }] },
    errors: [],
    approval: { approval_id: answer.body.approval?.approval_id, status: 'pending', expires_at: '2026-11-22T12:15:00.000Z' },
    args_sha256: argsSha256({ organization_id: A, agent: 'billing', action: 'payments.refund', resource: 'order/8812', args: { currency: 'EUR', amount: 120 } }),
    ruleset_revision: await revision(),
    evaluated_at: NOW,
  })
  t.match(answer.body.args_sha256, /^[0-9a-f]{64}$/)
  const read = await app.call('GET', `/decisions/${answer.body.decision_id}`, { token: vars.VIEWER_KEY_A })
  t.equal(read.status, 200)
  t.same(await jsonOf(read), {
    decision_id: answer.body.decision_id,
    agent_id: billing.agent_id,
    agent: 'billing',
    action: 'payments.refund',
    resource: 'order/8812',
    args: { amount: 120, currency: 'EUR' },
    context: { on_behalf_of: 'ada@acme.example' },
    decision: 'require_approval',
    policy_decision: 'require_approval',
    reasons: answer.body.reasons,
    monitor: answer.body.monitor,
    errors: [],
    approval_id: answer.body.approval.approval_id,
    args_sha256: answer.body.args_sha256,
    ruleset_revision: answer.body.ruleset_revision,
    requested_by: `key:${vars.MEMBER_KEY_ID_A}`,
    evaluated_at: NOW,
    via: 'api',
  })
})

t.test('precedence, default, fail-closed conditions and monitor mode', async (t) => {
  const big = await decide(app, vars.MEMBER_KEY_A!, { agent: 'billing', action: 'payments.refund', args: { amount: 5000 } })
  t.same([big.body.decision, big.body.reasons], ['deny', [{ policy_id: denyBig.policy_id, version: 1, name: 'No big refunds', effect: 'deny', mode: 'enforce' }]], 'deny beats require_approval')
  const broken = await decide(app, vars.MEMBER_KEY_A!, { agent: 'billing', action: 'payments.refund', args: {} })
  t.equal(broken.body.decision, 'deny', 'a condition that errors counts as true for deny')
  t.equal(broken.body.errors.length, 1)
  t.match(broken.body.errors[0], { policy_id: denyBig.policy_id, version: 1, mode: 'enforce', message: String })
  const none = await decide(app, vars.MEMBER_KEY_A!, { agent: 'billing', action: 'email.send' })
  t.same([none.body.decision, none.body.reasons], ['deny', [{ rule: 'default_decision' }]])
  const read = await decide(app, vars.MEMBER_KEY_A!, { agent: 'billing', action: 'tickets.read', resource: 'ticket/secret-1' })
  t.same(read.body.decision, 'allow')
  t.same(read.body.reasons, [{ policy_id: allowRead.policy_id, version: 1, name: 'Read tickets', effect: 'allow', mode: 'enforce' }])
  t.same(read.body.monitor, { decision: 'deny', reasons: [{ policy_id: shadow.policy_id, version: 1, name: 'Shadow: no deletes', effect: 'deny', mode: 'monitor' }] }, 'shadow mode shows what would happen')
  t.equal(read.body.resource, undefined)
})

t.test('an unknown handle is discovered once, decided per unknown_agents, listed as discovered', async (t) => {
  const before = await revision()
  const answers = await Promise.all(Array.from({ length: 20 }, () => decide(app, vars.MEMBER_KEY_A!, { agent: 'new-bot', action: 'tickets.read' })))
  for (const answer of answers) t.same([answer.status, answer.body.decision, answer.body.reasons], [200, 'deny', [{ rule: 'unknown_agent' }]])
  const rows = await app.db.selectFrom('agents').selectAll().where('organization_id', '=', A).where('handle', '=', 'new-bot').execute()
  t.equal(rows.length, 1, 'parallel first decisions make one agent')
  t.equal(rows[0]!.status, 'discovered')
  t.equal(await revision(), before + 1, 'discovery bumps the revision once')
  const listed = await jsonOf(await app.call('GET', '/agents?status=discovered', { token: vars.VIEWER_KEY_A }))
  t.same(listed.agents.map((a: any) => a.handle), ['new-bot'])
  t.equal(listed.agents[0].last_seen_at, NOW, 'last_seen_at is recorded')
  await app.db.updateTable('organizations').set({ unknown_agents: 'evaluate' }).where('id', '=', A).execute()
  await app.db.transaction().execute(async (trx) => {
    await trx.updateTable('organizations').set({ ruleset_revision: sql`ruleset_revision + 1` }).where('id', '=', A).execute()
  })
  const evaluated = await decide(app, vars.MEMBER_KEY_A!, { agent: 'new-bot', action: 'tickets.read' })
  t.same(evaluated.body.decision, 'allow', 'evaluate treats a discovered agent as active')
  await app.db.updateTable('organizations').set({ unknown_agents: 'deny' }).where('id', '=', A).execute()
})

t.test('suspension applies on the very next decision', async (t) => {
  const agent = await makeAgent('suspendable')
  t.equal((await decide(app, vars.MEMBER_KEY_A!, { agent: 'suspendable', action: 'tickets.read' })).body.decision, 'allow')
  const patched = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: { status: 'suspended' } })
  t.equal(patched.status, 200)
  const next = await decide(app, vars.MEMBER_KEY_A!, { agent: 'suspendable', action: 'tickets.read' })
  t.same([next.status, next.body.decision, next.body.reasons, next.body.monitor], [200, 'deny', [{ rule: 'agent_suspended' }], { decision: 'deny', reasons: [{ rule: 'agent_suspended' }] }])
  await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: { status: 'active' } })
  t.equal((await decide(app, vars.MEMBER_KEY_A!, { agent: 'suspendable', action: 'tickets.read' })).body.decision, 'allow', 'and reactivation too')
})

t.test('a decision made from a cached context is logged only if that context is still the current one', async (t) => {
  // The route keeps the context it read (settings, revision, agent) and writes later decisions
  // with a guard that the insert checks: the organization is still at that revision. These
  // changes are made behind the route's back, in plain SQL as the API makes them (the change and
  // a revision bump in one transaction), so only that guard can notice them.
  const agent = await makeAgent('cached-bot')
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
  const asks = [
    { name: 'member key naming the agent', token: vars.MEMBER_KEY_A!, body: { agent: 'cached-bot', action: 'tickets.read' } },
    { name: 'agent key', token: key.api_key as string, body: { action: 'tickets.read' } },
  ]
  const answers = async () => Promise.all(asks.map(async (ask) => ({ name: ask.name, ...(await decide(app, ask.token, ask.body)) })))
  const logged = async () => Number((await app.db.selectFrom('decisions').select((eb) => eb.fn.countAll<string>().as('n')).where('agent_id', '=', agent.agent_id).executeTakeFirstOrThrow()).n)
  let asked = 0
  for (let round = 0; round < 3; round++) {
    for (const answer of await answers()) t.same([answer.status, answer.body.decision], [200, 'allow'], `warm: ${answer.name}`)
    asked += asks.length
  }

  // A suspension made by hand as the API makes it: the status and a revision bump, one transaction.
  const bySql = (status: 'active' | 'suspended') =>
    app.db.transaction().execute(async (trx) => {
      await trx.updateTable('agents').set({ status }).where('agent_id', '=', agent.agent_id).execute()
      await trx.updateTable('organizations').set({ ruleset_revision: sql`ruleset_revision + 1` }).where('id', '=', A).execute()
    })
  await bySql('suspended')
  for (const answer of await answers()) t.same([answer.status, answer.body.decision, answer.body.reasons], [200, 'deny', [{ rule: 'agent_suspended' }]], `suspended by SQL: ${answer.name}`)
  await bySql('active')
  for (const answer of await answers()) t.same([answer.status, answer.body.decision], [200, 'allow'], `active again: ${answer.name}`)
  asked += 2 * asks.length

  // A policy added with a revision bump: the next decisions use it and carry the new revision.
  const denied = await insertPolicy(app.db, A, { name: 'No reads for cached-bot', effect: 'deny', agents: ['cached-bot'], actions: ['tickets.read'] }, at())
  for (const answer of await answers()) {
    t.same([answer.status, answer.body.decision, answer.body.ruleset_revision], [200, 'deny', denied.revision], `new revision: ${answer.name}`)
    t.equal(answer.body.reasons[0].policy_id, denied.policy_id)
  }
  asked += asks.length
  t.equal(await logged(), asked, 'one row per answer: a stale attempt writes nothing')
  const stamped = await app.db.selectFrom('decisions').select(['decision', 'ruleset_revision']).where('agent_id', '=', agent.agent_id).where('ruleset_revision', '>=', denied.revision).execute()
  t.same(stamped.map((row) => [row.decision, row.ruleset_revision]), [['deny', denied.revision], ['deny', denied.revision]], 'logged as answered')

  // The agent deleted by hand as the API deletes it (its keys go with it, the revision moves on):
  // the key is refused, the handle is discovered anew.
  await app.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('agents').where('agent_id', '=', agent.agent_id).execute()
    await trx.updateTable('organizations').set({ ruleset_revision: sql`ruleset_revision + 1` }).where('id', '=', A).execute()
  })
  app.app.forgetCredentials()
  const [named, bound] = await answers()
  t.same([named!.status, named!.body.decision, named!.body.reasons], [200, 'deny', [{ rule: 'unknown_agent' }]], 'a deleted agent is unknown again')
  t.equal(bound!.status, 401, 'its key is gone')
  await app.db.updateTable('policies').set({ enabled: false }).where('policy_id', '=', denied.policy_id).execute()
})

t.test('a guarded insert writes exactly the rows whose guard holds, alone or in a transaction batch', async (t) => {
  const agent = await makeAgent('guarded-bot')
  const rev = await revision()
  const record = (): DecisionRecord => ({
    decision_id: crypto.randomUUID(), organization_id: A, agent_id: agent.agent_id, agent_handle: 'guarded-bot', action: 'x.y', resource: '', args: { n: 1 }, context: {},
    args_sha256: '0'.repeat(64), decision: 'allow', policy_decision: 'allow', reasons: [], monitor: null, errors: [], approval_id: null, ruleset_revision: rev,
    requested_by: 'key:test', evaluated_at: at(),
  })
  const batchOf = (): PendingDecision[] => [
    { record: record(), idempotency: null, guard: { revision: rev } },
    { record: record(), idempotency: null, guard: { revision: rev - 1 } },
    { record: record(), idempotency: null, guard: { revision: rev + 1 } },
    { record: record(), idempotency: null },
    // The agent must belong to the organization the row names.
    { record: { ...record(), organization_id: vars.ORG_B! }, idempotency: null, guard: { revision: rev } },
  ]
  const written = async (batch: PendingDecision[]) => {
    const rows = await app.db.selectFrom('decisions').select('decision_id').where('decision_id', 'in', batch.map((item) => item.record.decision_id)).execute()
    return batch.map((item) => rows.some((row) => row.decision_id === item.record.decision_id))
  }
  const alone = batchOf()
  t.same((await writeDecisions(app.db, alone, at())).map((o) => o.kind), ['logged', 'stale', 'stale', 'logged', 'stale'], 'one statement')
  t.same(await written(alone), [true, false, false, true, false])
  const keyed = [...batchOf(), { record: record(), idempotency: { key: `k-${crypto.randomUUID()}`, request_sha256: 'x', response: {} } }]
  t.same((await writeDecisions(app.db, keyed, at())).map((o) => o.kind), ['logged', 'stale', 'stale', 'logged', 'stale', 'logged'], 'in a transaction')
  t.same(await written(keyed), [true, false, false, true, false, true])
  const refused = { record: record(), idempotency: { key: 'k', request_sha256: 'x', response: {} }, guard: { revision: rev } }
  await t.rejects(writeDecisions(app.db, [refused], at()), { message: 'a guarded decision carries no idempotency key or approval' })
  t.same(await written([refused]), [false])
})

t.test('on PostgreSQL the decision inserts are prepared statements, one text per kind for every batch size', { skip: process.env.TEST_DATABASE_URL ? false : 'prepared statements are a PostgreSQL connection feature' }, async (t) => {
  // One connection, so pg_prepared_statements (per session) shows what this pool prepared.
  const { rows: schema } = await sql<{ schema: string }>`select current_schema() as schema`.execute(app.db)
  const url = new URL(process.env.TEST_DATABASE_URL!)
  url.searchParams.set('options', `-c search_path=${schema[0]!.schema}`)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: await createPostgresPool(url.toString(), silentLogger, 1) }) })
  t.teardown(() => db.destroy())
  const agent = await makeAgent('prepared-bot')
  const rev = await revision()
  const pending = (guard: boolean): PendingDecision => ({
    record: {
      decision_id: crypto.randomUUID(), organization_id: A, agent_id: agent.agent_id, agent_handle: 'prepared-bot', action: 'x.y', resource: '', args: { n: 1 }, context: {},
      args_sha256: '0'.repeat(64), decision: 'allow', policy_decision: 'allow', reasons: [], monitor: null, errors: [], approval_id: null, ruleset_revision: rev,
      requested_by: 'key:test', evaluated_at: at(),
    },
    idempotency: null,
    guard: guard ? { revision: rev } : null,
  })
  const prepared = async () =>
    (await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements where name like 'steward_%' order by statement`.execute(db)).rows
  t.same(await prepared(), [], 'nothing prepared on a new connection')
  for (let i = 0; i < 2; i++) {
    t.same((await writeDecisions(db, [pending(true)], at())).map((o) => o.kind), ['logged'])
    t.same((await writeDecisions(db, [pending(false), pending(false)], at())).map((o) => o.kind), ['logged', 'logged'])
  }
  const stale = { ...pending(true), guard: { revision: rev - 1 } }
  t.same((await writeDecisions(db, [stale], at())).map((o) => o.kind), ['stale'], 'the prepared guarded insert still refuses a stale revision')
  t.same((await writeDecisions(db, Array.from({ length: 17 }, () => pending(true)), at())).map((o) => o.kind), Array(17).fill('logged'))
  t.same((await writeDecisions(db, Array.from({ length: 17 }, () => pending(false)), at())).map((o) => o.kind), Array(17).fill('logged'))
  const statements = await prepared()
  // Batches of 1, 2 and 17 rows, guarded or not: two texts (the rows go in as arrays), each reused.
  t.same(
    statements.map((row) => [row.statement.startsWith('/* prepared */ insert into "decisions"'), row.statement.includes('guard_revision')]),
    [[true, false], [true, true]],
    'one prepared statement per kind of insert, whatever the batch size',
  )
})

t.test('agent keys ask for their own agent only and read their own decisions', async (t) => {
  const agent = await makeAgent('keyholder')
  const key = await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))
  const implied = await decide(app, key.api_key, { action: 'tickets.read' })
  t.same([implied.status, implied.body.decision], [200, 'allow'])
  const named = await decide(app, key.api_key, { agent: 'keyholder', action: 'tickets.read' })
  t.equal(named.status, 200)
  const other = await decide(app, key.api_key, { agent: 'billing', action: 'tickets.read' })
  t.same([other.status, other.body], [403, { status: 'Forbidden', error: 'This key is bound to agent keyholder; it may not ask for another agent' }])
  const log = await jsonOf(await app.call('GET', '/decisions?limit=100', { token: key.api_key }))
  t.equal(log.decisions.length, 2)
  t.ok(log.decisions.every((d: any) => d.agent === 'keyholder' && d.requested_by === `agent-key:${key.key_id}`))
  const billingDecision = (await jsonOf(await app.call('GET', '/decisions?agent=billing&limit=1', { token: vars.VIEWER_KEY_A }))).decisions[0]
  const foreign = await app.call('GET', `/decisions/${billingDecision.decision_id}`, { token: key.api_key })
  const random = await app.call('GET', `/decisions/${crypto.randomUUID()}`, { token: key.api_key })
  t.equal(foreign.status, 404)
  t.equal(await foreign.text(), await random.text())
  // A token minted from the agent key is bound the same way.
  const token = await jsonOf(await app.call('POST', '/auth/login', { json: { api_key: key.api_key } }))
  const viaToken = await app.call('GET', '/keys', { token: token.access_token })
  t.equal(viaToken.status, 403)
  const suspended = await app.call('PATCH', `/agents/${agent.agent_id}`, { token: vars.MANAGER_KEY_A, json: { status: 'suspended' } })
  t.equal(suspended.status, 200)
  t.same((await decide(app, key.api_key, { action: 'tickets.read' })).body.reasons, [{ rule: 'agent_suspended' }])
})

t.test('roles: Viewer may read the log but not ask', async (t) => {
  const res = await decide(app, vars.VIEWER_KEY_A!, { agent: 'billing', action: 'tickets.read' })
  t.same([res.status, res.body], [403, { status: 'Forbidden', error: "This credential's role (viewer) lacks the decisions:check permission" }])
  const session = await jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }))
  const bySession = await decide(app, session.access_token, { agent: 'billing', action: 'tickets.read' })
  t.equal(bySession.status, 200)
  const row = await app.db.selectFrom('decisions').select('requested_by').where('decision_id', '=', bySession.body.decision_id).executeTakeFirstOrThrow()
  t.match(row.requested_by, /^user:/)
})

t.test('bad input answers 400 JSON, never 500', async (t) => {
  const cases: [unknown, string][] = [
    [{ action: 'x' }, 'Field agent is required'],
    [{ agent: 'billing' }, 'Field action is required'],
    [{ agent: 'Bad Handle', action: 'x' }, 'Field agent must be an agent handle: 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'],
    [{ agent: 'billing', action: 7 }, 'Field action must be a string'],
    [{ agent: 'billing', action: '' }, 'Field action must not be empty'],
    [{ agent: 'billing', action: 'x', args: [] }, 'Field args must be a JSON object'],
    [{ agent: 'billing', action: 'x', args: 'a' }, 'Field args must be a JSON object'],
    [{ agent: 'billing', action: 'x', context: null }, 'Field context must be a JSON object'],
    [{ agent: 'billing', action: 'x', resource: 5 }, 'Field resource must be a string'],
    [{ agent: 'billing', action: 'x\ny' }, 'Field action holds a control character'],
    [{ agent: 'billing', action: 'x', args: { s: 'a\u0000' } }, 'Request body contains a NUL character'],
    [{ agent: 'billing', action: 'x', args: { big: 'x'.repeat(16_400) } }, 'Fields args and context together are larger than 16384 bytes'],
    [{ agent: 'billing', action: 'x', args: { a: 'x'.repeat(9000) }, context: { b: 'y'.repeat(9000) } }, 'Fields args and context together are larger than 16384 bytes'],
    [{ agent: 'billing', action: 'x', approval_id: 'not-a-uuid' }, 'Field approval_id must be a UUID or null'],
    [{ agent: 'billing', action: 'x', idempotency_key: 5 }, 'Field idempotency_key must be a string'],
    [{ agent: 'billing', action: 'x', verdict: 'allow' }, 'Unknown field: verdict'],
    [{ agent: 'billing', action: 'x', decision: 'allow' }, 'Field decision is read-only'],
  ]
  for (const [body, error] of cases) {
    const res = await decide(app, vars.MEMBER_KEY_A!, body)
    t.same([res.status, res.body], [400, { status: 'Bad Request', error }], JSON.stringify(body).slice(0, 80))
  }
  const raw: [string, string][] = [
    ['{"agent":', 'Request body is not valid JSON'],
    ['[1]', 'Request body must be a JSON object'],
    ['{"agent":"billing","action":"x","args":' + '{"a":'.repeat(40) + '1' + '}'.repeat(40) + '}', 'Request body is nested more than 32 levels deep'],
    ['{"agent":"billing","action":"x","args":{"n":1e400}}', 'Field args must hold JSON that has a canonical form (finite numbers only)'],
  ]
  for (const [body, error] of raw) {
    const res = await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, body, headers: { 'content-type': 'application/json' } })
    t.same([res.status, await jsonOf(res)], [400, { status: 'Bad Request', error }], body.slice(0, 60))
  }
  const text = await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, body: 'agent=billing', headers: { 'content-type': 'text/plain' } })
  t.equal(text.status, 415)
})

t.test('idempotency: the first answer returns; another request with the key is 409; 50 at once log one row', async (t) => {
  const body = { agent: 'billing', action: 'tickets.read', idempotency_key: 'req-1' }
  const first = await decide(app, vars.MEMBER_KEY_A!, body)
  t.equal(first.status, 200)
  t.equal(first.headers.get('idempotent-replayed'), null)
  app.clock.advance(1000)
  const replay = await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, json: body })
  t.equal(await replay.text(), JSON.stringify(first.body), 'the replay is byte for byte the first answer')
  const again = await decide(app, vars.MEMBER_KEY_A!, body)
  t.same([again.status, again.body], [200, first.body], 'the same answer, the same decision_id and time')
  t.equal(again.headers.get('idempotent-replayed'), 'true')
  const changed = await decide(app, vars.MEMBER_KEY_A!, { ...body, action: 'tickets.write' })
  t.same([changed.status, changed.body], [409, { status: 'Conflict', error: 'idempotency_key was already used by this credential for a different request within the last 24 hours; use a new key' }])
  const otherCredential = await decide(app, vars.MANAGER_KEY_A!, body)
  t.not(otherCredential.body.decision_id, first.body.decision_id, 'keys are per credential')
  app.clock.advance(24 * 3_600_000 + 1000)
  const later = await decide(app, vars.MEMBER_KEY_A!, body)
  t.not(later.body.decision_id, first.body.decision_id, 'after 24 hours the key is free again')

  const race = { agent: 'billing', action: 'tickets.read', idempotency_key: 'race-1' }
  const answers = await Promise.all(Array.from({ length: 50 }, () => decide(app, vars.MEMBER_KEY_A!, race)))
  t.ok(answers.every((a) => a.status === 200))
  t.equal(new Set(answers.map((a) => a.body.decision_id)).size, 1, 'every answer is the first one')
  const rows = await app.db.selectFrom('decisions').select('decision_id').where('decision_id', '=', answers[0]!.body.decision_id).execute()
  t.equal(rows.length, 1)
  const keys = await app.db.selectFrom('decision_idempotency').selectAll().where('idempotency_key', '=', 'race-1').execute()
  t.equal(keys.length, 1)
  const total = await app.db.selectFrom('decisions').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', A).where('evaluated_at', '=', new Date(app.clock.now)).where('action', '=', 'tickets.read').where('agent_handle', '=', 'billing').executeTakeFirstOrThrow()
  t.equal(Number(total.n), 2, 'the 24-hours-later decision and the one raced decision')
})

t.test('simulate evaluates without writing anything; drafts replace the stored set', async (t) => {
  const decisions = await countRows(app.db, 'decisions', A)
  const agents = await countRows(app.db, 'agents', A)
  const keys = await countRows(app.db, 'decision_idempotency', A)
  const rev = await revision()
  const stored = await app.call('POST', '/decisions/simulate', { token: vars.MEMBER_KEY_A, json: { agent: 'billing', action: 'tickets.read', idempotency_key: 'sim' } })
  t.equal(stored.status, 200)
  t.match(await jsonOf(stored), { decision_id: null, decision: 'allow', approval: null, ruleset_revision: rev })
  const unknown = await app.call('POST', '/decisions/simulate', { token: vars.MEMBER_KEY_A, json: { agent: 'ghost', action: 'tickets.read' } })
  t.same((await jsonOf(unknown)).reasons, [{ rule: 'unknown_agent' }])
  const drafted = await app.call('POST', '/decisions/simulate', {
    token: vars.MEMBER_KEY_A,
    json: { agent: 'billing', action: 'tickets.read', policies: [{ name: 'Draft deny', effect: 'deny', actions: ['tickets.*'], condition: 'context.shift == "night"' }], context: { shift: 'night' } },
  })
  const draftAnswer = await jsonOf(drafted)
  t.same([draftAnswer.decision, draftAnswer.reasons], ['deny', [{ policy_id: '00000000-0000-0000-0000-000000000000', version: 1, name: 'Draft deny', effect: 'deny', mode: 'enforce' }]])
  const bad = await app.call('POST', '/decisions/simulate', { token: vars.MEMBER_KEY_A, json: { agent: 'billing', action: 'x', policies: [{ effect: 'deny', actions: ['x'], condition: 'args.' }] } })
  t.equal(bad.status, 400)
  t.match((await jsonOf(bad)).error, /^policies\.0\.condition does not compile \(line 1, column \d+\)/)
  t.equal(await countRows(app.db, 'decisions', A), decisions, 'no row')
  t.equal(await countRows(app.db, 'agents', A), agents, 'no discovery')
  t.equal(await countRows(app.db, 'decision_idempotency', A), keys, 'no idempotency key')
  t.equal(await revision(), rev)
})

t.test('the log: filters, newest first, cursor pages, bad queries', async (t) => {
  const fresh = await productApp(t)
  const org = fresh.vars.ORG_A!
  const asked: string[] = []
  for (const action of ['a.one', 'a.two', 'a.one', 'a.three']) {
    fresh.clock.advance(1000)
    const res = await decide(fresh, fresh.vars.MEMBER_KEY_A!, { agent: 'logger', action })
    asked.push(res.body.decision_id)
  }
  const all = await jsonOf(await fresh.call('GET', '/decisions?limit=3', { token: fresh.vars.VIEWER_KEY_A }))
  t.same(all.decisions.map((d: any) => d.decision_id), asked.slice(1).reverse())
  const rest = await jsonOf(await fresh.call('GET', `/decisions?limit=3&cursor=${all.next_cursor}`, { token: fresh.vars.VIEWER_KEY_A }))
  t.same([rest.decisions.map((d: any) => d.decision_id), rest.next_cursor], [[asked[0]], null])
  const ones = await jsonOf(await fresh.call('GET', '/decisions?action=a.one&decision=deny&agent=logger', { token: fresh.vars.VIEWER_KEY_A }))
  t.same(ones.decisions.map((d: any) => d.decision_id), [asked[2], asked[0]])
  const window = await jsonOf(await fresh.call('GET', `/decisions?from=${encodeURIComponent(new Date(fresh.clock.now - 2000).toISOString())}&to=${encodeURIComponent(new Date(fresh.clock.now).toISOString())}`, { token: fresh.vars.VIEWER_KEY_A }))
  t.same(window.decisions.map((d: any) => d.decision_id), [asked[2], asked[1]])
  t.same(await jsonOf(await fresh.call('GET', '/decisions', { token: fresh.vars.VIEWER_KEY_B })), { decisions: [], next_cursor: null })
  for (const [query, error] of [
    ['decision=maybe', 'decision must be allow, deny or require_approval'],
    ['from=yesterday', 'Field from must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z'],
    ['limit=101', 'limit must be a whole number from 1 to 100'],
    ['cursor=abc', 'cursor is invalid; pass next_cursor from the previous page'],
    ['agent=%00', 'agent must be at most 200 characters without control characters'],
  ] as const) {
    const res = await fresh.call('GET', `/decisions?${query}`, { token: fresh.vars.VIEWER_KEY_A })
    t.same([res.status, await jsonOf(res)], [400, { status: 'Bad Request', error }], query)
  }
  // Another organization's decision answers like a random id.
  const theirs = await fresh.call('GET', `/decisions/${asked[0]}`, { token: fresh.vars.VIEWER_KEY_B })
  const random = await fresh.call('GET', `/decisions/${crypto.randomUUID()}`, { token: fresh.vars.VIEWER_KEY_B })
  const malformed = await fresh.call('GET', '/decisions/nope', { token: fresh.vars.VIEWER_KEY_B })
  t.equal(theirs.status, 404)
  const text = await theirs.text()
  t.equal(text, await random.text())
  t.equal(text, await malformed.text())
  t.same(JSON.parse(text), { status: 'Not Found', error: 'Decision not found' })
  // Another organization cannot reach A's agent by handle: B discovers its own.
  const crossed = await decide(fresh, fresh.vars.ADMIN_KEY_B!, { agent: 'logger', action: 'a.one' })
  t.same(crossed.body.reasons, [{ rule: 'unknown_agent' }])
  t.equal(await countRows(fresh.db, 'agents', org), 1)
})

t.test('a decision that cannot be logged answers 503 and is never an allow', async (t) => {
  const fresh = await productApp(t)
  const org = fresh.vars.ORG_A!
  await disableAllPolicies(fresh.db, org)
  await insertPolicy(fresh.db, org, { effect: 'allow', actions: ['*'] }, new Date(fresh.clock.now))
  t.equal((await decide(fresh, fresh.vars.MEMBER_KEY_A!, { agent: 'w', action: 'x' })).status, 200)
  await sql`create function refuse_decisions() returns trigger language plpgsql as $$ begin raise exception 'disk full' using errcode = 'XX000'; end $$`.execute(fresh.db)
  for (const partition of (await sql<{ relname: string }>`select c.relname from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'decisions'::regclass`.execute(fresh.db)).rows) {
    await sql`create trigger refuse before insert on ${sql.id(partition.relname)} for each row execute function refuse_decisions()`.execute(fresh.db)
  }
  const before = await countRows(fresh.db, 'decisions', org)
  const refused = await fresh.call('POST', '/decisions', { token: fresh.vars.MEMBER_KEY_A, json: { agent: 'w', action: 'x' } })
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('retry-after'), '1')
  t.same(await jsonOf(refused), { status: 'Service Unavailable', error: 'The decision could not be recorded, so none is given; retry' })
  t.equal(await countRows(fresh.db, 'decisions', org), before)

  const down = await productApp(t)
  await down.database.close()
  const closed = await down.call('POST', '/decisions', { token: down.vars.MEMBER_KEY_A, json: { agent: 'w', action: 'x' } })
  t.equal(closed.status, 503)
  t.equal((await jsonOf(closed)).status, 'Service Unavailable')
})

t.test('a policy change racing decisions never yields a version that was not in force', async (t) => {
  const fresh = await productApp(t)
  const org = fresh.vars.ORG_A!
  await disableAllPolicies(fresh.db, org)
  t.equal((await fresh.call('POST', '/agents', { token: fresh.vars.MANAGER_KEY_A, json: { handle: 'racer' } })).status, 201)
  const { policy_id } = await insertPolicy(fresh.db, org, { name: 'v', effect: 'allow', actions: ['race.*'] }, new Date(fresh.clock.now))
  // revision → (version, effect) in force at that revision
  const inForce = new Map<number, { version: number; effect: string }>([[await revisionOf(fresh.db, org), { version: 1, effect: 'allow' }]])
  let stop = false
  const writer = (async () => {
    for (let version = 2; version <= 25; version++) {
      const effect = version % 2 === 0 ? 'deny' : 'allow'
      const rev = await fresh.db.transaction().execute(async (trx) => {
        await trx.updateTable('policies').set({ version, effect }).where('policy_id', '=', policy_id).execute()
        const row = await trx.updateTable('organizations').set({ ruleset_revision: sql`ruleset_revision + 1` }).where('id', '=', org).returning('ruleset_revision').executeTakeFirstOrThrow()
        return row.ruleset_revision
      })
      inForce.set(rev, { version, effect })
      await new Promise((resolve) => setImmediate(resolve))
    }
    stop = true
  })()
  const answers: any[] = []
  while (!stop) {
    const batch = await Promise.all(Array.from({ length: 8 }, () => decide(fresh, fresh.vars.MEMBER_KEY_A!, { agent: 'racer', action: 'race.go' })))
    answers.push(...batch.map((a) => a.body))
  }
  await writer
  t.ok(answers.length > 0)
  let checked = 0
  for (const answer of answers) {
    const expected = inForce.get(answer.ruleset_revision)
    if (!expected) {
      t.fail(`revision ${answer.ruleset_revision} was never in force`)
      continue
    }
    t.same([answer.reasons[0].version, answer.decision], [expected.version, expected.effect], `revision ${answer.ruleset_revision}`)
    checked++
  }
  t.ok(checked > 0, `${checked} decisions checked`)
})

async function revisionOf(db: typeof app.db, org: string): Promise<number> {
  const row = await db.selectFrom('organizations').select('ruleset_revision').where('id', '=', org).executeTakeFirstOrThrow()
  return row.ruleset_revision
}
