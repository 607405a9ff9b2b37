// Policy versions, archive and rollback; the CEL condition and the approval block on write;
// concurrent changes of one policy; tenant isolation of the new routes.
import t from 'tap'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const MANAGER = vars.MANAGER_KEY_A!
const DEFAULT_APPROVAL = { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 900, use_within_seconds: 300 }

async function create(body: Record<string, unknown>): Promise<any> {
  const res = await app.call('POST', `/policies?organization_id=${A}`, { token: MANAGER, json: body })
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`)
  return jsonOf(res)
}

async function revision(): Promise<number> {
  return (await jsonOf(await app.call('GET', '/organization', { token: vars.VIEWER_KEY_A }))).ruleset_revision
}

t.test('happy path', async (t) => {
  t.test('create, change and archive each record a version; versions list newest first and page', async (t) => {
    const created = await create({ name: 'Refunds', effect: 'deny', actions: ['payments.refund'], condition: 'args.amount > 100' })
    app.clock.advance(1000)
    const patched = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: vars.ADMIN_KEY_A, json: { condition: 'args.amount > 500' } }))
    app.clock.advance(1000)
    t.equal((await app.call('DELETE', `/policies/${created.policy_id}`, { token: MANAGER })).status, 204)
    const list = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions`, { token: vars.VIEWER_KEY_A }))
    t.same(list.versions.map((v: any) => [v.version, v.condition, v.archived, v.created_at, v.created_by]), [
      [3, 'args.amount > 500', true, '2026-11-22T12:00:02.000Z', `key:${vars.MANAGER_KEY_ID_A}`],
      [2, 'args.amount > 500', false, '2026-11-22T12:00:01.000Z', `key:${vars.ADMIN_KEY_ID_A}`],
      [1, 'args.amount > 100', false, '2026-11-22T12:00:00.000Z', `key:${vars.MANAGER_KEY_ID_A}`],
    ])
    t.equal(list.next_cursor, null)
    const one = await app.call('GET', `/policies/${created.policy_id}/versions/2`, { token: vars.MEMBER_KEY_A })
    t.equal(one.status, 200)
    t.same(await jsonOf(one), {
      policy_id: created.policy_id,
      organization_id: A,
      version: 2,
      name: 'Refunds',
      description: '',
      effect: 'deny',
      agents: ['*'],
      actions: ['payments.refund'],
      resources: ['*'],
      condition: 'args.amount > 500',
      approval: null,
      mode: 'enforce',
      enabled: true,
      limits: [],
      archived: false,
      created_at: '2026-11-22T12:00:01.000Z',
      created_by: `key:${vars.ADMIN_KEY_ID_A}`,
    })
    t.equal(patched.version, 2)
    const first = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions?limit=2`, { token: vars.VIEWER_KEY_A }))
    t.same(first.versions.map((v: any) => v.version), [3, 2])
    t.type(first.next_cursor, 'string')
    const second = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions?limit=2&cursor=${first.next_cursor}`, { token: vars.VIEWER_KEY_A }))
    t.same(second.versions.map((v: any) => v.version), [1])
    t.equal(second.next_cursor, null)
  })

  t.test('rollback writes a new version equal in content to the old one, and restores an archived policy', async (t) => {
    const created = await create({ name: 'Email', effect: 'require_approval', actions: ['email.send'], approval: { approvers_required: 2 } })
    await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { effect: 'deny', name: 'Email blocked' } })
    await app.call('DELETE', `/policies/${created.policy_id}`, { token: MANAGER })
    const before = await revision()
    app.clock.advance(1000)
    const res = await app.call('POST', `/policies/${created.policy_id}/rollback`, { token: MANAGER, json: { version: 1 } })
    t.equal(res.status, 200)
    const body = await jsonOf(res)
    t.same(body, {
      ...created,
      version: 4,
      updated_at: new Date(app.clock.now).toISOString(),
      ruleset_revision: before + 1,
    })
    t.equal(await revision(), before + 1)
    const v4 = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions/4`, { token: MANAGER }))
    const v1 = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions/1`, { token: MANAGER }))
    const content = (v: any) => ({ ...v, version: 0, created_at: '', created_by: '' })
    t.same(content(v4), content(v1))
    t.same(v1.approval, { ...DEFAULT_APPROVAL, approvers_required: 2 })
    // Back in the default list.
    const listed = await jsonOf(await app.call('GET', `/policies?organization_id=${A}&limit=100`, { token: MANAGER }))
    t.ok(listed.policies.some((p: any) => p.policy_id === created.policy_id))
    // Rolling back to the archived version archives it again.
    const archived = await jsonOf(await app.call('POST', `/policies/${created.policy_id}/rollback`, { token: MANAGER, json: { version: 3 } }))
    t.equal(archived.archived, true)
    t.equal(archived.version, 5)
    t.equal(archived.name, 'Email blocked')
  })

  t.test('archived policies: listed only with archived=true; PATCH is 409; DELETE again changes nothing', async (t) => {
    const created = await create({ name: 'Old', effect: 'allow', actions: ['files.read'] })
    await app.call('DELETE', `/policies/${created.policy_id}`, { token: MANAGER })
    const before = await revision()
    const again = await app.call('DELETE', `/policies/${created.policy_id}`, { token: MANAGER })
    t.equal(again.status, 204)
    t.equal(await revision(), before, 'a second DELETE bumps nothing')
    const patch = await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { name: 'New' } })
    t.equal(patch.status, 409)
    t.same(await jsonOf(patch), { status: 'Conflict', error: 'Policy is archived; roll it back to a version to bring it back' })
    const read = await jsonOf(await app.call('GET', `/policies/${created.policy_id}`, { token: MANAGER }))
    t.same([read.version, read.archived, read.name], [2, true, 'Old'])
    const archivedList = await jsonOf(await app.call('GET', `/policies?organization_id=${A}&archived=true&limit=100`, { token: MANAGER }))
    t.ok(archivedList.policies.some((p: any) => p.policy_id === created.policy_id))
    t.ok(archivedList.policies.every((p: any) => p.archived === true))
    const bad = await app.call('GET', `/policies?organization_id=${A}&archived=yes`, { token: MANAGER })
    t.same(await jsonOf(bad), { status: 'Bad Request', error: 'archived must be true or false' })
  })

  t.test('approval: defaults filled in; dropped when the effect changes; defaults when it becomes require_approval', async (t) => {
    const created = await create({ name: 'Wire', effect: 'require_approval', actions: ['payments.wire'] })
    t.same(created.approval, DEFAULT_APPROVAL)
    const changed = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { approval: { timeout_seconds: 30, approver_roles: ['admin', 'owner'] } } }))
    t.same(changed.approval, { ...DEFAULT_APPROVAL, timeout_seconds: 30, approver_roles: ['owner', 'admin'] }, 'replaced as a whole, roles in rank order')
    const denied = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { effect: 'deny' } }))
    t.equal(denied.approval, null)
    const back = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { effect: 'require_approval' } }))
    t.same(back.approval, DEFAULT_APPROVAL)
    const limits = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { approval: { approvers_required: 5, timeout_seconds: 604800, use_within_seconds: 86400 } } }))
    t.same(limits.approval, { approvers_required: 5, approver_roles: DEFAULT_APPROVAL.approver_roles, timeout_seconds: 604800, use_within_seconds: 86400 })
    const cleared = await jsonOf(await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { approval: null } }))
    t.same(cleared.approval, DEFAULT_APPROVAL, 'null on a require_approval policy means the defaults')
  })

  t.test('a require_approval policy stored without an approval block (before blocks existed) shows the defaults', async (t) => {
    const created = await create({ name: 'Legacy', effect: 'require_approval', actions: ['legacy.*'] })
    await app.db.updateTable('policies').set({ approval: null }).where('policy_id', '=', created.policy_id).execute()
    await app.db.updateTable('policy_versions').set({ approval: null }).where('policy_id', '=', created.policy_id).execute()
    t.same((await jsonOf(await app.call('GET', `/policies/${created.policy_id}`, { token: MANAGER }))).approval, DEFAULT_APPROVAL)
    t.same((await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions/1`, { token: MANAGER }))).approval, DEFAULT_APPROVAL)
  })

  t.test('a condition may span lines, and the CEL variables compile', async (t) => {
    const condition = 'agent.labels["team"] == "support" &&\n  args.amount <= 100.0 &&\n  context.on_behalf_of.endsWith("@acme.example") && now > timestamp("2026-01-01T00:00:00Z") && resource.startsWith("order/") && action == "payments.refund"'
    const created = await create({ name: 'Multi-line', effect: 'allow', actions: ['payments.refund'], condition })
    t.equal(created.condition, condition)
  })
})

t.test('errors', async (t) => {
  const minimal = { name: 'x', effect: 'deny', actions: ['a'] }
  const invalid: Array<[string, unknown, string]> = [
    ['a condition error on line 2', { ...minimal, condition: 'args.amount > 1 &&\n  args.currency ==' }, 'Field condition does not compile (line 2, column 19): Unexpected token: EOF'],
    ['an unknown variable', { ...minimal, condition: 'user.name == "x"' }, 'Field condition does not compile (line 1, column 1): Unknown variable: user'],
    ['a condition that is not a bool', { ...minimal, condition: '1 + 2' }, 'Field condition does not compile (line 1, column 1): Condition must return a bool, not int'],
    ['matches() in a condition', { ...minimal, condition: 'resource.matches("a+")' }, 'Field condition does not compile (line 1, column 1): matches() is not available in conditions: use startsWith, endsWith or contains'],
    ['an empty condition', { ...minimal, condition: '  ' }, 'Field condition must not be empty; send null for no condition'],
    ['a control character in a condition', { ...minimal, condition: 'true\u0007' }, 'Field condition holds a control character'],
    ['a condition of 4097 bytes', { ...minimal, condition: `"${'é'.repeat(2048)}" == ""` }, 'Field condition is longer than 4096 bytes'],
    ['a condition as a number', { ...minimal, condition: 1 }, 'Field condition must be a string (a CEL expression) or null'],
    ['approval on a deny policy', { ...minimal, approval: { approvers_required: 2 } }, 'Field approval is only for require_approval policies'],
    ['approval as a list', { ...minimal, effect: 'require_approval', approval: [] }, 'Field approval must be a JSON object or null'],
    ['approval as a list of numbers', { ...minimal, effect: 'require_approval', approval: [1] }, 'Field approval must be a JSON object or null'],
    ['approval as text', { ...minimal, effect: 'require_approval', approval: 'yes' }, 'Field approval must be a JSON object or null'],
    ['the retired conditions beside another problem', { ...minimal, effect: 'maybe', conditions: {} }, 'Field conditions was replaced by condition: a CEL expression (string) or null'],
    ['approvers_required 0', { ...minimal, effect: 'require_approval', approval: { approvers_required: 0 } }, 'Field approval.approvers_required must be a whole number from 1 to 5'],
    ['approvers_required 6', { ...minimal, effect: 'require_approval', approval: { approvers_required: 6 } }, 'Field approval.approvers_required must be a whole number from 1 to 5'],
    ['approvers_required 1.5', { ...minimal, effect: 'require_approval', approval: { approvers_required: 1.5 } }, 'Field approval.approvers_required must be a whole number from 1 to 5'],
    ['timeout_seconds 29', { ...minimal, effect: 'require_approval', approval: { timeout_seconds: 29 } }, 'Field approval.timeout_seconds must be a whole number from 30 to 604800'],
    ['timeout_seconds 604801', { ...minimal, effect: 'require_approval', approval: { timeout_seconds: 604801 } }, 'Field approval.timeout_seconds must be a whole number from 30 to 604800'],
    ['use_within_seconds 0', { ...minimal, effect: 'require_approval', approval: { use_within_seconds: 0 } }, 'Field approval.use_within_seconds must be a whole number from 1 to 86400'],
    ['use_within_seconds 86401', { ...minimal, effect: 'require_approval', approval: { use_within_seconds: 86401 } }, 'Field approval.use_within_seconds must be a whole number from 1 to 86400'],
    ['an unknown role', { ...minimal, effect: 'require_approval', approval: { approver_roles: ['root'] } }, 'Field approval.approver_roles must hold roles: owner, admin, manager, member, viewer (at approval.approver_roles.0)'],
    ['no roles', { ...minimal, effect: 'require_approval', approval: { approver_roles: [] } }, 'Field approval.approver_roles must name at least one role'],
    ['a role twice', { ...minimal, effect: 'require_approval', approval: { approver_roles: ['owner', 'owner'] } }, 'Field approval.approver_roles names a role twice'],
    ['an unknown approval field', { ...minimal, effect: 'require_approval', approval: { quorum: 2 } }, 'Unknown field: quorum (at approval.quorum)'],
    ['an empty pattern', { ...minimal, actions: [''] }, 'Field actions must not hold empty strings (at actions.0)'],
    ['a pattern of 201 characters', { ...minimal, resources: ['r'.repeat(201)] }, 'Field resources holds a string longer than 200 characters (at resources.0)'],
    ['a pattern with a control character', { ...minimal, agents: ['bot\u0001'] }, 'Field agents holds a control character (at agents.0)'],
  ]
  for (const [name, body, message] of invalid) {
    t.test(`POST /policies with ${name}: 400 "${message}"`, async (t) => {
      const res = await app.call('POST', `/policies?organization_id=${A}`, { token: MANAGER, json: body })
      t.equal(res.status, 400)
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    })
  }

  t.test('PATCH checks the same rules against the merged policy', async (t) => {
    const created = await create({ name: 'Deny', effect: 'deny', actions: ['a'] })
    const approval = await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { approval: { approvers_required: 2 } } })
    t.same(await jsonOf(approval), { status: 'Bad Request', error: 'Field approval is only for require_approval policies' })
    const cel = await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { condition: '(' } })
    t.equal(cel.status, 400)
    t.match((await jsonOf(cel)).error, /^Field condition does not compile \(line 1, column \d+\): /)
    const legacy = await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { conditions: {} } })
    t.same(await jsonOf(legacy), { status: 'Bad Request', error: 'Field conditions was replaced by condition: a CEL expression (string) or null' })
    const readOnly = await app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { archived: false } })
    t.same(await jsonOf(readOnly), { status: 'Bad Request', error: 'Field archived is read-only' })
    const after = await jsonOf(await app.call('GET', `/policies/${created.policy_id}`, { token: MANAGER }))
    t.equal(after.version, 1, 'refused changes wrote no version')
  })

  t.test('a NUL byte anywhere in the body is 400 JSON', async (t) => {
    const res = await app.call('POST', `/policies?organization_id=${A}`, { token: MANAGER, body: '{"name":"x","effect":"deny","actions":["a"],"condition":"true\\u0000"}', headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400)
    t.same(Object.keys(await jsonOf(res)), ['status', 'error'])
  })

  t.test('rollback: nonexistent or malformed version 404/400; bad bodies 400; Viewers 403', async (t) => {
    const created = await create({ name: 'R', effect: 'deny', actions: ['a'] })
    const missing = await app.call('POST', `/policies/${created.policy_id}/rollback`, { token: MANAGER, json: { version: 2 } })
    t.equal(missing.status, 404)
    t.same(await jsonOf(missing), { status: 'Not Found', error: 'Policy version not found' })
    const bodies: Array<[unknown, string]> = [
      [{}, 'Field version is required'],
      [{ version: 0 }, 'Field version must be a whole number from 1'],
      [{ version: '1' }, 'Field version must be a whole number from 1'],
      [{ version: 1.5 }, 'Field version must be a whole number from 1'],
      [{ version: 1e10 }, 'Field version must be a whole number from 1'],
      [{ version: 1, to: 2 }, 'Unknown field: to'],
    ]
    for (const [body, message] of bodies) {
      const res = await app.call('POST', `/policies/${created.policy_id}/rollback`, { token: MANAGER, json: body })
      t.equal(res.status, 400, JSON.stringify(body))
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    }
    const viewer = await app.call('POST', `/policies/${created.policy_id}/rollback`, { token: vars.VIEWER_KEY_A, json: { version: 1 } })
    t.equal(viewer.status, 403)
    for (const n of ['0', '-1', 'abc', '99999999999', '1.0']) {
      const res = await app.call('GET', `/policies/${created.policy_id}/versions/${n}`, { token: MANAGER })
      t.equal(res.status, 404, n)
      t.same(await jsonOf(res), { status: 'Not Found', error: 'Policy version not found' })
    }
    const cursor = await app.call('GET', `/policies/${created.policy_id}/versions?cursor=bogus`, { token: MANAGER })
    t.same(await jsonOf(cursor), { status: 'Bad Request', error: 'cursor is invalid; pass next_cursor from the previous page' })
  })
})

t.test('security', async (t) => {
  t.test('archived policies free their place under MAX_POLICIES_PER_ORG; restoring one by rollback takes it again', async (t) => {
    const capped = await productApp(t, { env: { MAX_POLICIES_PER_ORG: '2' } })
    const make = () => capped.call('POST', `/policies?organization_id=${capped.vars.ORG_A}`, { token: capped.vars.MANAGER_KEY_A, json: { name: 'c', effect: 'deny', actions: ['a'] } })
    const second = await jsonOf(await make())
    const full = await make()
    t.equal(full.status, 409)
    t.same(await jsonOf(full), { status: 'Conflict', error: 'This organization has reached its limit of 2 policies (MAX_POLICIES_PER_ORG)' })
    t.equal((await capped.call('DELETE', `/policies/${second.policy_id}`, { token: capped.vars.MANAGER_KEY_A })).status, 204)
    t.equal((await make()).status, 201, 'the archived policy no longer counts')
    const restore = await capped.call('POST', `/policies/${second.policy_id}/rollback`, { token: capped.vars.MANAGER_KEY_A, json: { version: 1 } })
    t.equal(restore.status, 409)
    t.same(await jsonOf(restore), { status: 'Conflict', error: 'This organization has reached its limit of 2 policies (MAX_POLICIES_PER_ORG)' })
    const still = await jsonOf(await capped.call('GET', `/policies/${second.policy_id}`, { token: capped.vars.MANAGER_KEY_A }))
    t.same([still.archived, still.version], [true, 2], 'the refused rollback wrote nothing')
  })

  t.test('N concurrent PATCHes of one policy get consecutive versions, without gaps or duplicates', async (t) => {
    const created = await create({ name: 'Race', effect: 'deny', actions: ['a'] })
    const N = 12
    const answers = await Promise.all(
      Array.from({ length: N }, (_, i) => app.call('PATCH', `/policies/${created.policy_id}`, { token: MANAGER, json: { description: `change ${i}` } })),
    )
    const bodies = await Promise.all(answers.map(jsonOf))
    t.same(answers.map((r) => r.status), Array(N).fill(200))
    t.same(bodies.map((b) => b.version).sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i + 2))
    const list = await jsonOf(await app.call('GET', `/policies/${created.policy_id}/versions?limit=100`, { token: MANAGER }))
    t.same(list.versions.map((v: any) => v.version), Array.from({ length: N + 1 }, (_, i) => N + 1 - i))
    // Each answer's content is exactly the version it names.
    for (const body of bodies) {
      const version = list.versions.find((v: any) => v.version === body.version)
      t.equal(version.description, body.description)
    }
    const final = await jsonOf(await app.call('GET', `/policies/${created.policy_id}`, { token: MANAGER }))
    t.equal(final.version, N + 1)
    t.equal(final.description, list.versions[0].description)
  })

  t.test("another organization's policy and versions answer byte-identically to a random id", async (t) => {
    const foreign = vars.POLICY_B!
    const random = crypto.randomUUID()
    const pairs: Array<[string, string, unknown?]> = [
      ['GET', '/versions'],
      ['GET', '/versions/1'],
      ['POST', '/rollback', { version: 1 }],
    ]
    for (const [method, suffix, json] of pairs) {
      const answers = await Promise.all([foreign, random, 'not-a-uuid'].map((id) => app.call(method, `/policies/${id}${suffix}`, { token: vars.OWNER_KEY_A, json })))
      const texts = await Promise.all(answers.map((r) => r.text()))
      t.same(answers.map((r) => r.status), [404, 404, 404], suffix)
      t.equal(new Set(texts).size, 1, suffix)
      t.same(JSON.parse(texts[0]!), { status: 'Not Found', error: 'Policy not found' })
    }
    const b = await jsonOf(await app.call('GET', `/policies/${foreign}`, { token: vars.VIEWER_KEY_B }))
    t.equal(b.version, 1, "org B's policy was not rolled back or changed")
  })
})
