// The console's overview and the pages a new user met, end to end in a real Chromium against a
// live server on this file's database: a seeded week of decisions, approvals and leads drawn as
// charts whose text alternatives carry the exact counts; an approval card that names its policy
// and counts votes, and says what was approved once the card leaves; the organization chooser
// telling two same-named organizations apart; the audit log in names, one line a row; a
// monitor-mode policy's hits and what enforcing it would have changed. axe-core on every page.
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
  const { vars, clock } = world
  const admin = vars.ADMIN_KEY_A!

  async function ok(response: Promise<Response>, what: string, status = 201): Promise<any> {
    const answer = await response
    if (answer.status !== status) throw new Error(`${what} answered ${answer.status}: ${await answer.text()}`)
    return answer.status === 204 ? null : jsonOf(answer)
  }
  const policy = (json: unknown) => ok(world.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: admin, json }), 'POST /policies')
  const decide = (agent: string, action: string, args: unknown = {}) => ok(world.call('POST', '/decisions', { token: admin, json: { agent, action, args } }), `POST /decisions ${action}`, 200)

  // Organization A is the oldest, so its Owner reads the leads (the default holder).
  await world.db.updateTable('organizations').set({ created_at: new Date(clock.now - 3_600_000) }).where('id', '=', vars.ORG_A!).execute()
  await policy({ name: 'No deletes', effect: 'deny', actions: ['billing.delete'] })
  await policy({ name: 'Support reads', effect: 'allow', agents: ['support-bot'], actions: ['tickets.read', 'data.export'] })
  await policy({ name: 'Refunds need two people', effect: 'require_approval', actions: ['billing.refund'], approval: { approvers_required: 2 } })
  const trial = await policy({ name: 'No exports (trial)', effect: 'deny', actions: ['data.export'], mode: 'monitor' })
  for (const handle of ['billing-bot', 'support-bot']) await ok(world.call('POST', '/agents', { token: admin, json: { handle } }), 'POST /agents')
  const approverEmail = `approver-${Date.now()}@example.com`
  await inviteAndAccept(world, vars.OWNER_KEY_A!, approverEmail, 'admin', 'an approver passphrase')
  const viewerEmail = `viewer-${Date.now()}@example.com`
  await inviteAndAccept(world, vars.OWNER_KEY_A!, viewerEmail, 'viewer', 'a viewer passphrase')

  // Day 1: 3 allowed, 2 denied. Leads: 2 from the spring campaign, 1 from the blog, 1 duplicate refused.
  for (let i = 0; i < 3; i += 1) await decide('support-bot', 'tickets.read')
  for (let i = 0; i < 2; i += 1) await decide('billing-bot', 'billing.delete')
  for (const [path, json, status] of [
    ['/demo-request', { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company: 'Engines', linkedin: 'https://www.linkedin.com/in/ada', source: 'spring-campaign' }, 200],
    ['/demo-request', { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com', company: 'Navy', linkedin: 'https://www.linkedin.com/in/grace', source: 'spring-campaign' }, 200],
    ['/demo-request', { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com', company: 'Navy', linkedin: 'https://www.linkedin.com/in/grace', source: 'spring-campaign' }, 409],
    ['/demo-request', { first_name: 'Alan', last_name: 'Turing', email: 'alan@example.com', company: 'Bletchley', linkedin: 'https://www.linkedin.com/in/alan', source: 'blog' }, 200],
  ] as const) await ok(world.call('POST', path, { json }), `POST ${path}`, status)

  // Day 2: 2 allowed (which the monitor-mode policy would have denied), 1 denied (an unknown agent), 2 sent for approval.
  clock.advance(86_400_000)
  for (let i = 0; i < 2; i += 1) await decide('support-bot', 'data.export')
  await decide('ghost-bot', 'tickets.read')
  const first = await decide('billing-bot', 'billing.refund', { amount: 120 })
  // The second approver votes 10 minutes later; the second refund then waits.
  clock.advance(600_000)
  const approver = await jsonOf(await world.call('POST', '/auth/login', { json: { email: approverEmail, password: 'an approver passphrase' } }))
  await ok(world.call('POST', `/approvals/${first.approval.approval_id}/approve`, { token: approver.access_token, json: {} }), 'the first vote', 200)
  const second = await decide('billing-bot', 'billing.refund', { amount: 80 })
  if (second.decision !== 'require_approval') throw new Error(`the second refund was answered ${second.decision}`)

  // Organization B, renamed like A, also has A's Owner (as an Admin).
  await inviteAndAccept(world, vars.OWNER_KEY_B!, vars.USER_EMAIL_A!, 'admin', vars.USER_PASSWORD_A!)
  await ok(world.call('PATCH', '/organization', { token: vars.OWNER_KEY_B, json: { name: 'Fixture org A' } }), 'PATCH /organization', 200)

  const { page, problems, axe } = await openConsoleBrowser(t)
  const main = page.locator('main')
  const waitLoaded = () => page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('Loading…'))
  const rowsOf = (caption: string) =>
    page.getByRole('table', { name: caption, includeHidden: true }).evaluate((table) => [...table.querySelectorAll('tbody tr')].map((row) => [...row.children].map((cell) => cell.textContent)))
  async function open(link: string, heading: string): Promise<void> {
    await page.getByRole('navigation').getByRole('link', { name: link, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: heading }).waitFor()
  }

  await t.test('the organization chooser names two same-named organizations apart; the overview is the first page', async (t) => {
    await page.goto(`${origin}/console/`)
    await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Choose an organization' }).waitFor()
    const options = await page.getByLabel('Organization', { exact: true }).locator('option').allTextContents()
    t.same(options, [`Fixture org A (owner, id ${vars.ORG_A!.slice(0, 8)})`, `Fixture org A (admin, id ${vars.ORG_B!.slice(0, 8)})`])
    await axe('overview-choose-organization')
    await page.getByRole('button', { name: 'Continue' }).click()
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
    t.match(page.url(), /#\/overview$/)
    t.equal((await page.getByRole('navigation').getByRole('link').allTextContents())[0], 'Overview', 'first in the navigation')
  })

  await t.test('an approval card names its policy and counts the votes; approving it leaves a confirmation', async (t) => {
    await open('Approvals', 'Approvals')
    const card = page.getByRole('listitem').filter({ hasText: '"amount": 120' })
    await card.getByRole('button', { name: 'Approve' }).waitFor()
    const detail = (term: string) => card.locator('dt', { hasText: term }).locator('xpath=following-sibling::dd[1]')
    await page.waitForFunction(() => [...document.querySelectorAll('.card dd')].some((dd) => dd.textContent?.startsWith('1 of 2: approved by')))
    t.equal(await detail('Policy').textContent(), 'Refunds need two people (version 1)')
    t.equal(await detail('Approvals').textContent(), `1 of 2: approved by ${approverEmail}`)
    const waiting = page.getByRole('listitem').filter({ hasText: '"amount": 80' })
    t.equal(await waiting.locator('dt', { hasText: 'Approvals' }).locator('xpath=following-sibling::dd[1]').textContent(), '0 of 2')
    await axe('overview-approvals-named')
    await card.getByRole('button', { name: 'Approve' }).click()
    const confirmation = page.locator('.confirmation')
    await confirmation.getByText('Approved: billing.refund by billing-bot.').waitFor()
    t.equal(await confirmation.getAttribute('role'), 'status', 'said to screen readers too')
    t.equal(await confirmation.textContent(), 'Approved: billing.refund by billing-bot. The call goes through once, with exactly these arguments.')
    t.ok(await confirmation.isVisible())
    t.equal(await page.evaluate(() => document.activeElement?.classList.contains('confirmation')), true, 'the keyboard stays on the page')
    await card.waitFor({ state: 'detached' })
    t.equal(await page.getByRole('list', { name: 'Pending approvals' }).getByRole('listitem').count(), 1, 'the other refund still waits')
  })

  await t.test('the overview draws the week: its text alternatives carry the exact counts', async (t) => {
    clock.advance(120_000)
    await open('Overview', 'Overview')
    await page.getByRole('heading', { level: 2, name: 'Leads by source' }).waitFor()
    await waitLoaded()
    const summaries = await main.locator('.chart-summary').allTextContents()
    t.same(summaries, [
      '10 decisions: 5 allowed, 2 sent for approval, 3 denied.',
      '2 requested: 1 approved, 0 denied, 0 expired, 0 cancelled.',
      '3 leads: spring-campaign 2, blog 1; 1 duplicate refused.',
    ])
    const chart = page.getByRole('img', { name: /^Decisions by outcome per day/ })
    t.equal(await chart.getAttribute('tabindex'), '0', 'the chart is a Tab stop')
    t.equal(await chart.locator('desc').textContent(), '10 decisions: 5 allowed, 2 sent for approval, 3 denied.')
    const days = (await rowsOf('Decisions by outcome per day')).filter((row) => row[4] !== '0')
    t.same(days.map((row) => row.slice(1)), [['3', '0', '2', '5'], ['2', '2', '1', '5']], 'per day: allowed, sent for approval, denied, total')
    t.equal((await rowsOf('Decisions by outcome per day')).length, 8, 'a column for each day the 7 days touch')
    // The keyboard walks the columns; each is read out.
    await chart.focus()
    await page.keyboard.press('End')
    t.match(await main.locator('.chart-readout').first().textContent(), /: 5 decisions \(2 allowed, 2 sent for approval, 1 denied\)$/)
    const stats = await main.locator('.stats').first().locator('dd').allTextContents()
    t.same(stats, ['10 min', '10 min', '1 (oldest waiting 2 min)'], 'median and 90th percentile wait, pending now')
    t.same(await rowsOf('Approvals by outcome'), [['Approved', '1'], ['Denied', '0'], ['Expired', '0'], ['Cancelled', '0']])
    t.same(await rowsOf('Denials by agent'), [['billing-bot', '2'], ['ghost-bot', '1']])
    t.same(await rowsOf('Denials by action'), [['billing.delete', '2'], ['tickets.read', '1']])
    t.same(await rowsOf('Leads by source'), [['spring-campaign', '2'], ['blog', '1']])
    t.equal(await main.getByRole('link', { name: 'billing.refund' }).count(), 1, 'what waits now links to it')
    await axe('overview')
    await page.setViewportSize({ width: 390, height: 844 })
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
    t.ok(overflow <= 0, `no sideways scrolling on a phone (${overflow} px)`)
    await axe('overview-phone')
    await page.setViewportSize({ width: 1280, height: 860 })
    // The last 24 hours, per hour, end where the server's clock is: day 1 is out.
    await page.getByLabel('Period').selectOption('24h')
    await page.getByRole('img', { name: /^Decisions by outcome per hour/ }).waitFor()
    t.equal(await main.locator('.chart-summary').first().textContent(), '5 decisions: 2 allowed, 2 sent for approval, 1 denied.')
    t.same((await rowsOf('Decisions by outcome per hour')).filter((row) => row[4] !== '0').map((row) => row.slice(1)), [['2', '2', '1', '5']])
  })

  await t.test('a monitor-mode policy shows its hits and what enforcing it would have changed', async (t) => {
    await open('Policies', 'Policies')
    await page.getByRole('link', { name: 'No exports (trial)' }).click()
    await page.getByRole('heading', { level: 2, name: 'Hits over time' }).waitFor()
    const summary = main.locator('.chart-summary')
    await summary.waitFor()
    t.equal(await summary.textContent(), '2 decisions in the last 30 days matched this policy in monitor mode; enforcing it would have changed 2 of them.')
    const rows = (await rowsOf('Hits per day of No exports (trial)')).filter((row) => row[3] !== '0')
    t.same(rows.map((row) => row.slice(1)), [['0', '2', '2']], 'same answer, would have changed, total')
    await page.waitForFunction(() => document.querySelector('section[aria-labelledby="versions-title"] tbody td:nth-child(3)')?.textContent?.startsWith('key “'))
    t.same((await rowsOf('Versions')).map((row) => row[2]), ['key “admin key”'], 'who wrote the version, by name')
    t.equal(typeof trial.policy_id, 'string')
    await axe('overview-policy-hits')
  })

  await t.test('the audit log reads in names, one line a row that opens to its data', async (t) => {
    await open('Audit', 'Audit log')
    await page.getByRole('table', { name: 'Audit events' }).waitFor()
    await page.waitForFunction(() => ![...document.querySelectorAll('td')].some((cell) => cell.textContent?.endsWith(' …')))
    const rows = await rowsOf('Audit events')
    const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/
    t.same(rows.filter((row) => uuid.test(`${row[2]} ${row[3]}`)), [], 'no actor or target shown as a raw id')
    t.ok(rows.some((row) => row[1] === 'policy.created' && row[2] === 'key “admin key”' && row[3] === 'policy “No deletes”'), 'a key and a policy by name')
    t.ok(rows.some((row) => row[1] === 'agent.created' && row[3] === 'billing-bot'), 'an agent by its handle')
    t.ok(rows.some((row) => row[1] === 'member.added' && row[3] === approverEmail), 'a person by email')
    t.ok(rows.some((row) => row[1] === 'approval.approved' && row[2] === `${vars.USER_EMAIL_A} (you)`), 'the signed-in person, by email')
    const data = page.locator('td details').first()
    t.equal(await data.locator('pre').isVisible(), false, 'the JSON is folded')
    await data.locator('summary').click()
    t.equal(await data.locator('pre').isVisible(), true, 'and opens')
    await axe('overview-audit')
  })

  await t.test('a Viewer sees the overview without the leads', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByLabel('Email').fill(viewerEmail)
    await page.getByLabel('Password').fill('a viewer passphrase')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor()
    await page.getByRole('heading', { level: 2, name: 'Top denials' }).waitFor()
    await waitLoaded()
    t.equal(await page.getByRole('heading', { name: 'Leads by source' }).count(), 0)
    t.equal(await main.locator('.chart-summary').first().textContent(), '10 decisions: 5 allowed, 2 sent for approval, 3 denied.')
    await axe('overview-viewer')
  })

  t.test('no script error and no Content-Security-Policy violation on any page', async (t) => {
    t.same(problems, [])
  })
}
