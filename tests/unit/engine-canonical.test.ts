// Canonical JSON (RFC 8785) and the hash an approval is bound to. Vectors are the RFC's own:
// its number serialization table (Appendix B), its sorting example and its main example.
import t from 'tap'
import fc from 'fast-check'
import { createHash } from 'node:crypto'
import { argsSha256, canonicalJson, CanonicalJsonError } from '../../engine/canonical.ts'

function fromBits(hex: string): number {
  const view = new DataView(new ArrayBuffer(8))
  view.setBigUint64(0, BigInt(`0x${hex}`))
  return view.getFloat64(0)
}

t.test('numbers: the RFC 8785 Appendix B table', async (t) => {
  const table: Array<[string, string]> = [
    ['0000000000000000', '0'],
    ['8000000000000000', '0'],
    ['0000000000000001', '5e-324'],
    ['8000000000000001', '-5e-324'],
    ['7fefffffffffffff', '1.7976931348623157e+308'],
    ['ffefffffffffffff', '-1.7976931348623157e+308'],
    ['4340000000000000', '9007199254740992'],
    ['c340000000000000', '-9007199254740992'],
    ['4430000000000000', '295147905179352830000'],
    ['44b52d02c7e14af5', '9.999999999999997e+22'],
    ['44b52d02c7e14af6', '1e+23'],
    ['44b52d02c7e14af7', '1.0000000000000001e+23'],
    ['444b1ae4d6e2ef4e', '999999999999999700000'],
    ['444b1ae4d6e2ef4f', '999999999999999900000'],
    ['444b1ae4d6e2ef50', '1e+21'],
    ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
    ['3eb0c6f7a0b5ed8d', '0.000001'],
    ['41b3de4355555553', '333333333.3333332'],
    ['41b3de4355555554', '333333333.33333325'],
    ['41b3de4355555555', '333333333.3333333'],
    ['41b3de4355555556', '333333333.3333334'],
    ['41b3de4355555557', '333333333.33333343'],
    ['becbf647612f3696', '-0.0000033333333333333333'],
    ['43143ff3c1cb0959', '1424953923781206.2'],
  ]
  for (const [bits, text] of table) t.equal(canonicalJson(fromBits(bits)), text, bits)
  for (const bits of ['7fffffffffffffff', '7ff0000000000000', 'fff0000000000000']) {
    t.throws(() => canonicalJson(fromBits(bits)), CanonicalJsonError, `${bits} (NaN or Infinity) is refused`)
  }
})

t.test('property sorting by UTF-16 code units (the RFC example)', async (t) => {
  const input = JSON.parse('{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control","\\u00f6":"Latin Small Letter O With Diaeresis"}')
  // (Not checked through Object.keys: JavaScript lists the integer-like key "1" first.)
  t.equal(
    canonicalJson(input),
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
  )
})

t.test('the RFC main example', async (t) => {
  const input = JSON.parse(`{
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\"\\/",
    "literals": [null, true, false]
  }`)
  t.equal(canonicalJson(input), '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}')
})

t.test('values JCS cannot represent are refused, not guessed', async (t) => {
  t.throws(() => canonicalJson({ a: '\ud800' }), CanonicalJsonError, 'lone surrogate in a value')
  t.throws(() => canonicalJson({ '\udc00': 1 }), CanonicalJsonError, 'lone surrogate in a key')
  t.throws(() => canonicalJson(undefined), CanonicalJsonError)
  const cycle: Record<string, unknown> = {}
  cycle.self = cycle
  t.throws(() => canonicalJson(cycle), CanonicalJsonError)
})

t.test('canonical JSON parses back to the same value, whatever the key order', async () => {
  await fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const text = canonicalJson(value)
      const reordered = JSON.parse(JSON.stringify(value), (_key, v) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v))
      return text === canonicalJson(reordered) && text === canonicalJson(JSON.parse(text))
    }),
    { numRuns: 1000 },
  )
})

t.test('argsSha256: lower-case hex SHA-256 of the canonical five fields', async (t) => {
  const call = { organization_id: 'org-1', agent: 'support-bot', action: 'payments.refund', resource: 'order/8812', args: { currency: 'EUR', amount: 120 } }
  const text = '{"action":"payments.refund","agent":"support-bot","args":{"amount":120,"currency":"EUR"},"organization_id":"org-1","resource":"order/8812"}'
  t.equal(argsSha256(call), createHash('sha256').update(text, 'utf8').digest('hex'))
  t.match(argsSha256(call), /^[0-9a-f]{64}$/)
  t.equal(argsSha256({ ...call, args: { amount: 120.0, currency: 'EUR' } }), argsSha256(call), 'key order and number spelling do not matter')
  for (const other of [{ args: { amount: 121, currency: 'EUR' } }, { resource: 'order/8813' }, { agent: 'other-bot' }, { action: 'payments.refunds' }, { organization_id: 'org-2' }]) {
    t.not(argsSha256({ ...call, ...other }), argsSha256(call), `a different ${Object.keys(other)[0]} gives a different hash`)
  }
  t.equal(argsSha256({ ...call, extra: 'ignored' } as typeof call), argsSha256(call), 'only the five bound fields are hashed')
})
