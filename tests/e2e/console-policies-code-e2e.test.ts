// The console's "Policies as code" view, end to end in a real Chromium against a live server:
// start from the policies in force, edit the file, see the plan (a change field by field, a
// creation, an archive, the replay of a logged decision), apply it with the keyboard, and a
// plan made stale by a change elsewhere refused; axe-core on each state. And the TypeScript
// client bundled and run inside the same Chromium against the server.
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
  const created = await world.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: admin, json: { name: 'Old rule', effect: 'deny', actions: ['files.delete'] } })
  if (created.status !== 201) throw new Error(`POST /policies answered ${created.status}`)
  const agent = await world.call('POST', '/agents', { token: admin, json: { handle: 'report-bot' } })
  if (agent.status !== 201) throw new Error(`POST /agents answered ${agent.status}`)
  const logged = await world.call('POST', '/decisions', { token: admin, json: { agent: 'report-bot', action: 'reports.read' } })
  if (logged.status !== 200) throw new Error(`POST /decisions answered ${logged.status}`)

  const { page, problems, axe } = await openConsoleBrowser(t)
  await page.goto(`${origin}/console/`)
  await page.getByRole('button', { name: 'Sign in' }).waitFor()
  await page.getByLabel('Email').fill(vars.USER_EMAIL_A!)
  await page.getByLabel('Password').fill(vars.USER_PASSWORD_A!)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('navigation').getByRole('link', { name: 'Policies', exact: true }).click()
  await page.getByRole('heading', { level: 1, name: 'Policies' }).waitFor()

  await t.test('plan a file edited from the policies in force, then apply it', async (t) => {
    await page.getByRole('link', { name: 'Policies as code' }).click()
    await page.getByRole('heading', { level: 1, name: 'Policies as code' }).waitFor()
    await axe('policies-code')
    await page.getByRole('button', { name: 'Start from the policies in force' }).click()
    const file = page.getByLabel('Policy file (JSON)')
    await page.waitForFunction(() => (document.querySelector('textarea.code') as HTMLTextAreaElement | null)?.value.includes('Old rule'))
    const loaded = JSON.parse(await file.inputValue())
    t.same(loaded.policies.map((p: any) => p.name).sort(), ['Old rule', 'Payments need approval (A)'])
    const edited = {
      policies: [
        { ...loaded.policies.find((p: any) => p.name.startsWith('Payments')), mode: 'monitor' },
        { name: 'Reports allowed', effect: 'allow', actions: ['reports.*'] },
      ],
    }
    await file.fill(JSON.stringify(edited, null, 2))
    await page.getByRole('button', { name: 'Plan', exact: true }).click()
    const plan = page.getByRole('region', { name: 'Plan' })
    await plan.waitFor()
    t.equal(await plan.getByRole('status').textContent(), '1 to create, 1 to change, 1 to archive, 0 unchanged.')
    t.match(await plan.getByRole('table', { name: 'Policies changed' }).textContent(), /Payments need approval \(A\)1 → 2mode: enforce → monitor/)
    t.match(await plan.getByRole('table', { name: 'Policies created' }).textContent(), /Reports allowed/)
    t.match(await plan.getByRole('table', { name: 'Policies archived' }).textContent(), /Old rule/)
    t.match(await plan.textContent(), /1 logged decision replayed; 1 deny→allow\./)
    t.equal(await page.evaluate(() => document.activeElement?.id), 'plan-title', 'focus moves to the plan')
    await axe('policies-code-plan')

    const apply = page.getByRole('button', { name: 'Apply this plan' })
    await apply.focus()
    await page.keyboard.press('Enter')
    await page.locator('#main').getByText('Applied: 1 created, 1 changed, 1 archived.').waitFor()
    t.notOk(await apply.isVisible(), 'an applied plan cannot be applied twice')
    const inForce = await jsonOf(await world.call('GET', `/policies?organization_id=${vars.ORG_A}`, { token: admin }))
    t.same(inForce.policies.map((p: any) => [p.name, p.mode]).sort(), [['Payments need approval (A)', 'monitor'], ['Reports allowed', 'enforce']])
    await axe('policies-code-applied')
  })

  await t.test('a plan made stale by a change elsewhere is refused', async (t) => {
    const file = page.getByLabel('Policy file (JSON)')
    await file.fill(JSON.stringify({ policies: [{ name: 'Only this', effect: 'deny', actions: ['x.*'] }] }))
    await page.getByRole('button', { name: 'Plan', exact: true }).click()
    await page.getByRole('region', { name: 'Plan' }).waitFor()
    const other = await world.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: admin, json: { name: 'Meanwhile', effect: 'deny', actions: ['y.*'] } })
    t.equal(other.status, 201)
    await page.getByRole('button', { name: 'Apply this plan' }).click()
    const alert = page.getByRole('alert')
    await alert.waitFor()
    t.equal(await alert.textContent(), 'The policies changed since the plan: plan again. Plan again to see the new difference.')
    t.notOk(await page.getByRole('button', { name: 'Apply this plan' }).isVisible())
    await file.fill('{"policies": ')
    await page.getByRole('button', { name: 'Plan', exact: true }).click()
    t.match(await page.getByRole('alert').textContent(), /^The file is not JSON/)
    await axe('policies-code-errors')
  })

  await t.test('the TypeScript client runs in the browser, bundled as clients/typescript/build.mjs bundles it', async (t) => {
    const { build } = await import('esbuild')
    const bundle = await build({ entryPoints: ['clients/typescript/src/index.ts'], bundle: true, format: 'esm', platform: 'neutral', target: 'es2022', write: false })
    const code = bundle.outputFiles[0]!.text
    // A page of the API's origin without the console's CSP: the client's own fetches, same-origin.
    await page.route(`${origin}/client-check.html`, (route) => route.fulfill({ contentType: 'text/html', body: '<!doctype html><html lang="en"><title>client</title></html>' }))
    await page.goto(`${origin}/client-check.html`)
    const answer = await page.evaluate(
      async ([source, key]) => {
        const url = URL.createObjectURL(new Blob([source!], { type: 'text/javascript' }))
        const { Steward, ActionDenied, NotFoundError } = await import(url)
        const steward = new Steward({ apiKey: key, baseUrl: location.origin })
        const organization = await steward.organization.get()
        const names: string[] = []
        for await (const policy of steward.policies.list({ limit: 1 })) names.push(policy.name)
        const denied = await steward.guard(async () => 'ran', { action: 'browser.never', agent: 'report-bot' })().catch((e: unknown) => e)
        const missing = await steward.policies.get(crypto.randomUUID()).catch((e: unknown) => e)
        return { organization: organization.organization_id, names: names.length, denied: denied instanceof ActionDenied, missing: missing instanceof NotFoundError ? missing.status : null }
      },
      [code, admin],
    )
    t.same(answer, { organization: vars.ORG_A, names: 3, denied: true, missing: 404 })
  })

  t.same(problems, [], 'no errors in the page')
}
