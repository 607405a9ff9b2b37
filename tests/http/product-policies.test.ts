// Policies: GET/POST /policies and GET/PATCH/DELETE /policies/{policy_id}; tenant isolation.
import fc from 'fast-check'
import t from 'tap'
import { jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const A = vars.ORG_A!
const B = vars.ORG_B!

const minimal = { name: 'Block outbound email', effect: 'deny', actions: ['email.send'] }

async function revisionOf(token: string): Promise<number> {
  return (await jsonOf(await app.call('GET', '/organization', { token }))).ruleset_revision
}

t.test('happy path', async (t) => {
  t.test('POST /policies creates a policy with defaults, 201 and Location', async (t) => {
    const revision = await revisionOf(vars.VIEWER_KEY_A!)
    const res = await app.call('POST', `/policies?organization_id=${A}`, { token: vars.MANAGER_KEY_A, json: minimal })
    t.equal(res.status, 201)
    const body = await jsonOf(res)
    t.equal(res.headers.get('location'), `https://api.example.com/policies/${body.policy_id}`)
    t.equal(res.headers.get('cache-control'), 'no-store')
    t.same(body, {
      policy_id: body.policy_id,
      organization_id: A,
      name: 'Block outbound email',
      description: '',
      effect: 'deny',
      agents: ['*'],
      actions: ['email.send'],
      resources: ['*'],
      condition: null,
      approval: null,
      mode: 'enforce',
      enabled: true,
      limits: [],
      archived: false,
      archived_at: null,
      version: 1,
      created_at: '2026-11-22T12:00:00.000Z',
      updated_at: '2026-11-22T12:00:00.000Z',
      created_by: `key:${vars.MANAGER_KEY_ID_A}`,
      ruleset_revision: revision + 1,
    })
    t.equal(await revisionOf(vars.VIEWER_KEY_A!), revision + 1, 'the create bumped the ruleset revision')
    const read = await app.call('GET', `/policies/${body.policy_id}`, { token: vars.VIEWER_KEY_A })
    t.equal(read.status, 200)
    const { ruleset_revision: _revision, ...stored } = body
    t.same(await jsonOf(read), stored)
  })

  t.test('organization_id may travel in the body; every field can be set', async (t) => {
    const full = {
      organization_id: A,
      name: '  Payments over 1000 need approval ',
      description: 'Finance rule',
      effect: 'require_approval',
      agents: ['agent-7', 'agent-8'],
      actions: ['payments.*'],
      resources: ['account:*'],
      condition: 'args.amount > 1000 && args.currency in ["EUR", "USD"]',
      approval: { approvers_required: 2, approver_roles: ['manager', 'owner'], timeout_seconds: 3600, use_within_seconds: 60 },
      mode: 'monitor',
      enabled: false,
    }
    const res = await app.call('POST', '/policies', { token: vars.ADMIN_KEY_A, json: full })
    t.equal(res.status, 201)
    const body = await jsonOf(res)
    // Roles are kept in rank order, whatever order they came in.
    const approval = { ...full.approval, approver_roles: ['owner', 'manager'] }
    t.match(body, { ...full, approval, name: 'Payments over 1000 need approval', organization_id: A, version: 1 })
  })

  t.test('a user session records the user as creator', async (t) => {
    const login = await jsonOf(await app.call('POST', '/auth/login', { json: { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A } }))
    const body = await jsonOf(await app.call('POST', `/policies?organization_id=${A}`, { token: login.access_token, json: minimal }))
    t.match(body.created_by, /^user:[0-9a-f-]{36}$/)
  })

  t.test('PATCH changes fields and bumps the version; DELETE archives', async (t) => {
    const created = await jsonOf(await app.call('POST', `/policies?organization_id=${A}`, { token: vars.MANAGER_KEY_A, json: minimal }))
    app.clock.advance(1000)
    const res = await app.call('PATCH', `/policies/${created.policy_id}`, { token: vars.MANAGER_KEY_A, json: { enabled: false, mode: 'monitor' } })
    t.equal(res.status, 200)
    const patched = await jsonOf(res)
    t.same(patched, { ...created, enabled: false, mode: 'monitor', version: 2, updated_at: '2026-11-22T12:00:01.000Z', ruleset_revision: created.ruleset_revision + 1 })
    const del = await app.call('DELETE', `/policies/${created.policy_id}`, { token: vars.MANAGER_KEY_A })
    t.equal(del.status, 204)
    t.equal(await del.text(), '')
    // Archived, not gone: readable (its decisions point at it), out of the default list, never applied.
    const archived = await app.call('GET', `/policies/${created.policy_id}`, { token: vars.MANAGER_KEY_A })
    t.equal(archived.status, 200)
    const { ruleset_revision: _revision, ...rest } = patched
    t.same(await jsonOf(archived), { ...rest, archived: true, archived_at: '2026-11-22T12:00:01.000Z', version: 3 })
    const listed = await jsonOf(await app.call('GET', `/policies?organization_id=${A}&limit=100`, { token: vars.MANAGER_KEY_A }))
    t.notOk(listed.policies.some((p: { policy_id: string }) => p.policy_id === created.policy_id), 'not in the default list')
  })

  t.test('GET /policies paginates with next_cursor and a capped limit', async (t) => {
    const fresh = await productApp(t)
    const org = fresh.vars.ORG_A!
    for (let i = 0; i < 4; i++) {
      fresh.clock.advance(1)
      await fresh.call('POST', `/policies?organization_id=${org}`, { token: fresh.vars.ADMIN_KEY_A, json: { ...minimal, name: `p${i}` } })
    }
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const query: string = `/policies?organization_id=${org}&limit=2${cursor ? `&cursor=${cursor}` : ''}`
      const body = await jsonOf(await fresh.call('GET', query, { token: fresh.vars.VIEWER_KEY_A }))
      t.same(Object.keys(body), ['policies', 'next_cursor'])
      t.ok(body.policies.length <= 2)
      seen.push(...body.policies.map((p: { name: string }) => p.name))
      cursor = body.next_cursor
      pages++
    } while (cursor && pages < 10)
    t.same(seen, ['Payments need approval (A)', 'p0', 'p1', 'p2', 'p3'])
    t.equal(pages, 3)
    for (const limit of ['0', '101', 'ten', '-1']) {
      const res = await fresh.call('GET', `/policies?organization_id=${org}&limit=${limit}`, { token: fresh.vars.VIEWER_KEY_A })
      t.equal(res.status, 400, limit)
      t.same(await jsonOf(res), { status: 'Bad Request', error: 'limit must be a whole number from 1 to 100' })
    }
    const bad = await fresh.call('GET', `/policies?organization_id=${org}&cursor=nonsense`, { token: fresh.vars.VIEWER_KEY_A })
    t.same(await jsonOf(bad), { status: 'Bad Request', error: 'cursor is invalid; pass next_cursor from the previous page' })
  })
})

t.test('errors', async (t) => {
  t.test('GET /policies without organization_id: 400', async (t) => {
    for (const query of ['', '?organization_id=', '?organization_id=%20']) {
      const res = await app.call('GET', `/policies${query}`, { token: vars.VIEWER_KEY_A })
      t.equal(res.status, 400)
      t.same(await jsonOf(res), { status: 'Bad Request', error: 'organization_id is required' })
    }
  })

  t.test('POST /policies without organization_id, or with two that differ: 400', async (t) => {
    const none = await app.call('POST', '/policies', { token: vars.MANAGER_KEY_A, json: minimal })
    t.same(await jsonOf(none), { status: 'Bad Request', error: 'organization_id is required' })
    const differ = await app.call('POST', `/policies?organization_id=${A}`, { token: vars.MANAGER_KEY_A, json: { ...minimal, organization_id: B } })
    t.equal(differ.status, 400)
    t.same(await jsonOf(differ), { status: 'Bad Request', error: 'organization_id in the query and in the body differ' })
  })

  const invalid: Array<[string, unknown, string]> = [
    ['no name', { effect: 'deny', actions: ['a'] }, 'Field name is required'],
    ['blank name', { ...minimal, name: '   ' }, 'Field name is required'],
    ['bad effect', { ...minimal, effect: 'maybe' }, 'Field effect must be allow, deny or require_approval'],
    ['actions not an array', { ...minimal, actions: 'email.send' }, 'Field actions must be an array of strings'],
    ['empty actions', { ...minimal, actions: [] }, 'Field actions must hold at least one entry'],
    ['non-string agent', { ...minimal, agents: [1] }, 'Field agents must hold strings (at agents.0)'],
    ['the retired conditions object', { ...minimal, conditions: { a: 1 } }, 'Field conditions was replaced by condition: a CEL expression (string) or null'],
    ['condition an array', { ...minimal, condition: [1] }, 'Field condition must be a string (a CEL expression) or null'],
    ['condition an object', { ...minimal, condition: { a: { b: 1 } } }, 'Field condition must be a string (a CEL expression) or null'],
    ['condition too big', { ...minimal, condition: `args.blob == "${'x'.repeat(5000)}"` }, 'Field condition is longer than 4096 bytes'],
    ['condition that does not compile', { ...minimal, condition: 'args.amount >' }, 'Field condition does not compile (line 1, column 14): Unexpected token: EOF'],
    ['mode unknown', { ...minimal, mode: 'yolo' }, 'Field mode must be enforce or monitor'],
    ['enabled a string', { ...minimal, enabled: 'yes' }, 'Field enabled must be a boolean'],
    ['setting policy_id', { ...minimal, policy_id: '00000000-0000-4000-8000-000000000000' }, 'Field policy_id is read-only'],
    ['setting version', { ...minimal, version: 9 }, 'Field version is read-only'],
    ['setting created_by', { ...minimal, created_by: 'someone' }, 'Field created_by is read-only'],
    ['an unknown field', { ...minimal, priority: 1 }, 'Unknown field: priority'],
    ['a control character', { ...minimal, name: 'a\u0007b' }, 'Field name holds a control character'],
  ]
  for (const [name, body, message] of invalid) {
    t.test(`POST /policies with ${name}: 400 "${message}"`, async (t) => {
      const res = await app.call('POST', `/policies?organization_id=${A}`, { token: vars.MANAGER_KEY_A, json: body })
      t.equal(res.status, 400)
      t.same(await jsonOf(res), { status: 'Bad Request', error: message })
    })
  }

  t.test('malformed bodies are 4xx, never 500', async (t) => {
    const cases: Array<[string, string, number]> = [
      ['{', 'application/json', 400],
      ['"text"', 'application/json', 400],
      ['{"name":"\\u0000"}', 'application/json', 400],
      ['{"__proto__":{"x":1}}', 'application/json', 400],
      ['name=x', 'application/x-www-form-urlencoded', 415],
      ['{"a":"' + 'x'.repeat(20_000) + '"}', 'application/json', 413],
    ]
    for (const [body, type, status] of cases) {
      const res = await app.call('POST', `/policies?organization_id=${A}`, { token: vars.MANAGER_KEY_A, body, headers: { 'content-type': type } })
      t.equal(res.status, status, body.slice(0, 20))
      t.same(Object.keys(await jsonOf(res)), ['status', 'error'])
    }
  })

  t.test('PATCH with nothing to change, or a read-only field: 400', async (t) => {
    const empty = await app.call('PATCH', `/policies/${vars.POLICY_A}`, { token: vars.MANAGER_KEY_A, json: {} })
    t.same(await jsonOf(empty), { status: 'Bad Request', error: 'Request body names no field to change' })
    const moved = await app.call('PATCH', `/policies/${vars.POLICY_A}`, { token: vars.MANAGER_KEY_A, json: { organization_id: B } })
    t.same(await jsonOf(moved), { status: 'Bad Request', error: 'Field organization_id is read-only' })
  })

  t.test('unsupported method: 405 with Allow', async (t) => {
    const res = await app.call('PUT', '/policies', { token: vars.MANAGER_KEY_A })
    t.equal(res.status, 405)
    t.equal(res.headers.get('allow'), 'GET, HEAD, POST, OPTIONS')
    t.match(await jsonOf(res), { status: 'Method Not Allowed' })
  })
})

t.test('security: tenant isolation', async (t) => {
  t.test("another organization's id answers 404 on list and create, like an unknown one", async (t) => {
    const other = await app.call('GET', `/policies?organization_id=${B}`, { token: vars.OWNER_KEY_A })
    const unknown = await app.call('GET', '/policies?organization_id=00000000-0000-4000-8000-000000000000', { token: vars.OWNER_KEY_A })
    t.equal(other.status, 404)
    t.equal(unknown.status, 404)
    const text = await other.text()
    t.equal(text, await unknown.text())
    t.same(JSON.parse(text), { status: 'Not Found', error: 'Organization not found' })
    const create = await app.call('POST', `/policies?organization_id=${B}`, { token: vars.OWNER_KEY_A, json: minimal })
    t.equal(create.status, 404)
    t.same(await jsonOf(create), { status: 'Not Found', error: 'Organization not found' })
  })

  t.test("another organization's policy answers byte-identically to a missing or malformed id", async (t) => {
    const responses = await Promise.all(
      [vars.POLICY_B, crypto.randomUUID(), 'not-a-uuid', '%00'].map((id) => app.call('GET', `/policies/${id}`, { token: vars.OWNER_KEY_A })),
    )
    const texts = await Promise.all(responses.map((r) => r.text()))
    for (const r of responses) t.equal(r.status, 404)
    t.equal(new Set(texts).size, 1)
    t.same(JSON.parse(texts[0]!), { status: 'Not Found', error: 'Policy not found' })
    const headerNames = responses.map((r) => [...r.headers.keys()].filter((h) => h !== 'x-request-id').join(','))
    t.equal(new Set(headerNames).size, 1, 'same header names')
  })

  t.test("org B's policy cannot be changed or deleted from org A, and stays unchanged", async (t) => {
    const before = await jsonOf(await app.call('GET', `/policies/${vars.POLICY_B}`, { token: vars.VIEWER_KEY_B }))
    t.equal((await app.call('PATCH', `/policies/${vars.POLICY_B}`, { token: vars.OWNER_KEY_A, json: { name: 'pwned' } })).status, 404)
    t.equal((await app.call('DELETE', `/policies/${vars.POLICY_B}`, { token: vars.OWNER_KEY_A })).status, 404)
    t.same(await jsonOf(await app.call('GET', `/policies/${vars.POLICY_B}`, { token: vars.VIEWER_KEY_B })), before)
  })

  t.test('property: credentials of one organization never see another organization\'s rows', async (t) => {
    const world = await productApp(t)
    const orgs = [
      { id: world.vars.ORG_A!, writer: world.vars.ADMIN_KEY_A!, reader: world.vars.VIEWER_KEY_A! },
      { id: world.vars.ORG_B!, writer: world.vars.ADMIN_KEY_B!, reader: world.vars.VIEWER_KEY_B! },
    ]
    const owned = new Map<string, string>([[world.vars.POLICY_A!, world.vars.ORG_A!], [world.vars.POLICY_B!, world.vars.ORG_B!]])
    const action = fc.record({
      org: fc.integer({ min: 0, max: 1 }),
      name: fc.string({ minLength: 1, maxLength: 20 }).filter((s) => s.trim() !== '' && !/[\u0000-\u001f\u007f]/.test(s)),
      effect: fc.constantFrom('allow', 'deny', 'require_approval'),
      actions: fc.array(fc.constantFrom('email.send', 'payments.*', 'files.read', '*'), { minLength: 1, maxLength: 3 }),
      limit: fc.integer({ min: 1, max: 5 }),
    })
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 6 }), async (steps) => {
        for (const step of steps) {
          const org = orgs[step.org]!
          const res = await world.call('POST', `/policies?organization_id=${org.id}`, { token: org.writer, json: { name: step.name, effect: step.effect, actions: step.actions } })
          if (res.status !== 201) throw new Error(`create answered ${res.status}`)
          owned.set((await jsonOf(res)).policy_id, org.id)
          for (const [index, reader] of orgs.entries()) {
            const other = orgs[1 - index]!
            // Every page of the reader's own listing holds only its rows.
            let cursor: string | null = null
            do {
              const list: any = await jsonOf(await world.call('GET', `/policies?organization_id=${reader.id}&limit=${step.limit}${cursor ? `&cursor=${cursor}` : ''}`, { token: reader.reader }))
              for (const p of list.policies) if (p.organization_id !== reader.id || owned.get(p.policy_id) !== reader.id) return false
              cursor = list.next_cursor
            } while (cursor)
            // The other organization's listing and rows are 404.
            const foreign = await world.call('GET', `/policies?organization_id=${other.id}`, { token: reader.reader })
            await foreign.body?.cancel()
            if (foreign.status !== 404) return false
          }
          for (const [id, ownerOrg] of owned) {
            for (const reader of orgs) {
              const res = await world.call('GET', `/policies/${id}`, { token: reader.reader })
              await res.body?.cancel()
              if (res.status !== (ownerOrg === reader.id ? 200 : 404)) return false
            }
          }
        }
        return true
      }),
      { numRuns: 8 },
    )
    t.pass('held for random data')
  })
})
