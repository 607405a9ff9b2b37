// Shared setup for the product API tests: a test app with the fixture world seeded, and a
// request helper that carries a bearer token.
import type { Test } from 'tap'
import { seedWorld } from '../../fixtures/seed.ts'
import type { ConnectionInfo } from '../../http/context.ts'
import { createTestApp, type TestApp } from './helpers.ts'

export interface ProductApp extends TestApp {
  readonly vars: Record<string, string>
  call(method: string, path: string, options?: { token?: string; json?: unknown; body?: string; headers?: Record<string, string>; conn?: ConnectionInfo }): Promise<Response>
}

export async function productApp(t: Test, options: Parameters<typeof createTestApp>[1] = {}): Promise<ProductApp> {
  const app = await createTestApp(t, options)
  const vars = await seedWorld(app.db, app.clock.now)
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

export async function jsonOf(response: Response): Promise<any> {
  const text = await response.text()
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`not JSON (${response.status}): ${text.slice(0, 200)}`)
  }
}

export function form(fields: Record<string, string>): { body: string; headers: Record<string, string> } {
  return { body: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } }
}

/**
 * Brings a user into the inviter's organization the way a person does: an invitation, then an
 * accept with the secret (a new account takes the password; an existing one must give its own).
 * Returns the membership the accept answered with.
 */
export async function inviteAndAccept(app: ProductApp, inviterToken: string, email: string, role: string, password: string): Promise<any> {
  const invited = await app.call('POST', '/invitations', { token: inviterToken, json: { email, role } })
  if (invited.status !== 201) throw new Error(`POST /invitations answered ${invited.status}: ${await invited.text()}`)
  const { token } = await jsonOf(invited)
  const accepted = await app.call('POST', '/invitations/accept', { json: { token, password } })
  if (accepted.status !== 201) throw new Error(`POST /invitations/accept answered ${accepted.status}: ${await accepted.text()}`)
  return jsonOf(accepted)
}
