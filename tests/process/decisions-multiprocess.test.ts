// Two real server processes on one PostgreSQL database: a policy change and an agent suspension
// made through process A are honoured by process B's very next decision, because every decision
// reads the organization's ruleset revision (docs/governance.md). Runs only with
// TEST_DATABASE_URL (a scratch database per run). The delay is reported as a comment; the
// assertion is that B's first decision after A's answer already reflects the change.
import t from 'tap'
import { createScratchDatabase, seedWorld, startServer, type ServerProcess } from '../../bench/lib.ts'

const url = process.env.TEST_DATABASE_URL
if (!url) {
  t.test('decisions across two processes on one PostgreSQL', { skip: 'needs PostgreSQL: set TEST_DATABASE_URL (PGlite is one process per data directory)' }, async () => {})
} else {
  const scratch = await createScratchDatabase(url, 'steward_dmp')
  t.teardown(() => scratch.drop())
  const env = { DATABASE_URL: scratch.url, API_RATE_LIMIT: '1000000/60', API_ORG_RATE_LIMIT: '1000000/60' }
  // One first so migrations run once; the second finds the schema up to date.
  const a: ServerProcess = await startServer('node', env)
  t.teardown(() => a.stop())
  const b: ServerProcess = await startServer('node', env)
  t.teardown(() => b.stop())
  const world = await seedWorld(scratch.url, 0)
  if (!world) throw new Error('could not seed an organization and key')

  const call = async (server: ServerProcess, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${world.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  }
  const ask = (server: ServerProcess) => call(server, 'POST', '/decisions', { agent: 'mp-bot', action: 'payments.refund', resource: 'order/1', args: { amount: 5 } })

  const agent = await call(a, 'POST', '/agents', { handle: 'mp-bot', display_name: 'Cross-process bot' })
  const policy = await call(a, 'POST', `/policies?organization_id=${world.organizationId}`, { name: 'Refunds allowed', effect: 'allow', actions: ['payments.*'] })

  t.test('setup through A', async (t) => {
    t.equal(agent.status, 201, 'agent created')
    t.equal(policy.status, 201, 'policy created')
  })

  t.test("a policy changed through A decides B's very next decision", async (t) => {
    const before = await ask(b)
    t.equal(before.status, 200)
    t.equal(before.body.decision, 'allow', 'B allows (and caches the compiled set)')
    t.equal((await ask(b)).body.decision, 'allow', 'again, from its cached set')
    const changed = await call(a, 'PATCH', `/policies/${policy.body.policy_id}?organization_id=${world.organizationId}`, { effect: 'deny' })
    const at = performance.now()
    t.equal(changed.status, 200, 'PATCH through A')
    t.equal(changed.body.version, 2)
    const after = await ask(b)
    const delay = performance.now() - at
    t.equal(after.status, 200)
    t.equal(after.body.decision, 'deny', "B's first decision after A answered is a deny")
    t.same(after.body.reasons, [{ policy_id: policy.body.policy_id, version: 2, name: 'Refunds allowed', effect: 'deny', mode: 'enforce' }], 'stamped with the new version')
    t.ok(after.body.ruleset_revision > before.body.ruleset_revision, 'at a newer ruleset revision')
    t.comment(`policy change → B: honoured by the first decision after A's answer (0 stale decisions), ${delay.toFixed(1)} ms round trip of that decision`)
  })

  t.test("an agent suspended through A is denied by B's very next decision", async (t) => {
    await call(a, 'PATCH', `/policies/${policy.body.policy_id}?organization_id=${world.organizationId}`, { effect: 'allow' })
    t.equal((await ask(b)).body.decision, 'allow', 'B allows again')
    const suspended = await call(a, 'PATCH', `/agents/${agent.body.agent_id}`, { status: 'suspended' })
    const at = performance.now()
    t.equal(suspended.status, 200, 'PATCH through A')
    t.equal(suspended.body.status, 'suspended')
    const after = await ask(b)
    const delay = performance.now() - at
    t.equal(after.status, 200)
    t.equal(after.body.decision, 'deny', "B's first decision after A answered is a deny")
    t.same(after.body.reasons, [{ rule: 'agent_suspended' }])
    t.comment(`suspension → B: honoured by the first decision after A's answer (0 stale decisions), ${delay.toFixed(1)} ms round trip of that decision`)
  })
}
