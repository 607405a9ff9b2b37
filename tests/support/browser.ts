// A real Chromium for the console's end-to-end tests: Debian's /usr/bin/chromium driven by
// playwright-core, a throwaway profile, the page's own errors collected, and axe-core with a
// screenshot per checked page.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Page } from 'playwright-core'
import type { Test } from 'tap'
import { DATABASE_KIND } from './helpers.ts'

export const CHROMIUM = '/usr/bin/chromium'
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

/** Why the console tests cannot run here, or null when Chromium is installed. */
export function chromiumMissing(): string | null {
  return existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM}: install Debian's chromium package (apt-get install -y chromium) to run the console end-to-end tests`
}

export interface ConsoleBrowser {
  readonly page: Page
  /** Errors the page logged or threw (a failed fetch Chromium logs itself is not one). */
  readonly problems: string[]
  /** axe-core on the page as it is (no serious or critical violation), then its screenshot. */
  axe(name: string): Promise<void>
}

export async function openConsoleBrowser(t: Test): Promise<ConsoleBrowser> {
  const { chromium } = await import('playwright-core')
  const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
  const shots = process.env.CONSOLE_SCREENSHOTS || join(tmpdir(), 'steward-console-screenshots', DATABASE_KIND)
  mkdirSync(shots, { recursive: true })
  const profile = mkdtempSync(join(tmpdir(), 'steward-chromium-'))
  const browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 860 } })
  t.teardown(async () => {
    await browser.close()
    rmSync(profile, { recursive: true, force: true })
  })
  const page = browser.pages()[0] ?? (await browser.newPage())
  const problems: string[] = []
  page.on('console', (message) => {
    // A failed fetch is logged by Chromium itself (the pages show those answers); anything else is ours.
    if (message.type() === 'error' && !/^Failed to load resource: the server responded with a status of \d+/.test(message.text())) problems.push(message.text())
  })
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
  return {
    page,
    problems,
    async axe(name) {
      await page.evaluate(axeSource)
      const violations: Array<{ id: string; impact: string; help: string; nodes: unknown[] }> = await page.evaluate(
        // @ts-expect-error axe is the global axe.min.js defines
        async () => (await window.axe.run(document)).violations.map((v: any) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n: any) => n.target) })),
      )
      t.same(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), [], `axe-core: no serious or critical violation on ${name}`)
      await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true })
    },
  }
}
