// IAM-style patterns for policy agents, actions and resources: `*` matches any run of characters
// (including none); every other character is literal and case-sensitive. There is deliberately
// no `?`, no character class and no escape, so a pattern can never be read two ways.
//
// Patterns compile to plain string operations, never to a RegExp: a pattern such as
// `*a*a*a*a*b` against a long value would backtrack exponentially in a regex engine, while the
// greedy segment search below stays linear in the number of segments times the value length.

/** Tests one value against a compiled pattern (or list of patterns). */
export type Matcher = (value: string) => boolean

export const WILDCARD = '*'

const matchAll: Matcher = () => true
const matchNone: Matcher = () => false

/** True when the pattern has no `*`, so it can only match the identical string. */
export function isExactPattern(pattern: string): boolean {
  return !pattern.includes(WILDCARD)
}

/** Compiles one pattern into the cheapest matcher that implements it. */
export function compilePattern(pattern: string): Matcher {
  if (isExactPattern(pattern)) return (value) => value === pattern
  const segments = pattern.split(WILDCARD)
  const prefix = segments[0]!
  const suffix = segments[segments.length - 1]!
  const middle = segments.slice(1, -1).filter((segment) => segment.length > 0)
  if (prefix === '' && suffix === '' && middle.length === 0) return matchAll
  if (middle.length === 0) {
    if (suffix === '') return (value) => value.startsWith(prefix)
    if (prefix === '') return (value) => value.endsWith(suffix)
    const fixed = prefix.length + suffix.length
    return (value) => value.length >= fixed && value.startsWith(prefix) && value.endsWith(suffix)
  }
  return (value) => matchSegments(value, prefix, middle, suffix)
}

/**
 * `prefix*m1*m2*…*suffix`: prefix and suffix are anchored; each middle segment is found at its
 * leftmost position after the previous one. Leftmost is always safe for `*`-only globs (taking an
 * earlier occurrence never removes a later choice), so no backtracking is ever needed.
 */
function matchSegments(value: string, prefix: string, middle: readonly string[], suffix: string): boolean {
  if (value.length < prefix.length + suffix.length) return false
  if (!value.startsWith(prefix) || !value.endsWith(suffix)) return false
  const end = value.length - suffix.length
  let at = prefix.length
  for (const segment of middle) {
    const found = value.indexOf(segment, at)
    if (found < 0 || found + segment.length > end) return false
    at = found + segment.length
  }
  return true
}

/** A value matches a list when it matches any of its patterns; an empty list matches nothing. */
export function compilePatternList(patterns: readonly string[]): Matcher {
  const unique = [...new Set(patterns)]
  if (unique.length === 0) return matchNone
  if (unique.some((pattern) => pattern === WILDCARD)) return matchAll
  const exact = unique.filter(isExactPattern)
  const globs = unique.filter((pattern) => !isExactPattern(pattern)).map(compilePattern)
  if (globs.length === 0 && exact.length === 1) return compilePattern(exact[0]!)
  const exactSet = new Set(exact)
  if (globs.length === 0) return (value) => exactSet.has(value)
  return (value) => exactSet.has(value) || globs.some((match) => match(value))
}

/** One-off check, for callers that do not keep the compiled matcher. */
export function matchesPattern(pattern: string, value: string): boolean {
  return compilePattern(pattern)(value)
}
