// The console end to end, in a real Chromium (Debian's /usr/bin/chromium driven by
// playwright-core) against a live server on this file's database (PGlite, or PostgreSQL with
// TEST_DATABASE_URL): sign-in, a policy with a bad condition, a key's secret shown once, a
// Viewer without write controls (and the API refusing them anyway), axe-core on every page,
// the approvals page on a phone-sized screen, and the approval round trip once the server has
// approvals. Screenshots go to CONSOLE_SCREENSHOTS.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { serve } from '../../cli/serve.ts'
import { freePort } from '../../bench/lib.ts'
import { chromiumMissing, openConsoleBrowser } from '../support/browser.ts'
import { inviteAndAccept, jsonOf, productApp } from '../support/product-support.ts'

const missing = chromiumMissing()
if (missing !== null) {
  t.plan(0, missing)
} else {
  await run()
}

async function run(): Promise<void> {

  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const world = await productApp(t, { env: { PORT: String(port), HOST: '127.0.0.1', APP_URL: origin, PRODUCT_API_URL: origin, BASE_URL: origin } })
  const served = await serve(world.app, world.config)
  t.teardown(() => served.close())
  const { vars } = world

  // Organization A is the oldest, so its Owner reads the leads (the default holder).
  await world.db.updateTable('organizations').set({ created_at: new Date(world.clock.now - 3_600_000) }).where('id', '=', vars.ORG_A!).execute()
  for (const [email, company] of [['ada@example.com', 'Analytical Engines'], ['eve@example.com', '=HYPERLINK("http://evil.example","x")']]) {
    const lead = { first_name: 'Ada', last_name: 'Lovelace', email, company, linkedin: 'https://www.linkedin.com/in/ada' }
    const posted = await world.call('POST', '/demo-request', { json: lead })
    if (posted.status !== 200) throw new Error(`POST /demo-request answered ${posted.status}`)
  }

  const viewerEmail = `viewer-${Date.now()}@example.com`
  const viewerPassword = 'a viewer passphrase'
  await inviteAndAccept(world, vars.OWNER_KEY_A!, viewerEmail, 'viewer', viewerPassword)

  const { page, problems, axe } = await openConsoleBrowser(t)

  /** With the keyboard only: the Email field has focus, Tab moves to Password, Enter submits. */
  async function signInByKeyboard(email: string, password: string): Promise<void> {
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    await page.keyboard.type(email)
    await page.keyboard.press('Tab')
    await page.keyboard.type(password)
    await page.keyboard.press('Enter')
    await page.getByRole('link', { name: 'Approvals' }).waitFor()
  }

  async function open(link: string, heading: string): Promise<void> {
    await page.getByRole('navigation').getByRole('link', { name: link, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: heading }).waitFor()
  }

  const approvalsExist = (await world.call('GET', '/approvals?status=pending', { token: vars.OWNER_KEY_A })).status !== 404
  const decisionsExist = (await world.call('POST', '/decisions', { token: vars.ADMIN_KEY_A, json: { agent: 'probe', action: 'probe.check' } })).status !== 404

  await t.test('the sign-in page passes axe and keeps the token out of the URL and storage', async (t) => {
    await page.goto(`${origin}/console/`)
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    await axe('sign-in')
    await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill('wrong password, surely')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor()
    await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('link', { name: 'Approvals' }).waitFor()
    t.notMatch(page.url(), /stw_|token|password/i)
    const stored = await page.evaluate(() => JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookie: document.cookie }))
    t.equal(stored, '{"local":{},"session":{},"cookie":""}', 'nothing in web storage or cookies')
    const before = problems.length
    const sink = await page.evaluate(() => {
      try {
        document.body.insertAdjacentHTML('beforeend', '<img src=x>')
        return 'parsed'
      } catch (error) {
        return (error as Error).name
      }
    })
    t.equal(sink, 'TypeError', 'Trusted Types: a string never becomes HTML')
    problems.splice(before)
  })

  await t.test('the approvals page: the queue, or a clear state when the server has no approvals', async (t) => {
    await open('Approvals', 'Approvals')
    if (approvalsExist) await page.getByText(/pending approval|Nothing waits/).first().waitFor()
    else await page.getByText('Approvals are not available on this server.').waitFor()
    await axe('approvals')
    await page.setViewportSize({ width: 390, height: 844 })
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
    t.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow} px)`)
    await axe('approvals-phone')
    await page.setViewportSize({ width: 1280, height: 860 })
  })

  await t.test('a policy with an invalid condition shows the error next to the field; a valid one is created', async (t) => {
    await open('Policies', 'Policies')
    await axe('policies')
    await page.getByRole('link', { name: 'New policy' }).click()
    await page.getByRole('heading', { level: 1, name: 'New policy' }).waitFor()
    await page.getByLabel('Name').fill('Refunds over 100 need a manager')
    await page.getByLabel('Actions').fill('payments.refund')
    await page.getByLabel('Effect').selectOption('require_approval')
    await page.getByLabel('Condition (CEL)').fill('args.amount >')
    // With POST /decisions/simulate the server checks the condition as it is typed; without, on save.
    if (!decisionsExist) await page.getByRole('button', { name: 'Create policy' }).click()
    const error = page.locator('#condition-error .error')
    await error.waitFor()
    t.match(await error.textContent(), /condition/i, 'the message names the condition')
    t.equal(await page.getByLabel('Condition (CEL)').getAttribute('aria-invalid'), 'true')
    await axe('policy-invalid-condition')
    await page.getByLabel('Condition (CEL)').fill('')
    await page.getByRole('button', { name: 'Create policy' }).click()
    await page.getByRole('heading', { level: 1, name: 'Edit policy' }).waitFor()
    await page.getByRole('heading', { level: 2, name: 'Versions' }).waitFor()
    t.equal(await page.getByLabel('Name').inputValue(), 'Refunds over 100 need a manager')
    await axe('policy-edit')
  })

  await t.test('a new key shows its secret once, with a copy button', async (t) => {
    await open('Keys', 'API keys')
    await page.getByLabel('Key name').fill('console e2e key')
    await page.getByLabel('Role').selectOption('member')
    await page.getByRole('button', { name: 'Create key' }).click()
    const secret = page.getByRole('textbox', { name: /Secret of key .console e2e key. \(shown once\)/ })
    await secret.waitFor()
    const value = await secret.inputValue()
    t.match(value, /^stw_key_/)
    t.ok(await page.getByRole('button', { name: 'Copy' }).isVisible())
    await axe('keys')
    const login = await world.call('POST', '/auth/login', { json: { api_key: value } })
    t.equal(login.status, 200, 'the secret shown works')
    await open('Members', 'Members')
    await open('Keys', 'API keys')
    await page.getByRole('table', { name: 'API keys' }).getByText('console e2e key').waitFor()
    t.equal(await page.getByText(value).count(), 0, 'the secret is not shown again')
    t.equal((await page.content()).includes(value), false)
  })

  await t.test('leads: search, and a CSV export whose formulas are defused', async (t) => {
    await open('Leads', 'Leads')
    await page.getByRole('table', { name: 'Demo requests' }).waitFor()
    await page.getByLabel('Search', { exact: true }).fill('eve@')
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.waitForFunction(() => document.querySelectorAll('table tbody tr').length === 1)
    const downloading = page.waitForEvent('download')
    await page.getByRole('button', { name: 'Export CSV' }).click()
    const download = await downloading
    t.equal(download.suggestedFilename(), 'demo-leads.csv')
    const csv = readFileSync((await download.path())!, 'utf8')
    const lines = csv.trim().split('\r\n')
    t.equal(lines[0], 'received_at,email,first_name,last_name,company,linkedin,phone,source,analytics_distinct_id')
    t.equal(lines.length, 2, 'only the leads the search found')
    t.match(lines[1], `,eve@example.com,Ada,Lovelace,"'=HYPERLINK(""http://evil.example"",""x"")",`)
  })

  await t.test('an expired access token is refreshed silently: the page loads, no sign-in', async (t) => {
    world.clock.advance(20 * 60_000)
    await open('Members', 'Members')
    await page.getByRole('table', { name: 'Members' }).waitFor()
    t.equal(await page.getByRole('button', { name: 'Sign in' }).count(), 0)
  })

  await t.test('the other pages pass axe', async () => {
    for (const [link, heading, name] of [
      ['Decisions', 'Decisions', 'decisions'],
      ['Agents', 'Agents', 'agents'],
      ['Members', 'Members', 'members'],
      ['Audit', 'Audit log', 'audit'],
      ['Leads', 'Leads', 'leads'],
    ] as const) {
      await open(link, heading)
      await page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('Loading…'))
      await axe(name)
    }
  })

  await t.test('the approval round trip: a decision appears within 2 s, approve, the agent\'s wait returns', { skip: approvalsExist && decisionsExist ? false : 'the server has no approvals yet (POST /decisions or GET /approvals answers 404)' }, async (t) => {
    const policy = await world.call('POST', `/policies?organization_id=${vars.ORG_A}`, {
      token: vars.ADMIN_KEY_A,
      json: { name: 'E2E approval', effect: 'require_approval', actions: ['e2e.approve'] },
    })
    t.equal(policy.status, 201)
    // A registered agent: an unknown handle would be discovered and denied (unknown_agents: deny).
    const agent = await world.call('POST', '/agents', { token: vars.ADMIN_KEY_A, json: { handle: 'e2e-bot' } })
    t.equal(agent.status, 201)
    await open('Approvals', 'Approvals')
    const decided = await jsonOf(await world.call('POST', '/decisions', { token: vars.ADMIN_KEY_A, json: { agent: 'e2e-bot', action: 'e2e.approve', args: { amount: 7 } } }))
    t.equal(decided.decision, 'require_approval')
    const id = decided.approval.approval_id
    const waiting = world.call('GET', `/approvals/${id}?wait=30`, { token: vars.ADMIN_KEY_A })
    const started = Date.now()
    const card = page.getByRole('listitem').filter({ hasText: 'e2e.approve' })
    await card.getByRole('button', { name: 'Approve' }).waitFor({ timeout: 2500 })
    t.ok(Date.now() - started <= 2500, 'appeared without a reload within about 2 s')
    await card.getByRole('textbox').fill('looks fine')
    await card.getByRole('button', { name: 'Approve' }).click()
    const answer = await jsonOf(await waiting)
    t.equal(answer.status, 'approved')
    await card.waitFor({ state: 'detached' })
  })

  await t.test('a Viewer sees no write controls, and the API refuses the writes anyway', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click()
    await signInByKeyboard(viewerEmail, viewerPassword)
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Approvals', "keyboard focus moves to the page's heading")
    const links = await page.getByRole('navigation').getByRole('link').allTextContents()
    t.same(links, ['Overview', 'Approvals', 'Decisions', 'Policies', 'Agents'])
    t.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0)
    await open('Policies', 'Policies')
    await page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('Loading…'))
    t.equal(await page.getByRole('link', { name: 'New policy' }).count(), 0)
    await page.getByRole('table', { name: 'Policies' }).getByRole('link').first().click()
    await page.getByRole('heading', { level: 1, name: 'Edit policy' }).waitFor()
    t.equal(await page.getByRole('button', { name: 'Save changes' }).count(), 0)
    t.ok(await page.getByLabel('Name').isDisabled())
    await axe('viewer-policy')
    await page.reload()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    t.pass('a reload signs out: the session lived in memory only')

    const login = await jsonOf(await world.call('POST', '/auth/login', { json: { email: viewerEmail, password: viewerPassword } }))
    t.equal(login.role, 'viewer')
    const token = login.access_token
    t.equal((await world.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token, json: { name: 'x', effect: 'deny', actions: ['a'] } })).status, 403)
    t.equal((await world.call('POST', '/keys', { token, json: { role: 'viewer' } })).status, 403)
    t.equal((await world.call('POST', '/invitations', { token, json: { email: 'x@example.com', role: 'viewer' } })).status, 403)
    t.equal((await world.call('GET', '/leads/demo-requests', { token })).status, 403)
  })

  await t.test('someone in two organizations chooses one after signing in', async (t) => {
    await inviteAndAccept(world, vars.OWNER_KEY_B!, vars.USER_EMAIL_A!, 'admin', vars.USER_PASSWORD_A!)
    await page.goto(`${origin}/console/`)
    await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Choose an organization' }).waitFor()
    await axe('choose-organization')
    await page.getByLabel('Organization', { exact: true }).selectOption(vars.ORG_B!)
    await page.getByRole('button', { name: 'Continue' }).click()
    await page.getByRole('link', { name: 'Approvals' }).waitFor()
    t.match(await page.locator('#who').textContent(), `${vars.USER_EMAIL_A} · admin`)
    await open('Keys', 'API keys')
    await page.getByRole('table', { name: 'API keys' }).waitFor()
    t.equal(await page.getByRole('table', { name: 'API keys' }).getByText('console e2e key').count(), 0, "organization A's keys are not shown in B")
  })

  await t.test('with the product API on another origin, the console calls it there (CSP and CORS allow it)', async (t) => {
    const otherPort = await freePort()
    const api = `http://127.0.0.1:${otherPort}`
    const split = await productApp(t, { env: { PORT: String(otherPort), HOST: '127.0.0.1', APP_URL: `http://localhost:${otherPort}`, PRODUCT_API_URL: api, BASE_URL: api } })
    const server = await serve(split.app, split.config)
    t.teardown(() => server.close())
    await page.goto(`http://localhost:${otherPort}/console/`)
    t.match(await page.locator('meta[name="steward-api"]').getAttribute('content'), api)
    const calls: string[] = []
    page.on('request', (request) => calls.push(request.url()))
    await page.getByLabel('Email').fill(split.vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill(split.vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await open('Keys', 'API keys')
    await page.getByRole('table', { name: 'API keys' }).waitFor()
    t.ok(calls.includes(`${api}/auth/login`) && calls.includes(`${api}/keys`), 'the API was called on its own origin')
  })

  t.test('no script error and no Content-Security-Policy violation on any page', async (t) => {
    t.same(problems, [])
  })
}
