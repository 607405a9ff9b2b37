// The key per-client limits count a client under: IPv4 whole, IPv6 by network prefix, every
// spelling of one address the same key. Pure function, no database.
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { clientRateKey, rememberedRateKeys } from '../../http/client-address.ts'

/** Runs a fast-check property as one assertion, with fast-check's counterexample report on failure. */
function holds<T>(t: Test, property: fc.IProperty<T>, numRuns: number): void {
  const result = fc.check(property, { numRuns })
  t.notOk(result.failed, (result.failed ? fc.defaultReportMessage(result) : undefined) ?? 'holds')
}

t.test('examples', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['203.0.113.9', 64, '203.0.113.9'],
    ['  203.0.113.9 ', 64, '203.0.113.9'],
    ['203.0.113.9:51234', 64, '203.0.113.9'],
    ['::ffff:203.0.113.9', 64, '203.0.113.9'],
    ['::FFFF:203.0.113.9', 128, '203.0.113.9'],
    ['::ffff:cb00:7109', 64, '203.0.113.9'],
    ['0:0:0:0:0:ffff:cb00:7109', 0, '203.0.113.9'],
    ['[::ffff:203.0.113.9]:443', 64, '203.0.113.9'],
    ['2001:db8:1:2:3:4:5:6', 64, '2001:db8:1:2::/64'],
    ['2001:0DB8:0001:0002:ffff:ffff:ffff:ffff', 64, '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', 64, '2001:db8:1:2::/64'],
    ['[2001:db8:1:2::1]:8080', 64, '2001:db8:1:2::/64'],
    ['[2001:db8:1:2::1]', 64, '2001:db8:1:2::/64'],
    ['fe80::1%eth0', 64, 'fe80::/64'],
    ['fe80::1%25eth0', 128, 'fe80::1'],
    ['2001:db8:0:0:1:0:0:1', 128, '2001:db8::1:0:0:1'],
    ['2001:db8:0:1:1:1:1:1', 128, '2001:db8:0:1:1:1:1:1'],
    ['2001:db8::', 48, '2001:db8::/48'],
    ['2001:db8:abcd:12ff::1', 56, '2001:db8:abcd:1200::/56'],
    ['2001:db8::1', 0, '::/0'],
    ['::1', 128, '::1'],
    ['::1', 64, '::/64'],
    ['::', 128, '::'],
    ['1::', 128, '1::'],
    ['::2:3:4:5:6:7:8', 128, '0:2:3:4:5:6:7:8'],
    ['1:2:3:4:5:6:7::', 128, '1:2:3:4:5:6:7:0'],
    ['64:ff9b::192.0.2.33', 128, '64:ff9b::c000:221'],
  ]
  for (const [address, prefix, key] of cases) t.equal(clientRateKey(address, prefix), key, `${address} /${prefix}`)
})

t.test('remembered keys are the same keys, for each prefix length, past the memory\'s bound too', async (t) => {
  const addresses = ['203.0.113.9', '2001:db8:1:2::1', '[2001:db8:1:2::1]:8080', '::ffff:203.0.113.9', 'fe80::1%eth0', 'unknown']
  for (const prefix of [48, 64, 128]) {
    const keyOf = rememberedRateKeys(prefix)
    // Twice each: the second answer comes from the memory.
    for (const address of [...addresses, ...addresses]) t.equal(keyOf(address), clientRateKey(address, prefix), `${address} /${prefix}`)
  }
  // More addresses than it keeps (1,024): the memory empties and the keys stay right.
  const keyOf = rememberedRateKeys(64)
  const many = Array.from({ length: 3000 }, (_, i) => `2001:db8:${(i >> 8).toString(16)}:${(i & 255).toString(16)}::1`)
  const wrong = [...many, ...many.slice(0, 50), ...addresses].filter((address) => keyOf(address) !== clientRateKey(address, 64))
  t.same(wrong, [])
  // Two prefix lengths never share answers.
  t.equal(rememberedRateKeys(48)('2001:db8:1:2::1'), '2001:db8:1::/48')
  t.equal(rememberedRateKeys(64)('2001:db8:1:2::1'), '2001:db8:1:2::/64')
})

t.test('what is not an IP address is kept as is, trimmed and bounded', async (t) => {
  for (const text of ['unknown', '', '01.2.3.4', '256.1.1.1', '1.2.3', '1:2:3:4:5:6:7:8:9', '1::2::3', ':::', '12345::', 'g::1', '::1.2.3.4:5', '1.2.3.4::']) {
    t.equal(clientRateKey(text, 64), text, JSON.stringify(text))
  }
  t.equal(clientRateKey('x'.repeat(1000), 64), 'x'.repeat(100))
})

// Generators: an IPv6 address as eight 16-bit groups, and the ways one address can be written.
const groups = fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 })
const notMapped = groups.filter((g) => !(g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff))
const prefix = fc.integer({ min: 0, max: 128 })

function full(g: number[]): string {
  return g.map((x) => x.toString(16).padStart(4, '0')).join(':')
}

/** "::" placed over any run of zero groups (not only the longest), upper or lower case. */
function spellings(g: number[]): string[] {
  const out = [full(g), full(g).toUpperCase(), g.map((x) => x.toString(16)).join(':'), `[${full(g)}]:443`, `${full(g)}%eth0`]
  for (let start = 0; start < 8; start++) {
    for (let end = start + 1; end <= 8 && g[end - 1] === 0; end++) {
      out.push(`${g.slice(0, start).map((x) => x.toString(16)).join(':')}::${g.slice(end).map((x) => x.toString(16)).join(':')}`)
    }
  }
  return out
}

t.test('property: every spelling of an address gives the key of its plain form', async (t) => {
  holds(
    t,
    fc.property(groups, prefix, (g, bits) => {
      const key = clientRateKey(full(g), bits)
      for (const text of spellings(g)) if (clientRateKey(text, bits) !== key) return false
      return true
    }),
    500,
  )
})

t.test('property: addresses sharing their first N bits share a key; differing within them, they do not', async (t) => {
  const bitOf = (g: number[], i: number): number => (g[i >> 4]! >> (15 - (i & 15))) & 1
  holds(
    t,
    fc.property(notMapped, notMapped, prefix, (a, b, bits) => {
      // b takes a's first `bits` bits, then its own.
      const mixed = a.map((x, i) => {
        const keep = Math.max(0, Math.min(16, bits - i * 16))
        const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
        return (x & mask) | (b[i]! & ~mask & 0xffff)
      })
      if (mixed.slice(0, 5).every((x) => x === 0) && mixed[5] === 0xffff) return true
      if (clientRateKey(full(a), bits) !== clientRateKey(full(mixed), bits)) return false
      let sameHead = true
      for (let i = 0; i < bits; i++) if (bitOf(a, i) !== bitOf(b, i)) sameHead = false
      return sameHead || clientRateKey(full(b), bits) !== clientRateKey(full(a), bits)
    }),
    500,
  )
})

t.test('property: a whole address (/128) is written as the WHATWG URL parser writes it', async (t) => {
  holds(
    t,
    fc.property(notMapped, (g) => clientRateKey(full(g), 128) === new URL(`http://[${full(g)}]/`).hostname.slice(1, -1)),
    500,
  )
})

t.test('property: an IPv4 address and its IPv4-mapped IPv6 forms give the same key, whatever the prefix', async (t) => {
  const octets = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 4, maxLength: 4 })
  holds(
    t,
    fc.property(octets, prefix, (o, bits) => {
      const dotted = o.join('.')
      const hex = `${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`
      const forms = [dotted, `::ffff:${dotted}`, `::FFFF:${hex}`, `0:0:0:0:0:ffff:${dotted}`, `[::ffff:${dotted}]:80`, `${dotted}:80`]
      return forms.every((form) => clientRateKey(form, bits) === dotted)
    }),
    300,
  )
})

t.test('property: the key of a key is itself (normalizing twice changes nothing)', async (t) => {
  holds(
    t,
    fc.property(groups, prefix, (g, bits) => {
      const key = clientRateKey(full(g), bits)
      const address = key.split('/')[0]!
      return clientRateKey(address, bits) === key
    }),
    500,
  )
})
