// The signed links of lead mail: confirm a subscription, unsubscribe. A link is
// `<purpose>.<id>.<expiry>.<mac>`: HMAC-SHA256 under a key derived from the server's secrets key
// (services/secrets.ts), so only this server makes them, and any change to the id, the purpose or
// the expiry breaks the mac. They are the product's own single-purpose tokens, not credentials.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { Secrets } from './secrets.ts'

export type LinkPurpose = 'confirm' | 'unsubscribe'

const PREFIX: Record<LinkPurpose, string> = { confirm: 'c', unsubscribe: 'u' }
const SHAPE = /^([cu])\.([1-9]\d{0,15})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/
const LABEL = 'steward lead links v1'

export interface LeadLinks {
  /** False without a secrets key (PostgreSQL without SECRETS_KEY): no link can be made or checked. */
  readonly available: boolean
  /** A token for `id`; `expiresAt` in seconds since the epoch, 0 for none. Null when unavailable. */
  sign(purpose: LinkPurpose, id: number, expiresAt: number): string | null
  /** The id and expiry a genuine token of `purpose` carries; null for anything else. */
  verify(purpose: LinkPurpose, token: string): { id: number; expiresAt: number } | null
}

export function createLeadLinks(secrets: Secrets): LeadLinks {
  let key: Buffer | null | undefined
  const keyOf = (): Buffer | null => {
    if (key === undefined) key = secrets.box()?.derive(LABEL) ?? null
    return key
  }
  const mac = (k: Buffer, text: string) => createHmac('sha256', k).update(text).digest()
  return {
    get available() {
      return secrets.source !== 'missing'
    },
    sign(purpose, id, expiresAt) {
      const k = keyOf()
      if (!k) return null
      const text = `${PREFIX[purpose]}.${id}.${expiresAt}`
      return `${text}.${mac(k, text).toString('base64url')}`
    },
    verify(purpose, token) {
      const k = keyOf()
      const match = SHAPE.exec(token)
      if (!k || !match || match[1] !== PREFIX[purpose]) return null
      // Compared as text, not decoded: base64url's last character carries spare bits, so another
      // spelling of the same mac would otherwise pass (a second token for the same link).
      const given = Buffer.from(match[4]!)
      const expected = Buffer.from(mac(k, `${match[1]}.${match[2]}.${match[3]}`).toString('base64url'))
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
      return { id: Number(match[2]), expiresAt: Number(match[3]) }
    },
  }
}
