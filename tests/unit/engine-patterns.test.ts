// IAM-style patterns: `*` is the only metacharacter, everything else literal and case-sensitive.
// Checked against a reference built from an escaped regular expression, and for linear time on
// patterns that make a backtracking matcher explode.
import t from 'tap'
import fc from 'fast-check'
import { compilePattern, compilePatternList, isExactPattern, matchesPattern } from '../../engine/patterns.ts'

function reference(pattern: string): RegExp {
  const escaped = pattern.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[\\s\\S]*')
  return new RegExp(`^${escaped}$`)
}

t.test('examples', async (t) => {
  t.equal(matchesPattern('payments.*', 'payments.refund'), true)
  t.equal(matchesPattern('payments.*', 'payments.'), true, '* matches the empty run')
  t.equal(matchesPattern('payments.*', 'payments'), false)
  t.equal(matchesPattern('payments.*', 'Payments.refund'), false, 'case-sensitive')
  t.equal(matchesPattern('*', ''), true)
  t.equal(matchesPattern('', ''), true)
  t.equal(matchesPattern('', 'x'), false)
  t.equal(matchesPattern('a?c', 'abc'), false, '? is literal')
  t.equal(matchesPattern('a?c', 'a?c'), true)
  t.equal(matchesPattern('[ab]', 'a'), false, 'brackets are literal')
  t.equal(matchesPattern('a.c', 'abc'), false, 'a dot is literal')
  t.equal(matchesPattern('*.refund', 'payments.refund'), true)
  t.equal(matchesPattern('p*s.r*d', 'payments.refund'), true)
  t.equal(matchesPattern('a*a', 'a'), false, 'prefix and suffix may not overlap')
  t.equal(matchesPattern('ab*b*bc', 'abbc'), false)
  t.equal(matchesPattern('ab*b*bc', 'abbbc'), true)
  t.equal(matchesPattern('**', 'anything'), true)
  t.equal(isExactPattern('email.send'), true)
  t.equal(isExactPattern('email.*'), false)
})

t.test('lists: any pattern matches; an empty list matches nothing', async (t) => {
  const match = compilePatternList(['email.send', 'payments.*'])
  t.equal(match('email.send'), true)
  t.equal(match('payments.refund'), true)
  t.equal(match('email.read'), false)
  t.equal(compilePatternList([])('x'), false)
  t.equal(compilePatternList(['a', '*'])('zzz'), true)
})

t.test('agrees with an escaped-regex reference on random patterns and values', async () => {
  const alphabet = fc.constantFrom('a', 'b', '.', '*', '?', '\\', '(', '$')
  const text = fc.string({ unit: fc.constantFrom('a', 'b', '.', '*', '?', '\\', '(', '$'), maxLength: 12 })
  await fc.assert(
    fc.property(fc.string({ unit: alphabet, maxLength: 10 }), text, (pattern, value) => {
      return compilePattern(pattern)(value) === reference(pattern).test(value)
    }),
    { numRuns: 5000 },
  )
  await fc.assert(
    fc.property(fc.array(fc.string({ unit: alphabet, maxLength: 6 }), { maxLength: 4 }), text, (patterns, value) => {
      return compilePatternList(patterns)(value) === patterns.some((pattern) => reference(pattern).test(value))
    }),
    { numRuns: 2000 },
  )
})

t.test('values that match: every pattern matches the strings it was built from', async () => {
  await fc.assert(
    fc.property(fc.array(fc.string({ maxLength: 5 }), { minLength: 1, maxLength: 5 }), fc.array(fc.string({ maxLength: 5 }), { maxLength: 5 }), (literals, fills) => {
      const clean = literals.map((part) => part.replaceAll('*', ''))
      const pattern = clean.join('*')
      const value = clean.map((part, i) => (i === 0 ? part : (fills[i] ?? '') + part)).join('')
      return compilePattern(pattern)(value)
    }),
    { numRuns: 2000 },
  )
})

t.test('many stars stay linear: no backtracking blow-up', async (t) => {
  const pattern = '*a'.repeat(60) + '*b*'
  const value = 'a'.repeat(20_000)
  // A backtracking matcher needs astronomically many steps here; this one does a few thousand
  // indexOf calls. No timing assertion: finishing at all is the test.
  t.equal(compilePattern(pattern)(value), false)
  t.equal(compilePattern(pattern)(value + 'b'), true)
})
