// The agent page's budgets, end to end in a real Chromium against a live server: each limit
// that applies to the agent with a meter of used against max, what remains and when the window
// resets (console/js/pages/agent-usage.js over GET /agents/{id}/usage). axe-core on the page.
import t from 'tap'
import { serve } from '../../cli/serve.ts'
import { freePort } from '../../bench/lib.ts'
import { chromiumMissing, openConsoleBrowser } from '../support/browser.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

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
  const admin = vars.ADMIN_KEY_A!
  world.clock.now = Date.parse('2026-12-06T09:00:00.000Z')
  async function ok(response: Promise<Response>, what: string, status = 201): Promise<any> {
    const answer = await response
    if (answer.status !== status) throw new Error(`${what} answered ${answer.status}: ${await answer.text()}`)
    return jsonOf(answer)
  }
  await ok(
    world.call('POST', `/policies?organization_id=${vars.ORG_A}`, {
      token: admin,
      json: {
        name: 'Refunds',
        effect: 'allow',
        agents: ['billing-bot'],
        actions: ['payments.refund'],
        limits: [
          { name: 'daily refunds', kind: 'spend', max: 25000, amount: 'int(args.amount_cents)', currency: 'EUR', window: { type: 'day', tz: 'Europe/Paris' } },
          { name: 'refunds an hour', kind: 'count', max: 5, window: { type: 'hour' }, mode: 'monitor' },
        ],
      },
    }),
    'POST /policies',
  )
  const agent = await ok(world.call('POST', '/agents', { token: admin, json: { handle: 'billing-bot' } }), 'POST /agents')
  for (const cents of [10000, 5000]) await ok(world.call('POST', '/decisions', { token: admin, json: { agent: 'billing-bot', action: 'payments.refund', resource: 'order/1', args: { amount_cents: cents } } }), 'POST /decisions', 200)

  const { page, axe } = await openConsoleBrowser(t)
  await t.test("the agent page shows each limit's use against its max", async (t) => {
    await page.goto(`${origin}/console/`)
    await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('navigation').waitFor()
    await page.goto(`${origin}/console/#/agents/${agent.agent_id}`)
    await page.getByRole('heading', { level: 2, name: 'Budgets' }).waitFor()
    const table = page.getByRole('table', { name: 'Budgets', includeHidden: true })
    await table.waitFor({ state: 'attached' })
    const rows = await table.evaluate((el) => [...el.querySelectorAll('tbody tr')].map((row) => [...row.children].map((cell) => cell.textContent)))
    t.same(
      rows.map((row) => [row[0], row[1], row[2], row[3], row[4], row[5]]),
      [
        ['daily refunds (Refunds)', 'payments.refund', 'agent', 'day (Europe/Paris)', ' €150.00 / €250.00', '€100.00'],
        ['refunds an hour (Refunds, monitor)', 'payments.refund', 'agent', 'hour (UTC)', ' 2 / 5', '3'],
      ],
    )
    const meters = await table.locator('meter').evaluateAll((els) => els.map((m) => [m.getAttribute('aria-label'), (m as HTMLMeterElement).value, (m as HTMLMeterElement).max]))
    t.same(meters, [
      ['daily refunds: €150.00 used of €250.00', 15000, 25000],
      ['refunds an hour: 2 used of 5', 2, 5],
    ])
    await axe('agent-budgets')
  })
}
