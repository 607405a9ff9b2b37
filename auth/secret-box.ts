// Secrets at rest: AES-256-GCM under a key derived (HKDF-SHA256) from the server's secrets key,
// so a database dump alone never reveals what was sealed. Pure given the key: where the key comes
// from is services/secrets.ts. Each sealed value is bound to a context (the row it belongs to),
// so a value copied into another row does not open there.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'

/** Bytes of a secrets key (SECRETS_KEY, DATA_DIR/secrets.key). */
export const SECRETS_KEY_BYTES = 32

const VERSION = 'v1'
const IV_BYTES = 12
const TAG_BYTES = 16
const SEAL_LABEL = 'steward seal v1'

/** A sealed value that does not open: another key, another context, or altered text. */
export class SecretBoxError extends Error {
  override name = 'SecretBoxError'
}

export interface SecretBox {
  /** `v1.<iv>.<ciphertext and tag>` (base64url): `plaintext` sealed for `context`. */
  seal(plaintext: string, context: string): string
  /** The plaintext of a value sealed for `context`; SecretBoxError when it does not open. */
  open(sealed: string, context: string): string
  /**
   * A 32-byte key for one purpose (`label`, e.g. the MCP gateway's request-state HMAC),
   * independent of the sealing key and of every other label's.
   */
  derive(label: string): Buffer
}

/** The 32 bytes of a key written as base64url (or base64); null when it is not 32 bytes. */
export function parseSecretsKey(text: string): Buffer | null {
  const trimmed = text.trim()
  if (!/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) return null
  const bytes = Buffer.from(trimmed.replaceAll('+', '-').replaceAll('/', '_').replace(/=$/, ''), 'base64url')
  return bytes.length === SECRETS_KEY_BYTES ? bytes : null
}

/** A new random key, as base64url text (what a key file holds). */
export function newSecretsKey(): string {
  return randomBytes(SECRETS_KEY_BYTES).toString('base64url')
}

function derived(key: Uint8Array, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), label, 32))
}

export function createSecretBox(key: Uint8Array): SecretBox {
  if (key.length !== SECRETS_KEY_BYTES) throw new RangeError(`a secrets key is ${SECRETS_KEY_BYTES} bytes`)
  const root = Buffer.from(key)
  const sealKey = derived(root, SEAL_LABEL)
  return {
    seal(plaintext, context) {
      const iv = randomBytes(IV_BYTES)
      const cipher = createCipheriv('aes-256-gcm', sealKey, iv)
      cipher.setAAD(Buffer.from(context, 'utf8'))
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()])
      return `${VERSION}.${iv.toString('base64url')}.${body.toString('base64url')}`
    },
    open(sealed, context) {
      const [version, ivText, bodyText, extra] = sealed.split('.')
      if (version !== VERSION || ivText === undefined || bodyText === undefined || extra !== undefined) throw new SecretBoxError('not a sealed value')
      const iv = Buffer.from(ivText, 'base64url')
      const body = Buffer.from(bodyText, 'base64url')
      if (iv.length !== IV_BYTES || body.length < TAG_BYTES) throw new SecretBoxError('not a sealed value')
      try {
        const decipher = createDecipheriv('aes-256-gcm', sealKey, iv, { authTagLength: TAG_BYTES })
        decipher.setAAD(Buffer.from(context, 'utf8'))
        decipher.setAuthTag(body.subarray(body.length - TAG_BYTES))
        return Buffer.concat([decipher.update(body.subarray(0, body.length - TAG_BYTES)), decipher.final()]).toString('utf8')
      } catch {
        throw new SecretBoxError('the sealed value does not open with this key (SECRETS_KEY changed, or the value was altered)')
      }
    },
    derive(label) {
      if (label === SEAL_LABEL) throw new RangeError('that label is the sealing key')
      return derived(root, label)
    },
  }
}
