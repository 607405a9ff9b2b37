// GET /organization (every role) and PATCH /organization (Owners only): decision settings,
// validation, the ruleset revision, tenant isolation.
import t from 'tap'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!

async function read(token: string): Promise<any> {
  const res = await app.call('GET', '/organization', { token })
  t.equal(res.status, 200)
  return jsonOf(res)
}

t.test('happy path', async (t) => {
  t.test('every role reads the settings, with their defaults', async (t) => {
    for (const role of ['OWNER', 'ADMIN', 'MANAGER', 'MEMBER', 'VIEWER']) {
      const res = await app.call('GET', '/organization', { token: vars[`${role}_KEY_A`] })
      t.equal(res.status, 200, role)
      t.equal(res.headers.get('cache-control'), 'no-store')
      t.same(await jsonOf(res), {
        organization_id: A,
        name: 'Fixture org A',
        default_decision: 'deny',
        unknown_agents: 'deny',
        decision_retention_days: 400,
        audit_retention_days: 400,
        // The seeded policy was one change.
        ruleset_revision: 1,
        created_at: '2026-11-22T12:00:00.000Z',
        updated_at: '2026-11-22T12:00:00.000Z',
      })
    }
  })

  t.test('an Owner changes every setting; the revision moves by one per change', async (t) => {
    const before = await read(vars.VIEWER_KEY_A!)
    app.clock.advance(5000)
    const res = await app.call('PATCH', '/organization', {
      token: vars.OWNER_KEY_A,
      json: { name: '  Acme  ', default_decision: 'require_approval', unknown_agents: 'evaluate', decision_retention_days: 30, audit_retention_days: 90 },
    })
    t.equal(res.status, 200)
    const body = await jsonOf(res)
    t.same(body, {
      ...before,
      name: 'Acme',
      default_decision: 'require_approval',
      unknown_agents: 'evaluate',
      decision_retention_days: 30,
      audit_retention_days: 90,
      ruleset_revision: before.ruleset_revision + 1,
      updated_at: '2026-11-22T12:00:05.000Z',
    })
    t.same(await read(vars.VIEWER_KEY_A!), body)
    const again = await jsonOf(await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, json: { default_decision: 'allow', decision_retention_days: 3650 } }))
    t.equal(again.ruleset_revision, before.ruleset_revision + 2)
    t.equal(again.default_decision, 'allow')
    t.equal(again.decision_retention_days, 3650)
    const back = await jsonOf(await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, json: { default_decision: 'deny', decision_retention_days: 1 } }))
    t.equal(back.decision_retention_days, 1)
  })

  t.test('merge-patch+json is accepted', async (t) => {
    const res = await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, body: '{"unknown_agents":"deny"}', headers: { 'content-type': 'application/merge-patch+json' } })
    t.equal(res.status, 200)
    t.equal((await jsonOf(res)).unknown_agents, 'deny')
  })
})

t.test('errors', async (t) => {
  t.test('only Owners change settings: every other role gets 403 and nothing changes', async (t) => {
    const before = await read(vars.VIEWER_KEY_A!)
    const expected: Record<string, string> = {
      ADMIN: 'Only Owners change organization settings',
      MANAGER: "This credential's role (manager) lacks the members:manage permission",
      MEMBER: "This credential's role (member) lacks the members:manage permission",
      VIEWER: "This credential's role (viewer) lacks the members:manage permission",
    }
    for (const [role, message] of Object.entries(expected)) {
      const res = await app.call('PATCH', '/organization', { token: vars[`${role}_KEY_A`], json: { default_decision: 'allow' } })
      t.equal(res.status, 403, role)
      t.same(await jsonOf(res), { status: 'Forbidden', error: message })
    }
    t.same(await read(vars.VIEWER_KEY_A!), before)
  })

  const invalid: Array<[string, unknown, string]> = [
    ['an empty body', {}, 'Request body names no field to change'],
    ['an unknown field', { default_decision: 'deny', color: 'red' }, 'Unknown field: color'],
    ['a read-only field', { ruleset_revision: 9 }, 'Field ruleset_revision is read-only'],
    ['another organization_id', { organization_id: vars.ORG_B }, 'Field organization_id is read-only'],
    ['a bad default_decision', { default_decision: 'maybe' }, 'Field default_decision must be deny, require_approval or allow'],
    ['a bad unknown_agents', { unknown_agents: 'allow' }, 'Field unknown_agents must be deny or evaluate'],
    ['retention 0', { decision_retention_days: 0 }, 'Field decision_retention_days must be a whole number from 1 to 3650'],
    ['retention 3651', { decision_retention_days: 3651 }, 'Field decision_retention_days must be a whole number from 1 to 3650'],
    ['retention 1.5', { decision_retention_days: 1.5 }, 'Field decision_retention_days must be a whole number from 1 to 3650'],
    ['retention as text', { decision_retention_days: '30' }, 'Field decision_retention_days must be a whole number from 1 to 3650'],
    ['audit retention 0', { audit_retention_days: 0 }, 'Field audit_retention_days must be a whole number from 1 to 3650'],
    ['audit retention 3651', { audit_retention_days: 3651 }, 'Field audit_retention_days must be a whole number from 1 to 3650'],
    ['audit retention 2.5', { audit_retention_days: 2.5 }, 'Field audit_retention_days must be a whole number from 1 to 3650'],
    ['a blank name', { name: '   ' }, 'Field name must not be empty'],
    ['a name with a control character', { name: 'a\u0007b' }, 'Field name holds a control character'],
    ['a name of 201 characters', { name: 'x'.repeat(201) }, 'Field name is longer than 200 characters'],
    ['a null setting', { default_decision: null }, 'Field default_decision must be deny, require_approval or allow'],
  ]
  for (const [name, body, message] of invalid) {
    t.test(`PATCH /organization with ${name}: 400 "${message}"`, async (t) => {
      const res = await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, json: body })
      t.equal(res.status, 400)
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    })
  }

  t.test('malformed bodies are 4xx JSON, never 500', async (t) => {
    const cases: Array<[string, string, number]> = [
      ['{', 'application/json', 400],
      ['[]', 'application/json', 400],
      ['{"name":"\\u0000"}', 'application/json', 400],
      ['name=x', 'application/x-www-form-urlencoded', 415],
      ['{"name":"' + 'x'.repeat(20_000) + '"}', 'application/json', 413],
    ]
    for (const [body, type, status] of cases) {
      const res = await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, body, headers: { 'content-type': type } })
      t.equal(res.status, status, body.slice(0, 20))
      t.same(Object.keys(await jsonOf(res)), ['status', 'error'])
    }
  })

  t.test('no credential: 401; other methods: 405', async (t) => {
    t.equal((await app.call('GET', '/organization')).status, 401)
    const res = await app.call('POST', '/organization', { token: vars.OWNER_KEY_A, json: {} })
    t.equal(res.status, 405)
    t.equal(res.headers.get('allow'), 'GET, HEAD, PATCH, OPTIONS')
  })
})

t.test('security: tenant isolation', async (t) => {
  t.test("each credential sees and changes only its own organization", async (t) => {
    const before = await read(vars.VIEWER_KEY_B!)
    t.equal(before.organization_id, vars.ORG_B)
    t.equal(before.name, 'Fixture org B')
    await app.call('PATCH', '/organization', { token: vars.OWNER_KEY_A, json: { default_decision: 'allow' } })
    t.same(await read(vars.VIEWER_KEY_B!), before, "org A's change left org B untouched")
    // An organization_id in the query changes nothing: the organization is the credential's.
    const res = await app.call('GET', `/organization?organization_id=${vars.ORG_B}`, { token: vars.VIEWER_KEY_A })
    t.equal((await jsonOf(res)).organization_id, A)
  })
})
