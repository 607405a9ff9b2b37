// Shared setup of the lead spam and erasure tests: a test app whose leads belong to fixture
// organization A (LEADS_ORGANIZATION_ID, so stored leads are audited), and a local CAPTCHA verify
// stub (node:http) that answers as Turnstile, hCaptcha and reCAPTCHA do.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Test } from 'tap'
import { seedWorld } from '../../fixtures/seed.ts'
import { createTestApp, openTestDatabase } from './helpers.ts'
import type { ProductApp } from './product-support.ts'

export async function leadsApp(t: Test, env: Record<string, string> = {}): Promise<ProductApp> {
  const database = await openTestDatabase(t)
  const at = Date.parse('2026-12-06T00:00:00Z')
  const vars = await seedWorld(database.db, at)
  const app = await createTestApp(t, { database, env: { LEADS_ORGANIZATION_ID: vars.ORG_A!, CAPTCHA_ALLOW_PRIVATE: 'true', ...env } })
  return {
    ...app,
    vars,
    call(method, path, { token, json, body, headers = {}, conn } = {}) {
      const all = new Headers(headers)
      if (token !== undefined) all.set('authorization', `Bearer ${token}`)
      return app.request(path, { method, headers: all, json, body, conn })
    },
  }
}

export interface CaptchaStub {
  readonly url: string
  /** Every verification asked, as the form fields received. */
  readonly calls: Record<string, string>[]
  close(): Promise<void>
}

/** Tokens starting with "good" are valid; anything else is refused with invalid-input-response. */
export async function startCaptchaStub(t: Test): Promise<CaptchaStub> {
  const calls: Record<string, string>[] = []
  const server: Server = createServer((request, response) => {
    let text = ''
    request.setEncoding('utf8')
    request.on('data', (chunk: string) => (text += chunk))
    request.on('end', () => {
      const fields = Object.fromEntries(new URLSearchParams(text))
      calls.push(fields)
      const valid = (fields.response ?? '').startsWith('good')
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(valid ? { success: true, hostname: 'localhost' } : { success: false, 'error-codes': ['invalid-input-response'] }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/siteverify`
  let closed = false
  const close = () => {
    if (closed) return Promise.resolve()
    closed = true
    server.closeAllConnections()
    return new Promise<void>((resolve) => server.close(() => resolve()))
  }
  t.teardown(close)
  return { url, calls, close }
}

/** A URL where nothing listens: a stub started and closed again (the provider is down). */
export async function downUrl(t: Test): Promise<string> {
  const stub = await startCaptchaStub(t)
  await stub.close()
  return stub.url
}
