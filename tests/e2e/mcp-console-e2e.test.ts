// The console's side of MCP governance, in a real Chromium against a live server (as
// tests/e2e/console-e2e.test.ts): the approval page an MCP client's URL elicitation opens
// (#/approvals/ID), reached signed out, showing the tool and its arguments, approved there, after
// which the call goes through once; and the decision log showing MCP tool calls with their tool,
// arguments and where they came from, filtered to gateway traffic.
import t from 'tap'
import { serve } from '../../cli/serve.ts'
import { freePort } from '../../bench/lib.ts'
import { insertPolicy } from '../support/governance-support.ts'
import { chromiumMissing, openConsoleBrowser } from '../support/browser.ts'
import { startUpstream } from '../../examples/mcp-upstream.ts'
import { modernClient } from '../support/mcp-support.ts'
import { buildPorc, toolhiveRequest, type ToolhiveConfig } from '../support/mcp-toolhive-client.ts'
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
  const world = await productApp(t, { env: { PORT: String(port), HOST: '127.0.0.1', APP_URL: origin, PRODUCT_API_URL: origin, BASE_URL: origin, MCP_ALLOW_PRIVATE: 'true' } })
  const served = await serve(world.app, world.config)
  t.teardown(() => served.close())
  const { vars } = world
  const A = vars.ORG_A!

  const agent = await jsonOf(await world.call('POST', '/agents', { token: vars.ADMIN_KEY_A, json: { handle: 'github-agent' } }))
  const key: string = (await jsonOf(await world.call('POST', `/agents/${agent.agent_id}/keys`, { token: vars.ADMIN_KEY_A, json: {} }))).api_key
  await insertPolicy(world.db, A, { name: 'Read issues', effect: 'allow', actions: ['mcp.github.list_issues'] }, new Date(world.clock.now))
  await insertPolicy(world.db, A, { name: 'New issues need a person', effect: 'require_approval', actions: ['mcp.github.create_issue'] }, new Date(world.clock.now))
  const config: ToolhiveConfig = { url: `http://toolhive:${key}@127.0.0.1/toolhive`, claimMapping: 'standard', context: { includeArgs: true, includeOperation: true } }
  const ask = async (tool: string, args: Record<string, unknown>) =>
    jsonOf(await world.app.fetch(toolhiveRequest(config, buildPorc(config, 'github', 'tool', 'call', tool, { sub: 'alice@example.com' }, args)), { remoteAddress: '127.0.0.1' }))

  const { page, problems, axe } = await openConsoleBrowser(t)

  const args = { repo: 'acme/site', title: 'Broken link on the pricing page' }

  await t.test('the approval link opens the approval after sign-in; approving it lets the call through once', async (t) => {
    const asked = await ask('create_issue', args)
    t.same([asked.allow, asked.decision], [false, 'require_approval'])
    const id = asked.approval.approval_id
    await page.goto(`${origin}/console/#/approvals/${id}`)
    await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
    await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Approval' }).waitFor()
    t.match(page.url(), `#/approvals/${id}`, 'the address still names the approval')
    const card = page.getByRole('region', { name: /mcp\.github\.create_issue by github-agent/ })
    await card.waitFor()
    t.match(await card.textContent(), /Tool create_issue on server github/)
    t.match(await card.textContent(), /Broken link on the pricing page/)
    t.match(await card.textContent(), /alice@example\.com/, 'on behalf of the person ToolHive authenticated')
    await page.locator('main').getByText('Waiting for a decision.').waitFor()
    await axe('mcp-approval')
    await card.getByRole('button', { name: 'Approve' }).click()
    await page.locator('main').getByText(/^Approved: the call goes through once/).waitFor()
    t.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0, 'nothing left to decide')
    const retried = await ask('create_issue', args)
    t.same([retried.allow, retried.reasons], [true, [{ rule: 'approval' }]])
    t.same((await ask('create_issue', args)).allow, false, 'once')
  })

  await t.test('the decision log shows an MCP tool call with its tool, arguments and origin', async (t) => {
    await ask('list_issues', { repo: 'acme/site', state: 'open' })
    await page.getByRole('navigation').getByRole('link', { name: 'Decisions', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Decisions' }).waitFor()
    await page.getByLabel('Through').selectOption('toolhive')
    await page.getByRole('button', { name: 'Filter' }).click()
    const row = page.getByRole('row').filter({ hasText: 'mcp.github.list_issues' })
    await row.first().waitFor()
    t.match(await row.first().textContent(), /Tool list_issues on server github/)
    t.match(await row.first().textContent(), /"state":"open"/)
    t.match(await row.first().textContent(), /ToolHive/)
    await axe('mcp-decisions')
    await row.first().getByRole('link', { name: /Details/ }).click()
    await page.getByRole('heading', { level: 1, name: /Decision/ }).waitFor()
    // The heading is drawn before the decision is loaded: wait for the details themselves.
    await page.getByText('Tool arguments').waitFor()
    const text = await page.locator('main').textContent()
    t.match(text, /ThroughToolHive/)
    t.match(text, /On behalf ofalice@example\.com/)
    t.match(text, /Tool arguments/)
    await axe('mcp-decision')
  })

  await t.test('a call through the MCP gateway shows its tool, arguments and client', async (t) => {
    const upstream = await startUpstream()
    t.teardown(() => upstream.close())
    t.equal((await world.call('POST', '/mcp/servers', { token: vars.ADMIN_KEY_A, json: { name: 'demo', url: upstream.url } })).status, 201)
    await insertPolicy(world.db, A, { name: 'Echo', effect: 'allow', actions: ['mcp.demo.echo'] }, new Date(world.clock.now))
    const client = await modernClient(t, world, key)
    const result = await client.callTool({ name: 'demo__echo', arguments: { text: 'seen in the console' } })
    t.notOk(result.isError)
    await page.getByRole('navigation').getByRole('link', { name: 'Approvals', exact: true }).click()
    await page.getByRole('navigation').getByRole('link', { name: 'Decisions', exact: true }).click()
    await page.getByLabel('Through').selectOption('mcp')
    await page.getByRole('button', { name: 'Filter' }).click()
    // The unfiltered page loads first: wait for the filtered one, which holds no ToolHive call.
    await page.waitForFunction(() => [...document.querySelectorAll('tbody tr')].every((row) => !row.textContent?.includes('mcp.github.')))
    const row = page.getByRole('row').filter({ hasText: 'mcp.demo.echo' })
    await row.waitFor()
    t.equal(await page.getByRole('row').filter({ hasText: 'ToolHive' }).count(), 0, 'only gateway traffic')
    t.match(await row.textContent(), /Tool echo on server demo/)
    t.match(await row.textContent(), /"text":"seen in the console"/)
    t.match(await row.textContent(), /MCP gateway/)
    await row.getByRole('link', { name: /Details/ }).click()
    await page.getByRole('heading', { level: 1, name: /Decision/ }).waitFor()
    // The heading is drawn before the decision is loaded: wait for the details themselves.
    await page.getByText('Tool arguments').waitFor()
    const text = await page.locator('main').textContent()
    t.match(text, /ThroughMCP gateway/)
    t.match(text, /MCP clientmodern-test-client 2\.0\.0/)
    t.match(text, /seen in the console/)
    await axe('mcp-gateway-decision')
  })

  t.test('no script error and no Content-Security-Policy violation', async (t) => {
    t.same(problems, [])
  })
}
