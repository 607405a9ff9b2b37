// The one rule for an email address, for leads, members and operator commands alike.

/** The longest address accepted anywhere (RFC 5321's 256-octet path, less its angle brackets). */
export const MAX_EMAIL_LENGTH = 254

const CONTROL_OR_SPACE = /[\s\u0000-\u001f\u007f-\u009f]/u
const LOCAL_PART = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-\u0080-\uffff]+$/u
const DOMAIN_LABEL = /^(?!-)[\p{L}\p{N}-]{1,63}(?<!-)$/u

/**
 * Practical RFC 5321 address check: one "@", a local part of at most 64 characters and no
 * leading, trailing or doubled dot, at most 254 characters in all, a dotted domain, no spaces
 * or control characters. Accepts o'brien@example.com and a+tag@example.com.
 */
export function isValidEmail(email: string): boolean {
  if (email.length > MAX_EMAIL_LENGTH || CONTROL_OR_SPACE.test(email)) return false
  const at = email.indexOf('@')
  if (at <= 0 || at !== email.lastIndexOf('@')) return false
  const local = email.slice(0, at)
  const domain = email.slice(at + 1)
  if (local.length > 64 || !LOCAL_PART.test(local)) return false
  if (local.startsWith('.') || local.endsWith('.') || local.includes('..')) return false
  const labels = domain.split('.')
  if (labels.length < 2 || !labels.every((label) => DOMAIN_LABEL.test(label))) return false
  const tld = labels[labels.length - 1]!
  return tld.length >= 2 && !/^\d+$/.test(tld)
}

/** The form two addresses are compared in: trimmed, lower case. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase()
}
