// POST /policies/plan and /policies/apply: the exact diff (create, field-by-field change, archive,
// unchanged) and its replay; apply as one revision, atomic on a failure halfway (the cap), refused
// when the set changed since the plan or when another apply from the same plan won; a no-op apply
// writes nothing; another organization never shows.
import t from 'tap'
import { seedWorld } from '../../fixtures/seed.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

const app = await productApp(t)

const STALE = { status: 'Conflict', error: 'The policies changed since the plan: plan again' }

async function world(target: ProductApp = app): Promise<Record<string, string>> {
  return seedWorld(target.db, target.clock.now)
}

async function revisionOf(target: ProductApp, token: string): Promise<number> {
  return (await jsonOf(await target.call('GET', '/organization', { token }))).ruleset_revision
}

async function create(target: ProductApp, vars: Record<string, string>, body: Record<string, unknown>): Promise<any> {
  const res = await target.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: vars.MANAGER_KEY_A, json: body })
  if (res.status !== 201) throw new Error(`POST /policies answered ${res.status}: ${await res.text()}`)
  return jsonOf(res)
}

/** The organization's policies in force and archived, and its counts of versions and audit events. */
async function stateOf(target: ProductApp, vars: Record<string, string>) {
  const org = vars.ORG_A!
  const inForce = (await jsonOf(await target.call('GET', `/policies?organization_id=${org}`, { token: vars.VIEWER_KEY_A }))).policies
  const archived = (await jsonOf(await target.call('GET', `/policies?organization_id=${org}&archived=true`, { token: vars.VIEWER_KEY_A }))).policies
  const versions = await target.db.selectFrom('policy_versions').select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', org).executeTakeFirstOrThrow()
  const events = await target.db.selectFrom('audit_events').select('type').where('organization_id', '=', org).where('type', 'like', 'policy.%').orderBy('event_id').execute()
  return { inForce, archived, versions: Number(versions.n), events: events.map((e) => e.type), revision: await revisionOf(target, vars.VIEWER_KEY_A!) }
}

const seeded = (suffix: string) => ({
  name: `Payments need approval (${suffix})`,
  description: 'Seeded by fixtures/seed.ts',
  effect: 'require_approval',
  actions: ['payments.*'],
})

t.test('plan shows exactly the diff, and apply writes it as one revision', async (t) => {
  const vars = await world()
  const email = await create(app, vars, { name: 'Internal email', effect: 'allow', actions: ['email.send'], condition: 'args.external == false' })
  const old = await create(app, vars, { name: 'Old rule', effect: 'deny', actions: ['files.delete'] })
  await app.db
    .insertInto('decisions')
    .values({
      decision_id: crypto.randomUUID(),
      organization_id: vars.ORG_A!,
      agent_id: crypto.randomUUID(),
      agent_handle: 'report-bot',
      action: 'reports.read',
      resource: 'q3',
      args: JSON.stringify({}),
      context: JSON.stringify({}),
      args_sha256: '0'.repeat(64),
      decision: 'deny',
      policy_decision: 'deny',
      reasons: JSON.stringify([{ rule: 'default_decision' }]),
      monitor: JSON.stringify({}),
      errors: JSON.stringify([]),
      approval_id: null,
      ruleset_revision: 1,
      requested_by: 'key:test',
      evaluated_at: new Date('2026-11-01T10:00:00Z'),
    })
    .execute()
  const file = {
    policies: [
      seeded('A'),
      { name: 'Internal email', effect: 'allow', actions: ['email.send'], condition: 'args.external == false', mode: 'monitor', description: 'Only inside' },
      { name: 'Unused', effect: 'deny', actions: ['never.*'] },
      { name: 'Reports allowed', effect: 'allow', actions: ['reports.*'] },
    ],
  }
  const before = await stateOf(app, vars)
  const res = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: file })
  t.equal(res.status, 200)
  const plan = await jsonOf(res)
  t.match(plan.base, /^ps1-[0-9a-f]{32}$/)
  t.same(plan, {
    base: plan.base,
    create: [
      {
        name: 'Unused',
        policy: { name: 'Unused', description: '', effect: 'deny', agents: ['*'], actions: ['never.*'], resources: ['*'], condition: null, approval: null, mode: 'enforce', enabled: true, limits: [] },
      },
      {
        name: 'Reports allowed',
        policy: { name: 'Reports allowed', description: '', effect: 'allow', agents: ['*'], actions: ['reports.*'], resources: ['*'], condition: null, approval: null, mode: 'enforce', enabled: true, limits: [] },
      },
    ],
    change: [{ policy_id: email.policy_id, name: 'Internal email', version: 1, fields: { description: { from: '', to: 'Only inside' }, mode: { from: 'enforce', to: 'monitor' } } }],
    archive: [{ policy_id: old.policy_id, name: 'Old rule', version: 1 }],
    unchanged: 1,
    replay: {
      evaluated: 1,
      changed: { 'deny→allow': 1 },
      sample: [plan.replay.sample[0]],
    },
  })
  t.same(plan.replay.sample[0].reasons, [{ policy_id: 'draft:3', version: 1, name: 'Reports allowed', effect: 'allow', mode: 'enforce' }])
  t.same(await stateOf(app, vars), before, 'a plan writes nothing')

  const applied = await app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies: file.policies, base: plan.base } })
  t.equal(applied.status, 200)
  const answer = await jsonOf(applied)
  const after = await stateOf(app, vars)
  const idOf = (name: string) => after.inForce.find((p: any) => p.name === name).policy_id
  t.same(answer, {
    applied: true,
    base: answer.base,
    create: [
      { policy_id: idOf('Unused'), name: 'Unused', version: 1 },
      { policy_id: idOf('Reports allowed'), name: 'Reports allowed', version: 1 },
    ],
    change: [{ policy_id: email.policy_id, name: 'Internal email', version: 2 }],
    archive: [{ policy_id: old.policy_id, name: 'Old rule', version: 2 }],
  })
  t.not(answer.base, plan.base)
  t.equal(after.revision, before.revision + 1, 'one ruleset revision for the whole set')
  t.equal(after.versions, before.versions + 4, 'each written policy gets its version')
  t.same(after.events.slice(before.events.length), ['policy.archived', 'policy.updated', 'policy.created', 'policy.created'])
  t.same(after.inForce.map((p: any) => [p.name, p.version, p.mode]).sort(), [
    ['Internal email', 2, 'monitor'],
    ['Payments need approval (A)', 1, 'enforce'],
    ['Reports allowed', 1, 'enforce'],
    ['Unused', 1, 'enforce'],
  ])
  t.same(after.archived.map((p: any) => [p.name, p.version]), [['Old rule', 2]])

  // The same file again: nothing to change, nothing written, the base stays.
  const again = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: file }))
  t.same(again, { base: answer.base, create: [], change: [], archive: [], unchanged: 4, replay: { evaluated: 0, changed: {}, sample: [] } })
  const noop = await app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies: file.policies, base: again.base } })
  t.equal(noop.status, 200)
  t.same(await jsonOf(noop), { applied: false, base: answer.base, create: [], change: [], archive: [] })
  t.same(await stateOf(app, vars), after, 'no new revision, version or event')
})

t.test('apply is atomic: a failure halfway leaves the old set and no revision bump', async (t) => {
  const capped = await productApp(t, { env: { MAX_POLICIES_PER_ORG: '3' } })
  const vars = capped.vars
  const before = await stateOf(capped, vars)
  const policies = [
    { ...seeded('A'), effect: 'deny' },
    ...['one', 'two', 'three'].map((name) => ({ name, effect: 'allow', actions: [`${name}.*`] })),
  ]
  const plan = await jsonOf(await capped.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies } }))
  t.same([plan.create.length, plan.change.length], [3, 1])
  const res = await capped.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies, base: plan.base } })
  t.equal(res.status, 409)
  t.same(await jsonOf(res), { status: 'Conflict', error: 'This organization has reached its limit of 3 policies (MAX_POLICIES_PER_ORG)' })
  t.same(await stateOf(capped, vars), before, 'the change written before the cap was reached is rolled back')

  // Within the cap (the archive frees a place), the same organization applies.
  const fits = [{ ...seeded('A'), effect: 'deny' }, policies[1], policies[2]]
  const fitsPlan = await jsonOf(await capped.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies: fits } }))
  const ok = await capped.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies: fits, base: fitsPlan.base } })
  t.equal(ok.status, 200)

  const broken = [policies[0], { name: 'broken', effect: 'deny', actions: ['x.*'], condition: 'args.amount >' }]
  const refused = await capped.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies: broken, base: (await jsonOf(ok)).base } })
  t.equal(refused.status, 400)
  t.match((await jsonOf(refused)).error, /^Field condition does not compile \(line 1, column \d+\).*\(at policies\.1\.condition\)$/)
})

t.test('the set changed between plan and apply: 409, nothing written', async (t) => {
  const vars = await world()
  const file = { policies: [{ ...seeded('A'), mode: 'monitor' }] }
  const plan = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: file }))
  const patched = await app.call('PATCH', `/policies/${vars.POLICY_A}`, { token: vars.MANAGER_KEY_A, json: { description: 'edited by hand' } })
  t.equal(patched.status, 200)
  const before = await stateOf(app, vars)
  const res = await app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { ...file, base: plan.base } })
  t.equal(res.status, 409)
  t.same(await jsonOf(res), STALE)
  t.same(await stateOf(app, vars), before)

  // A policy created by hand changes the base too; a made-up base is refused the same way.
  const replan = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: file }))
  await create(app, vars, { name: 'By hand', effect: 'deny', actions: ['x.*'] })
  for (const base of [replan.base, 'ps1-00000000000000000000000000000000']) {
    const stale = await app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { ...file, base } })
    t.same([stale.status, await jsonOf(stale)], [409, STALE], base)
  }
})

t.test('two applies from one plan: one writes, the other is refused', async (t) => {
  const vars = await world()
  const sets = [
    [{ ...seeded('A'), mode: 'monitor' }, { name: 'First', effect: 'deny', actions: ['a.*'] }],
    [{ name: 'Second', effect: 'deny', actions: ['b.*'] }],
  ]
  const plan = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies: sets[0] } }))
  const before = await stateOf(app, vars)
  const answers = await Promise.all(sets.map((policies) => app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies, base: plan.base } })))
  const statuses = answers.map((res) => res.status)
  t.same([...statuses].sort(), [200, 409])
  const loser = answers[statuses.indexOf(409)]!
  t.same(await jsonOf(loser), STALE)
  const after = await stateOf(app, vars)
  t.equal(after.revision, before.revision + 1)
  const winner = statuses.indexOf(200)
  t.same(after.inForce.map((p: any) => p.name).sort(), winner === 0 ? ['First', 'Payments need approval (A)'] : ['Second'])
})

t.test('names: unique in the file, and two policies in force sharing one are named', async (t) => {
  const vars = await world()
  const twice = { policies: [{ name: 'Same', effect: 'deny', actions: ['a.*'] }, { name: 'Same', effect: 'allow', actions: ['b.*'] }] }
  const dup = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: twice })
  t.same([dup.status, await jsonOf(dup)], [400, { status: 'Bad Request', error: 'Policy 1: name "Same" is already used by policy 0; names must be unique in a policy set' }])
  const copy = await create(app, vars, { ...seeded('A'), effect: 'deny' })
  const shared = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies: [] } })
  t.equal(shared.status, 409)
  t.same(await jsonOf(shared), {
    status: 'Conflict',
    error: `Policies in force share the name "Payments need approval (A)" (${[vars.POLICY_A!, copy.policy_id].sort().join(', ')}): rename or archive all but one, then plan again`,
  })
})

t.test('another organization never shows, and roles are checked', async (t) => {
  const vars = await world()
  await create(app, vars, { name: 'Secret of A', effect: 'deny', actions: ['a.*'] })
  const planB = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.ADMIN_KEY_B, json: { policies: [] } }))
  t.same(planB.archive.map((p: any) => p.name), ['Payments need approval (B)'], "only B's own policies")
  const planA = await jsonOf(await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies: [] } }))
  // A's base does not apply to B: the sets differ.
  const cross = await app.call('POST', '/policies/apply', { token: vars.ADMIN_KEY_B, json: { policies: [], base: planA.base } })
  t.same([cross.status, await jsonOf(cross)], [409, STALE])
  const named = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies: [{ organization_id: vars.ORG_B, name: 'x', effect: 'deny', actions: ['a.*'] }] } })
  t.same([named.status, await jsonOf(named)], [404, { status: 'Not Found', error: 'Organization not found' }])
  const viewer = await app.call('POST', '/policies/apply', { token: vars.VIEWER_KEY_A, json: { policies: [], base: planA.base } })
  t.same([viewer.status, await jsonOf(viewer)], [403, { status: 'Forbidden', error: "This credential's role (viewer) lacks the policies:write permission" }])
})

t.test('bodies: a set larger than BODY_LIMIT_BYTES is read up to 1 MiB; malformed ones are 400', async (t) => {
  const vars = await world()
  const policies = Array.from({ length: 60 }, (_, i) => ({ name: `Rule ${i}`, description: 'd'.repeat(1500), effect: 'deny', actions: [`r${i}.*`] }))
  const big = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: { policies } })
  t.equal(big.status, 200, 'about 100 KiB, over the 16 KiB default')
  t.equal((await jsonOf(big)).create.length, 60)
  const huge = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, body: JSON.stringify({ policies, pad: 'x'.repeat(1024 * 1024) }), headers: { 'content-type': 'application/json' } })
  t.equal(huge.status, 413)
  const cases: [unknown, string][] = [
    [{}, 'Field policies is required'],
    [{ policies: {} }, 'Field policies must be an array of policies'],
    [{ policies: [], base: 'x' }, 'Unknown field: base'],
    [{ policies: [], replay: { limit: 0 } }, 'Field replay.limit must be a whole number from 1 to 100000'],
  ]
  for (const [body, error] of cases) {
    const res = await app.call('POST', '/policies/plan', { token: vars.MANAGER_KEY_A, json: body })
    t.same([res.status, (await jsonOf(res)).error], [400, error], JSON.stringify(body))
  }
  const noBase = await app.call('POST', '/policies/apply', { token: vars.MANAGER_KEY_A, json: { policies: [] } })
  t.same([noBase.status, (await jsonOf(noBase)).error], [400, 'Field base is required'])
})
