// Bearer secrets: API keys (stw_key_…), access tokens (stw_at_…), refresh tokens (stw_rt_…) and
// invitation secrets (stw_inv_…).
// GitHub's design: a recognisable prefix for secret scanners, 160 random bits, and a checksum so
// a mistyped or made-up token is refused before any database work. Only SHA-256 is stored: the
// secret is high-entropy, so a fast hash cannot be brute-forced.
import { sha256 } from '@oslojs/crypto/sha2'
import { constantTimeEqual } from '@oslojs/crypto/subtle'
import { encodeBase32LowerCaseNoPadding, encodeHexLowerCase } from '@oslojs/encoding'

export type SecretKind = 'key' | 'at' | 'rt' | 'inv'

const BODY_CHARS = 32 // 20 random bytes in base32
const CHECK_CHARS = 7 // 4 bytes of SHA-256 in base32
const SHAPE = /^stw_(key|at|rt|inv)_([a-z2-7]{32})([a-z2-7]{7})$/
const encoder = new TextEncoder()

function checksum(prefix: string, body: string): string {
  return encodeBase32LowerCaseNoPadding(sha256(encoder.encode(prefix + body)).subarray(0, 4))
}

export function generateSecret(kind: SecretKind): string {
  const bytes = new Uint8Array(20)
  crypto.getRandomValues(bytes)
  const prefix = `stw_${kind}_`
  const body = encodeBase32LowerCaseNoPadding(bytes)
  return prefix + body + checksum(prefix, body)
}

function matchShape(token: string): RegExpExecArray | null {
  return token.length > 8 + BODY_CHARS + CHECK_CHARS ? null : SHAPE.exec(token)
}

/** The kind a token's prefix names, if it has a secret's shape; its checksum is not checked. */
export function secretShape(token: string): SecretKind | null {
  return (matchShape(token)?.[1] as SecretKind | undefined) ?? null
}

/** The kind of a well-formed secret whose checksum matches, or null: no database work for junk. */
export function secretKind(token: string): SecretKind | null {
  const match = matchShape(token)
  if (!match) return null
  const kind = match[1] as SecretKind
  const expected = encoder.encode(checksum(`stw_${kind}_`, match[2]!))
  return constantTimeEqual(expected, encoder.encode(match[3]!)) ? kind : null
}

/** Anything that looks like one of our secrets, e.g. inside a URL query string. */
export const SECRET_PATTERN = /stw_(key|at|rt|inv)_[a-z2-7]{8,}/i

/** The stored form: SHA-256, lower-case hex. */
export function hashSecret(token: string): string {
  return encodeHexLowerCase(sha256(encoder.encode(token)))
}

/** Constant-time comparison of two stored hashes (defence in depth after an indexed lookup). */
export function sameHash(a: string, b: string): boolean {
  return a.length === b.length && constantTimeEqual(encoder.encode(a), encoder.encode(b))
}

/** What listings show to recognise a key: the kind prefix and the first 6 random characters. */
export function displayPrefix(token: string): string {
  return token.slice(0, token.indexOf('_', 4) + 1 + 6)
}
