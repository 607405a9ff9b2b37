// The console's Spam section end to end, in a real Chromium against a live server (PGlite, or
// PostgreSQL with TEST_DATABASE_URL): an Owner turns the honeypot on, a bot's submission shows up
// as spam (never as a lead), Restore makes it a lead; an Owner exports and erases one person; the
// page passes axe; an Admin sees the settings read-only and no person-data section.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { serve } from '../../cli/serve.ts'
import { freePort } from '../../bench/lib.ts'
import { chromiumMissing, openConsoleBrowser } from '../support/browser.ts'
import { inviteAndAccept, productApp } from '../support/product-support.ts'

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
  // Organization A is the oldest, so its people read the leads (the default holder).
  await world.db.updateTable('organizations').set({ created_at: new Date(world.clock.now - 3_600_000) }).where('id', '=', vars.ORG_A!).execute()
  const adminEmail = `admin-${Date.now()}@example.com`
  await inviteAndAccept(world, vars.OWNER_KEY_A!, adminEmail, 'admin', 'an admin passphrase')

  const { page, problems, axe } = await openConsoleBrowser(t)
  const spamSection = () => page.getByRole('region', { name: 'Spam kept apart' })

  async function signIn(email: string, password: string): Promise<void> {
    await page.goto(`${origin}/console/`)
    await page.getByLabel('Email').fill(email)
    await page.getByLabel('Password').fill(password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('link', { name: 'Approvals' }).waitFor()
    await page.getByRole('navigation').getByRole('link', { name: 'Leads', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Leads' }).waitFor()
    await page.getByRole('heading', { level: 2, name: 'Spam' }).waitFor()
  }

  await t.test('an Owner turns the honeypot on; a bot is kept as spam and restored as a lead', async (t) => {
    await signIn(vars.USER_EMAIL_A!, vars.USER_PASSWORD_A!)
    const form = page.getByRole('form', { name: 'Newsletter spam settings' })
    await form.getByLabel('Honeypot field').fill('website')
    await form.getByRole('button', { name: 'Save' }).click()
    await form.getByRole('status').filter({ hasText: 'Saved.' }).waitFor()
    const saved = await world.call('GET', '/leads/lists/newsletter/spam', { token: vars.OWNER_KEY_A })
    t.match(await saved.json(), { honeypot_field: 'website', captcha_provider: null })

    const posted = await world.call('POST', '/newsletter', { json: { email: 'bot@spam.example', website: 'http://x.example' } })
    t.equal(posted.status, 200)
    await spamSection().getByRole('button', { name: 'Refresh' }).click()
    await spamSection().getByRole('table', { name: 'Spam' }).getByText('bot@spam.example').waitFor()
    await page.waitForFunction(() => !document.querySelector('main')?.textContent?.includes('Loading…'))
    await axe('leads-spam')
    await spamSection().getByRole('button', { name: 'Restore bot@spam.example as a lead' }).click()
    await spamSection().getByRole('status').filter({ hasText: 'bot@spam.example is a lead of Newsletter now.' }).waitFor()
    const leads = await (await world.call('GET', '/leads/newsletter', { token: vars.OWNER_KEY_A })).json()
    t.ok(leads.leads.some((lead: { email: string }) => lead.email === 'bot@spam.example'))
  })

  await t.test("an Owner exports and erases one person's data", async (t) => {
    t.equal((await world.call('POST', '/demo-request', { json: { first_name: 'Ada', last_name: 'L', email: 'Ada.Gone@Example.com', company: 'E', linkedin: 'https://l.example/ada' } })).status, 200)
    const person = page.getByRole('form', { name: "A person's data" })
    await person.getByLabel('Email').fill('ada.gone@example.com')
    const downloading = page.waitForEvent('download')
    await person.getByRole('button', { name: 'Export' }).click()
    const download = await downloading
    const exported = JSON.parse(readFileSync((await download.path())!, 'utf8'))
    t.equal(exported.records.demo_requests[0].email, 'Ada.Gone@Example.com')
    page.once('dialog', (dialog) => void dialog.accept())
    await person.getByRole('button', { name: 'Erase' }).click()
    await person.getByRole('status').filter({ hasText: 'Erased 1 records.' }).waitFor()
    const left = await world.db.selectFrom('demo_requests').select('id').where('email_normalized', '=', 'ada.gone@example.com').execute()
    t.same(left, [])
  })

  await t.test('an Admin reads the settings without changing them, and has no person-data section', async (t) => {
    await page.getByRole('button', { name: 'Sign out' }).click()
    await signIn(adminEmail, 'an admin passphrase')
    const form = page.getByRole('form', { name: 'Newsletter spam settings' })
    t.equal(await form.getByLabel('Honeypot field').inputValue(), 'website')
    t.ok(await form.getByLabel('Honeypot field').isDisabled())
    t.equal(await page.getByRole('form', { name: "A person's data" }).count(), 0)
    await axe('leads-spam-admin')
  })

  t.same(problems, [], 'no console error on the page')
}
