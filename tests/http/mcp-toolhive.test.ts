// ToolHive's HTTP authorizer against POST /toolhive/decision, every request built exactly as
// ToolHive's Go code builds it (tests/support/mcp-toolhive-client.ts): allow, deny and the approval round
// trip, claim mappings, annotations, prompts and resources, keys, probes and bad input.
import t from 'tap'
import { argsSha256 } from '../../engine/index.ts'
import { NO_AGENT, UNSUPPORTED_OPERATION } from '../../services/toolhive.ts'
import { insertPolicy } from '../support/governance-support.ts'
import { buildPorc, goMarshal, toolhiveAllows, toolhiveRequest, type Claims, type ToolhiveConfig } from '../support/mcp-toolhive-client.ts'
import { inviteAndAccept, jsonOf, productApp } from '../support/product-support.ts'

const app = await productApp(t, { env: { BODY_LIMIT_BYTES: '65536' } })
const { vars } = app
const A = vars.ORG_A!
const at = () => new Date(app.clock.now)

const agent = await jsonOf(await app.call('POST', '/agents', { token: vars.MANAGER_KEY_A, json: { handle: 'github-agent' } }))
const AGENT_KEY: string = (await jsonOf(await app.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))).api_key
const AGENT_KEY_ID: string = (await app.db.selectFrom('api_keys').select('id').where('agent_id', '=', agent.agent_id).executeTakeFirstOrThrow()).id

const listIssues = await insertPolicy(app.db, A, { name: 'Read issues', effect: 'allow', actions: ['mcp.github.list_issues'] }, at())
const noDeletes = await insertPolicy(app.db, A, { name: 'No repository deletes', effect: 'deny', actions: ['mcp.github.delete_repo'] }, at())
const newIssues = await insertPolicy(app.db, A, { name: 'New issues need a person', effect: 'require_approval', actions: ['mcp.github.create_issue'] }, at())
await insertPolicy(app.db, A, { name: 'Prompts', effect: 'allow', actions: ['mcp-prompt.github.*'] }, at())
await insertPolicy(app.db, A, { name: 'Docs only', effect: 'allow', actions: ['mcp-resource.github'], resources: ['file:///docs/*'] }, at())

/** The configuration a ToolHive user writes, the agent key as the password of the PDP URL. */
const CONFIG: ToolhiveConfig = {
  url: `http://toolhive:${AGENT_KEY}@localhost/toolhive`,
  claimMapping: 'standard',
  context: { includeArgs: true, includeOperation: true },
}
const ALICE: Claims = { sub: 'alice@example.com', iss: 'https://idp.example.com', aud: 'toolhive', exp: 1_900_000_000, roles: ['developer'], groups: ['eng'], email: 'alice@example.com' }

/** Posts what ToolHive posts for a tool call on its server "github". */
async function ask(tool: string, args: Record<string, unknown> | null, config: ToolhiveConfig = CONFIG, claims: Claims | null = ALICE, probe = false): Promise<{ status: number; body: any; allows: boolean }> {
  const request = toolhiveRequest(config, buildPorc(config, 'github', 'tool', 'call', tool, claims, args), probe)
  const response = await app.app.fetch(request, { remoteAddress: '127.0.0.1' })
  const text = await response.clone().text()
  return { status: response.status, body: text ? JSON.parse(text) : null, allows: await toolhiveAllows(response) }
}

async function logged(decisionId: string): Promise<any> {
  return jsonOf(await app.call('GET', `/decisions/${decisionId}`, { token: vars.VIEWER_KEY_A }))
}

async function countRows(table: 'decisions' | 'approvals'): Promise<number> {
  const row = await app.db.selectFrom(table).select((eb) => eb.fn.countAll<string>().as('n')).where('organization_id', '=', A).executeTakeFirstOrThrow()
  return Number(row.n)
}

t.test('the PORC is built and posted as ToolHive does', async (t) => {
  const porc = buildPorc(CONFIG, 'github', 'tool', 'call', 'create_issue', ALICE, { title: 'a <b> & c', body: 'x' }, { destructiveHint: false, readOnlyHint: false })
  t.equal(
    goMarshal(porc),
    '{"context":{"mcp":{"annotations":{"destructiveHint":false,"readOnlyHint":false},"args":{"body":"x","title":"a \\u003cb\\u003e \\u0026 c"},"feature":"tool","operation":"call","resource_id":"create_issue"}},' +
      '"operation":"mcp:tool:call","principal":{"groups":["eng"],"roles":["developer"],"sub":"alice@example.com"},"resource":"mrn:mcp:github:tool:create_issue"}',
  )
  const request = toolhiveRequest(CONFIG, porc)
  t.equal(request.url, 'http://localhost/toolhive/decision')
  t.equal(request.headers.get('authorization'), `Basic ${Buffer.from(`toolhive:${AGENT_KEY}`).toString('base64')}`)
  t.equal(request.headers.get('content-type'), 'application/json')
  t.equal(request.headers.get('accept'), 'application/json')
})

t.test('an allowed tool call answers allow true and is logged with the person it is for', async (t) => {
  const answer = await ask('list_issues', { repo: 'acme/site', state: 'open' })
  t.equal(answer.status, 200)
  t.equal(answer.allows, true)
  t.same(answer.body, { allow: true, decision_id: answer.body.decision_id, decision: 'allow', reasons: [{ policy_id: listIssues.policy_id, version: 1, name: 'Read issues', effect: 'allow', mode: 'enforce' }], approval: null })
  const row = await logged(answer.body.decision_id)
  t.match(row, {
    agent_id: agent.agent_id,
    agent: 'github-agent',
    action: 'mcp.github.list_issues',
    resource: 'github',
    args: { repo: 'acme/site', state: 'open' },
    decision: 'allow',
    requested_by: `agent-key:${AGENT_KEY_ID}`,
    via: 'toolhive',
  })
  t.same(row.context, {
    on_behalf_of: 'alice@example.com',
    principal: { sub: 'alice@example.com', roles: ['developer'], groups: ['eng'] },
    toolhive: { operation: 'mcp:tool:call', resource: 'mrn:mcp:github:tool:list_issues' },
  })
  t.equal(row.args_sha256, argsSha256({ organization_id: A, agent: 'github-agent', action: 'mcp.github.list_issues', resource: 'github', args: { repo: 'acme/site', state: 'open' } }))
})

t.test('a denied tool call answers allow false, naming the policy', async (t) => {
  const answer = await ask('delete_repo', { repo: 'acme/site' })
  t.equal(answer.status, 200)
  t.equal(answer.allows, false)
  t.same(answer.body.reasons, [{ policy_id: noDeletes.policy_id, version: 1, name: 'No repository deletes', effect: 'deny', mode: 'enforce' }])
  t.equal(answer.body.decision, 'deny')
  t.equal((await logged(answer.body.decision_id)).decision, 'deny')
  const unknown = await ask('merge_pr', { pr: 7 })
  t.same([unknown.allows, unknown.body.decision], [false, 'deny'], 'no policy: the organization default decides')
})

t.test('an approval: asked once, used once after a person approves, with the exact arguments', async (t) => {
  const email = `approver-${crypto.randomUUID().slice(0, 8)}@example.com`
  await inviteAndAccept(app, vars.OWNER_KEY_A!, email, 'manager', 'a long enough password')
  const session = (await jsonOf(await app.call('POST', '/auth/login', { json: { email, password: 'a long enough password' } }))).access_token
  const args = { repo: 'acme/site', title: 'Broken link' }
  const approvalsBefore = await countRows('approvals')

  const first = await ask('create_issue', args)
  t.same([first.status, first.allows, first.body.decision], [200, false, 'require_approval'])
  t.same(first.body.reasons, [{ policy_id: newIssues.policy_id, version: 1, name: 'New issues need a person', effect: 'require_approval', mode: 'enforce' }])
  const approvalId = first.body.approval.approval_id
  t.equal(first.body.approval.status, 'pending')

  const again = await ask('create_issue', args)
  t.same([again.allows, again.body.decision, again.body.approval.approval_id], [false, 'require_approval', approvalId], 'a retry waits on the same approval')
  t.equal(await countRows('approvals'), approvalsBefore + 1, 'no second approval is asked for')
  const other = await ask('create_issue', { ...args, title: 'Something else' })
  t.not(other.body.approval.approval_id, approvalId, 'other arguments are another request')

  const read = await jsonOf(await app.call('GET', `/approvals/${approvalId}`, { token: vars.VIEWER_KEY_A }))
  t.match(read, { action: 'mcp.github.create_issue', resource: 'github', args, context: { on_behalf_of: 'alice@example.com' } })
  const vote = await app.call('POST', `/approvals/${approvalId}/approve`, { token: session, json: {} })
  t.equal(vote.status, 200)

  const changed = await ask('create_issue', { ...args, title: 'Broken link!' })
  t.same([changed.allows, changed.body.decision], [false, 'require_approval'], 'changed arguments are not approved')
  const [one, two] = await Promise.all([ask('create_issue', args), ask('create_issue', args)])
  t.same([one.allows, two.allows].sort(), [false, true], 'two concurrent retries: exactly one goes through')
  const used = one.allows ? one : two
  t.same(used.body.reasons, [{ rule: 'approval' }])
  t.equal(used.body.approval.approval_id, approvalId)
  t.equal((await jsonOf(await app.call('GET', `/approvals/${approvalId}`, { token: vars.VIEWER_KEY_A }))).status, 'consumed')
  const after = await ask('create_issue', args)
  t.same([after.allows, after.body.decision], [false, 'require_approval'], 'used: the next call asks again')
  t.not(after.body.approval.approval_id, approvalId)
})

t.test('a pending approval does not hold back a call the policies now allow', async (t) => {
  const args = { repo: 'acme/site', title: 'Typo' }
  const first = await ask('create_issue', args)
  t.equal(first.body.decision, 'require_approval')
  const allowAll = await insertPolicy(app.db, A, { name: 'Trust github-agent', effect: 'allow', agents: ['github-agent'], actions: ['mcp.github.create_issue'], resources: ['nothing-else'] }, at())
  t.ok(allowAll.policy_id)
  t.equal((await ask('create_issue', args)).body.decision, 'require_approval', 'a policy on another resource changes nothing')
})

t.test('MPE claims, annotations and arguments left out', async (t) => {
  const config: ToolhiveConfig = { ...CONFIG, claimMapping: 'mpe', context: {} }
  const porc = buildPorc(config, 'github', 'tool', 'call', 'list_issues', { sub: 'bob@example.com', roles: ['ops'], clearance: 'secret' }, { repo: 'x' }, { readOnlyHint: true })
  const response = await app.app.fetch(toolhiveRequest(config, porc), { remoteAddress: '127.0.0.1' })
  const body = await jsonOf(response)
  t.equal(body.allow, true)
  const row = await logged(body.decision_id)
  t.same(row.args, {}, 'include_args off: no arguments reach Steward')
  t.same(row.context, {
    on_behalf_of: 'bob@example.com',
    principal: { sub: 'bob@example.com', mroles: ['ops'], mclearance: 'secret', mannotations: {} },
    toolhive: { operation: 'mcp:tool:call', resource: 'mrn:mcp:github:tool:list_issues' },
    tool_annotations: { readOnlyHint: true },
  })
  const nobody = await ask('list_issues', null, CONFIG, null)
  t.equal(nobody.allows, true, 'no claims: an empty principal, no on_behalf_of')
  t.same((await logged(nobody.body.decision_id)).context, { principal: {}, toolhive: { operation: 'mcp:tool:call', resource: 'mrn:mcp:github:tool:list_issues' } })
})

t.test('prompts and resources are decided under their own actions', async (t) => {
  const post = async (feature: 'prompt' | 'resource', operation: 'get' | 'read', id: string, args: Record<string, unknown> | null) =>
    jsonOf(await app.app.fetch(toolhiveRequest(CONFIG, buildPorc(CONFIG, 'github', feature, operation, id, ALICE, args)), { remoteAddress: '127.0.0.1' }))
  const prompt = await post('prompt', 'get', 'summarize', { style: 'short' })
  t.equal(prompt.allow, true)
  t.match(await logged(prompt.decision_id), { action: 'mcp-prompt.github.summarize', resource: 'github', args: { style: 'short' } })
  const doc = await post('resource', 'read', 'file:///docs/readme.md', null)
  t.equal(doc.allow, true)
  t.match(await logged(doc.decision_id), { action: 'mcp-resource.github', resource: 'file:///docs/readme.md', args: {} })
  const secret = await post('resource', 'read', 'file:///etc/passwd', null)
  t.same([secret.allow, secret.decision], [false, 'deny'])
})

t.test('credentials: Basic or Bearer, an agent key or a key naming the agent as the server', async (t) => {
  const porc = buildPorc(CONFIG, 'github', 'tool', 'call', 'list_issues', ALICE, { repo: 'x' })
  const send = (headers: Record<string, string>, body = goMarshal(porc), path = '/toolhive/decision') =>
    app.request(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
  const none = await send({})
  t.same([none.status, await jsonOf(none)], [401, { status: 'Unauthorized', error: 'Authentication required' }])
  const wrong = await send({ authorization: `Basic ${Buffer.from('toolhive:stw_key_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa').toString('base64')}` })
  t.equal(wrong.status, 401)
  t.equal((await send({ authorization: 'Basic !!!' })).status, 401)
  t.equal((await send({ authorization: `Basic ${Buffer.from('no-colon').toString('base64')}` })).status, 401)
  t.equal((await jsonOf(await send({ authorization: `Bearer ${AGENT_KEY}` }))).allow, true)
  t.equal((await jsonOf(await send({ authorization: `Basic ${Buffer.from(`${AGENT_KEY}:`).toString('base64')}` }))).allow, true, 'the key as the user name')
  const viewer = await send({ authorization: `Basic ${Buffer.from(`toolhive:${vars.VIEWER_KEY_A}`).toString('base64')}` })
  t.equal(viewer.status, 403)
  const inUrl = await send({ authorization: `Bearer ${AGENT_KEY}` }, goMarshal(porc), `/toolhive/decision?api_key=${AGENT_KEY}`)
  t.equal(inUrl.status, 400)

  const member: ToolhiveConfig = { ...CONFIG, url: `http://toolhive:${vars.MEMBER_KEY_A}@localhost/toolhive/` }
  const asServer = await ask('list_issues', { repo: 'x' }, member)
  t.equal(asServer.status, 200)
  t.match(await logged(asServer.body.decision_id), { agent: 'github', action: 'mcp.github.list_issues', requested_by: `key:${vars.MEMBER_KEY_ID_A}` })
  const badName = await app.app.fetch(toolhiveRequest(member, buildPorc(member, 'GitHub Server', 'tool', 'call', 'x', ALICE, null)), { remoteAddress: '127.0.0.1' })
  t.same([badName.status, (await jsonOf(badName)).error], [400, NO_AGENT])
  const other = await app.app.fetch(toolhiveRequest({ ...CONFIG, url: `http://toolhive:${vars.OWNER_KEY_B}@localhost/toolhive` }, porc), { remoteAddress: '127.0.0.1' })
  const answer = await jsonOf(other)
  t.equal(other.status, 200)
  t.same([answer.allow, answer.decision], [false, 'deny'], "another organization's key decides with its own policies")
})

t.test('a probe answers without writing anything', async (t) => {
  const before = [await countRows('decisions'), await countRows('approvals')]
  const probe = await ask('create_issue', { repo: 'p', title: 'q' }, CONFIG, ALICE, true)
  t.same([probe.status, probe.body.allow, probe.body.decision, probe.body.decision_id, probe.body.approval], [200, false, 'require_approval', null, null])
  t.same([await countRows('decisions'), await countRows('approvals')], before)
})

t.test('bad input: a clear 4xx, never a decision', async (t) => {
  const before = await countRows('decisions')
  const send = (body: string, type = 'application/json') => app.request('/toolhive/decision', { method: 'POST', headers: { authorization: `Bearer ${AGENT_KEY}`, 'content-type': type }, body })
  const cases: [string, number, string | RegExp][] = [
    ['{', 400, /JSON/],
    ['[]', 400, /JSON object/],
    ['{"operation":"mcp:tool:call"}', 400, 'Field resource is required'],
    ['{"operation":"mcp:tool:list","resource":"mrn:mcp:github:tool:x"}', 400, UNSUPPORTED_OPERATION],
    ['{"operation":"mcp:tool:call","resource":"urn:github:x"}', 400, 'Field resource must be mrn:mcp:<server>:tool:<name> for operation mcp:tool:call'],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:prompt:x"}', 400, 'Field resource must be mrn:mcp:<server>:tool:<name> for operation mcp:tool:call'],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:"}', 400, 'Field resource must be mrn:mcp:<server>:tool:<name> for operation mcp:tool:call'],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:x","context":{"mcp":{"args":[1]}}}', 400, 'Field context.mcp.args must be a JSON object'],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:x","context":[]}', 400, 'Field context must be a JSON object'],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:x","principal":"alice"}', 400, 'Field principal must be a JSON object'],
    [`{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:${'x'.repeat(200)}"}`, 400, /at most 200 characters/],
    ['{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:a\\u0007b"}', 400, /control characters/],
    [`{"operation":"mcp:tool:call","resource":"mrn:mcp:github:tool:x","context":{"mcp":{"args":{"blob":"${'y'.repeat(17_000)}"}}}}`, 400, /larger than 16384 bytes/],
  ]
  for (const [body, status, error] of cases) {
    const response = await send(body)
    const answer = await jsonOf(response)
    t.equal(response.status, status, body.slice(0, 80))
    if (typeof error === 'string') t.equal(answer.error, error)
    else t.match(answer.error, error)
  }
  t.equal((await send('{}', 'text/plain')).status, 415)
  t.equal(await countRows('decisions'), before, 'nothing logged')
})

t.test('GET /decisions?via= tells gateway traffic from POST /decisions', async (t) => {
  const direct = await app.call('POST', '/decisions', { token: vars.MEMBER_KEY_A, json: { agent: 'github-agent', action: 'mcp.github.list_issues', resource: 'github', args: { repo: 'x' } } })
  const directId = (await jsonOf(direct)).decision_id
  const viaToolhive = (await ask('list_issues', { repo: 'y' })).body.decision_id
  const page = async (query: string) => {
    const response = await app.call('GET', `/decisions?limit=100${query}`, { token: vars.VIEWER_KEY_A })
    t.equal(response.status, 200, query)
    return (await jsonOf(response)).decisions as { decision_id: string; via: string }[]
  }
  const toolhive = await page('&via=toolhive')
  t.ok(toolhive.length > 1)
  t.same(new Set(toolhive.map((d) => d.via)), new Set(['toolhive']))
  t.ok(toolhive.some((d) => d.decision_id === viaToolhive))
  t.notOk(toolhive.some((d) => d.decision_id === directId))
  const api = await page('&via=api')
  t.same(new Set(api.map((d) => d.via)), new Set(['api']))
  t.ok(api.some((d) => d.decision_id === directId))
  t.same(await page('&via=mcp'), [], 'no gateway call in this file')
  const all = await page('')
  t.same(new Set(all.map((d) => d.via)), new Set(['api', 'toolhive']))
  t.same((await logged(directId)).via, 'api')
  const bad = await app.call('GET', '/decisions?via=gateway', { token: vars.VIEWER_KEY_A })
  t.same([bad.status, (await jsonOf(bad)).error], [400, 'via must be api, mcp or toolhive'])
})
