// The TypeScript client (clients/typescript) against a live server on a loopback port: every
// error class, retries against a node:http stub (429 + Retry-After, 503, then 200: attempts
// counted, the idempotency key held), pagination across pages, sign-in sessions refreshed before
// expiry, guard (allow, deny, approval granted while it waits, approval timeout), a guarded agent
// tool, and a policy file planned and applied.
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { serve } from '../../cli/serve.ts'
import {
  ActionDenied,
  APIConnectionError,
  APITimeoutError,
  ApprovalTimeout,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  ServerError,
  Steward,
} from '../../clients/typescript/src/index.ts'
import { productApp } from '../support/product-support.ts'

const app = await productApp(t)
const { vars } = app
const served = await serve(app.app, { ...app.config, port: 0, host: '127.0.0.1', tlsCertFile: null, tlsKeyFile: null })
t.teardown(() => served.close())
const baseUrl = `http://127.0.0.1:${served.port}`

const client = (apiKey = vars.MANAGER_KEY_A!, options: ConstructorParameters<typeof Steward>[0] = {}) => new Steward({ apiKey, baseUrl, ...options })
const admin = client(vars.ADMIN_KEY_A)
const manager = client()

/** Sets up the agent the decisions name, and policies: email allowed, file deletion denied. */
await admin.agents.create({ handle: 'support-bot' } as never)
await admin.policies.create({ name: 'Email allowed', effect: 'allow', actions: ['email.send'] })
await admin.policies.create({ name: 'No deleting files', effect: 'deny', actions: ['files.delete'] })

/** A node:http stub answering from a script; records each request's headers and body. */
async function stub(answers: Array<{ status: number; headers?: Record<string, string>; body?: unknown }>): Promise<{ url: string; seen: Array<{ headers: IncomingMessage['headers']; body: any }> }> {
  const seen: Array<{ headers: IncomingMessage['headers']; body: any }> = []
  const server: Server = createServer((request, response) => {
    let text = ''
    request.on('data', (chunk) => (text += chunk))
    request.on('end', () => {
      seen.push({ headers: request.headers, body: text ? JSON.parse(text) : null })
      const answer = answers[Math.min(seen.length - 1, answers.length - 1)]!
      response.writeHead(answer.status, { 'content-type': 'application/json', 'x-request-id': `stub-${seen.length}`, ...answer.headers })
      response.end(JSON.stringify(answer.body ?? { status: 'x', error: `answer ${seen.length}` }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

/** A client whose waits between attempts are recorded instead of slept. */
function recording(url: string, options: ConstructorParameters<typeof Steward>[0] = {}) {
  const steward = new Steward({ apiKey: 'stw_key_test', baseUrl: url, ...options })
  const delays: number[] = []
  steward.core.sleep = async (ms) => {
    delays.push(ms)
  }
  return { steward, delays }
}

t.test('errors: one class per status family, with status, error and the request id', async (t) => {
  const expectError = async (promise: Promise<unknown>, Class: Function, status: number, error: string | RegExp) => {
    const thrown: any = await promise.then(
      () => null,
      (e) => e,
    )
    t.type(thrown, Class, `${Class.name}`)
    t.equal(thrown?.status, status)
    t.match(thrown?.error, error)
    t.match(thrown?.requestId, /^[0-9a-f-]{36}$/)
  }
  await expectError(client('stw_key_nope').organization.get(), AuthenticationError, 401, /./)
  await expectError(client(vars.VIEWER_KEY_A).policies.create({ name: 'x', effect: 'deny', actions: ['a'] }), PermissionDeniedError, 403, "This credential's role (viewer) lacks the policies:write permission")
  await expectError(manager.policies.get(crypto.randomUUID()), NotFoundError, 404, 'Policy not found')
  await expectError(manager.policies.create({ name: 'x', effect: 'nope' } as never), BadRequestError, 400, /effect/)
  await expectError(manager.policies.apply({ policies: [], base: 'ps1-stale' }), ConflictError, 409, 'The policies changed since the plan: plan again')

  const refused = await new Steward({ apiKey: 'k', baseUrl: 'http://127.0.0.1:1', maxRetries: 0 }).organization.get().catch((e) => e)
  t.type(refused, APIConnectionError)
  t.notMatch(String(refused.message), /stw_|Bearer/)
  const silent = createServer(() => {})
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    silent.closeAllConnections()
    silent.close()
  })
  const slow = await new Steward({ apiKey: 'k', baseUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, maxRetries: 0, timeoutMs: 200 }).organization.get().catch((e) => e)
  t.type(slow, APITimeoutError)
  t.throws(() => new Steward({ apiKey: 'k', baseUrl: 'http://user:pw@127.0.0.1:1' }), TypeError, 'no credential in the base URL')
  t.notMatch(JSON.stringify(client('stw_key_secret_value')), /secret_value/)
})

t.test('retries: 429 with Retry-After, then 503, then 200; the idempotency key is held', async (t) => {
  const answer = { decision_id: crypto.randomUUID(), decision: 'allow', reasons: [], ruleset_revision: 1 }
  const { url, seen } = await stub([{ status: 429, headers: { 'retry-after': '1' } }, { status: 503 }, { status: 200, body: answer }])
  const { steward, delays } = recording(url)
  t.same(await steward.decisions.decide({ agent: 'support-bot', action: 'email.send' }), answer)
  t.equal(seen.length, 3, 'three attempts')
  const keys = seen.map((s) => s.body.idempotency_key)
  t.match(keys[0], /^[0-9a-f-]{36}$/)
  t.same(keys, [keys[0], keys[0], keys[0]], 'one idempotency key on every attempt')
  t.same(seen.map((s) => s.headers['x-steward-retry-count']), [undefined, '1', '2'])
  t.equal(delays[0], 1000, 'Retry-After honoured')
  t.ok(delays[1]! >= 750 && delays[1]! <= 1000, `backoff with jitter: ${delays[1]}`)

  // Two retries at most: a fourth answer is never asked for.
  const down = await stub([{ status: 500 }])
  const failing = recording(down.url)
  const error = await failing.steward.organization.get().catch((e) => e)
  t.type(error, ServerError)
  t.same([down.seen.length, error.requestId], [3, 'stub-3'])

  // A write without an idempotency key is never sent twice.
  const once = await stub([{ status: 503 }])
  await recording(once.url).steward.policies.update(crypto.randomUUID(), { enabled: false }).catch(() => {})
  t.equal(once.seen.length, 1)

  // No answer at all: retried like a 5xx, then APIConnectionError.
  let calls = 0
  const unreachable = recording('http://127.0.0.1:1', { fetch: async () => { calls++; throw new TypeError('fetch failed') } })
  t.type(await unreachable.steward.organization.get().catch((e) => e), APIConnectionError)
  t.same([calls, unreachable.delays.length], [3, 2])

  // A Retry-After beyond the cap is not waited for: the error says when to come back.
  const later = await stub([{ status: 429, headers: { 'retry-after': '120' } }])
  const limited = recording(later.url)
  const tooLong = await limited.steward.organization.get().catch((e) => e)
  t.type(tooLong, RateLimitError)
  t.same([tooLong.retryAfter, later.seen.length, limited.delays], [120, 1, []])
})

t.test('pagination follows next_cursor across pages', async (t) => {
  for (let i = 0; i < 5; i++) await admin.agents.create({ handle: `paged-${i}` } as never)
  const pages = []
  for await (const page of admin.agents.list({ limit: 2 }).pages()) pages.push(page.items.length)
  const all = await admin.agents.list({ limit: 2 }).toArray()
  const handles = all.map((agent) => agent.handle)
  t.same(pages.reduce((a, b) => a + b, 0), all.length)
  t.ok(pages.length >= 3, `${pages.length} pages of at most 2`)
  t.same([...handles].sort(), [...new Set(handles)].sort(), 'no agent twice')
  t.ok(['paged-0', 'paged-4', 'support-bot'].every((h) => handles.includes(h)))
  const policies = []
  for await (const policy of manager.policies.list({ limit: 1 })) policies.push(policy.name)
  t.same(policies.sort(), ['Email allowed', 'No deleting files', 'Payments need approval (A)'])
})

t.test('sessions: sign in, and the access token is refreshed before it expires', async (t) => {
  const sent: string[] = []
  const tokens: string[] = []
  const steward = new Steward({
    baseUrl,
    fetch: (input, init) => {
      sent.push(`${init?.method} ${new URL(String(input)).pathname}`)
      const authorization = (init?.headers as Record<string, string>)?.Authorization
      if (authorization) tokens.push(authorization)
      return fetch(input, init)
    },
  })
  const session = await steward.signIn(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)
  t.equal(session.organization_id, vars.ORG_A)
  t.notOk('access_token' in session || 'refresh_token' in session, 'the tokens stay inside the client')
  t.equal((await steward.organization.get()).organization_id, vars.ORG_A)
  const start = Date.now()
  steward.core.now = () => start + 14.5 * 60 * 1000 // past 90 % of the 15-minute lifetime
  await steward.organization.get()
  t.same(sent, ['POST /auth/login', 'GET /organization', 'POST /auth/refresh', 'GET /organization'])
  t.equal(tokens.length, 2, 'sign-in and refresh carry no Authorization')
  t.not(tokens[0], tokens[1], 'the refreshed token is used')
})

t.test('guard: allow runs, deny throws, an approval granted while it waits runs once', async (t) => {
  let runs = 0
  const send = manager.guard(async (input: { to: string }) => {
    runs++
    return `sent to ${input.to}`
  }, { action: 'email.send', agent: 'support-bot', resource: (input) => `mail/${input.to}` })
  t.equal(await send({ to: 'ada@example.com' }), 'sent to ada@example.com')

  const remove = manager.guard(async (_path: string) => runs++, { action: 'files.delete', agent: 'support-bot' })
  const denied = await remove('/etc/passwd').catch((e) => e)
  t.type(denied, ActionDenied)
  t.same(denied.reasons.map((r: any) => r.name), ['No deleting files'])
  t.equal(runs, 1, 'the denied function did not run')

  const approver = new Steward({ baseUrl })
  await approver.signIn(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)
  const approvals: string[] = []
  const refund = manager.guard(
    async (input: { order: string; amount: number }) => {
      runs++
      return `refunded ${input.amount} on ${input.order}`
    },
    {
      action: 'payments.refund',
      agent: 'support-bot',
      resource: (input) => `order/${input.order}`,
      approvalTimeoutMs: 30_000,
      onApproval: (approval) => {
        approvals.push(approval.approval_id)
        void approver.approvals.approve(approval.approval_id, 'ok')
      },
    },
  )
  t.equal(await refund({ order: 'A-1', amount: 30 }), 'refunded 30 on A-1')
  t.equal(approvals.length, 1)
  const used = await manager.approvals.get(approvals[0]!)
  t.equal(used.status, 'consumed', 'the approval was used by the second decision')

  const waiting = manager.guard(async () => runs++, { action: 'payments.refund', agent: 'support-bot', approvalTimeoutMs: 1000 })
  const timedOut = await waiting().catch((e) => e)
  t.type(timedOut, ApprovalTimeout)
  t.equal(timedOut.action, 'payments.refund')
  t.equal(runs, 2, 'only the allowed and the approved calls ran')
})

t.test('guardTool: an agent tool ({name, parameters, execute}) governed by its name', async (t) => {
  const tool = {
    name: 'email.send',
    description: 'Send an email',
    parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
    execute: async (input: { to: string }) => `sent to ${input.to}`,
  }
  const governed = manager.guardTool(tool, { agent: 'support-bot' })
  t.same([governed.name, governed.parameters, governed.description], [tool.name, tool.parameters, tool.description])
  t.equal(await governed.execute({ to: 'ada@example.com' }), 'sent to ada@example.com')
  const deleting = manager.guardTool({ name: 'files.delete', execute: async (_input: { path: string }) => 'deleted' }, { agent: 'support-bot' })
  t.type(await deleting.execute({ path: '/x' }).catch((e) => e), ActionDenied)
  const polite = manager.guardTool({ name: 'files.delete', execute: async (_input: { path: string }) => 'deleted' }, { agent: 'support-bot', onDeny: 'return' })
  t.match(await polite.execute({ path: '/x' }), /^Not allowed: Steward denied files\.delete: No deleting files$/)
})

t.test('policies as code: a file planned and applied, then a no-op', async (t) => {
  const current = await manager.policies.list().toArray()
  const file = current.map(({ name, description, effect, agents, actions, resources, condition, approval, mode, enabled }) => ({ name, description, effect, agents, actions, resources, condition, approval, mode, enabled }))
  file.push({ ...file[0]!, name: 'Reports allowed', effect: 'allow', actions: ['reports.*'], approval: null })
  const plan = await manager.policies.plan({ policies: file as never })
  t.same([plan.create.map((c) => c.name), plan.change.length, plan.archive.length, plan.unchanged], [['Reports allowed'], 0, 0, 3])
  const applied = await manager.policies.apply({ policies: file as never, base: plan.base })
  t.same([applied.applied, applied.create.map((c) => c.name)], [true, ['Reports allowed']])
  const again = await manager.policies.apply({ policies: file as never, base: applied.base })
  t.same(again, { applied: false, base: applied.base, create: [], change: [], archive: [] })
})
