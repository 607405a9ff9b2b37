// A body's text as a JSON object or a form, checked for what the database and the rest of the
// code cannot take: deep nesting, NUL characters, lone surrogates and `__proto__` keys.
import { HttpError } from './errors.ts'

const MAX_DEPTH = 32
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/**
 * Parses a JSON object body and checks, without recursion, what the database and the rest of
 * the code cannot take: nesting deeper than 32, NUL characters (PostgreSQL rejects them in text,
 * SQLSTATE 22021), lone surrogates (stored silently as U+FFFD) and `__proto__` keys.
 */
export function parseJsonObject(text: string): Record<string, unknown> {
  if (text.trim() === '') throw new HttpError(400, 'Request body is empty; send a JSON object')
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new HttpError(400, 'Request body is not valid JSON')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'Request body must be a JSON object')
  }
  checkJsonValue(value)
  return value as Record<string, unknown>
}

function checkJsonValue(root: unknown): void {
  const stack: Array<[unknown, number]> = [[root, 1]]
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!
    if (typeof value === 'string') {
      checkString(value)
    } else if (typeof value === 'object' && value !== null) {
      if (depth > MAX_DEPTH) throw new HttpError(400, `Request body is nested more than ${MAX_DEPTH} levels deep`)
      if (Array.isArray(value)) {
        for (const item of value) stack.push([item, depth + 1])
      } else {
        for (const key of Object.keys(value)) {
          if (key === '__proto__') throw new HttpError(400, 'Request body contains the forbidden key "__proto__"')
          checkString(key)
          stack.push([(value as Record<string, unknown>)[key], depth + 1])
        }
      }
    }
  }
}

/**
 * What PostgreSQL text cannot hold: NUL (refused, SQLSTATE 22021) and lone UTF-16 surrogates
 * (not Unicode; stored silently as U+FFFD, so the value read back differs from the one sent).
 */
export function unsafeTextProblem(text: string): 'nul' | 'surrogate' | null {
  if (text.includes('\u0000')) return 'nul'
  if (LONE_SURROGATE.test(text)) return 'surrogate'
  return null
}

function checkString(value: string): void {
  const problem = unsafeTextProblem(value)
  if (problem === 'nul') throw new HttpError(400, 'Request body contains a NUL character')
  if (problem === 'surrogate') throw new HttpError(400, 'Request body contains an unpaired UTF-16 surrogate')
}

/** Body of a form post (`application/x-www-form-urlencoded`), with the same string checks. */
export function parseForm(text: string): Record<string, string> {
  const out: Record<string, string> = Object.create(null)
  for (const [key, value] of new URLSearchParams(text)) {
    if (key === '__proto__') throw new HttpError(400, 'Request body contains the forbidden key "__proto__"')
    checkString(key)
    checkString(value)
    if (key in out) throw new HttpError(400, `Parameter ${key} is repeated`)
    out[key] = value
  }
  return out
}
