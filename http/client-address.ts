// The key a client is counted under by every per-client limit. One IPv6 host is usually given a
// whole /64 (2^64 addresses), so counting IPv6 clients per address would let it rotate past every
// limit: IPv6 addresses are grouped by a configurable prefix. IPv4 addresses are counted whole,
// and an IPv4-mapped IPv6 address (::ffff:a.b.c.d, as a dual-stack socket reports IPv4 peers) is
// the IPv4 client it stands for. Spellings of one address (compressed or not, any case, leading
// zeros, zone id, brackets, a port) all give one key.
import { BoundedMap } from './bounded-map.ts'

/** A value that is not an IP address (a trusted proxy's odd header) is kept, bounded, as is. */
const MAX_OTHER_LENGTH = 100

/**
 * The rate-limit key of a client address: dotted IPv4, or the RFC 5952 form of the IPv6 network
 * `address/prefix` (the bare address when the prefix is 128).
 */
export function clientRateKey(address: string, ipv6PrefixBits: number): string {
  const text = stripPortAndZone(address.trim())
  const v4 = parseIpv4(text)
  if (v4) return v4.join('.')
  const v6 = parseIpv6(text)
  if (!v6) return address.trim().slice(0, MAX_OTHER_LENGTH)
  if (isIpv4Mapped(v6)) return [v6[6]! >> 8, v6[6]! & 0xff, v6[7]! >> 8, v6[7]! & 0xff].join('.')
  const bits = Math.max(0, Math.min(128, Math.trunc(ipv6PrefixBits)))
  const masked = maskIpv6(v6, bits)
  return bits === 128 ? formatIpv6(masked) : `${formatIpv6(masked)}/${bits}`
}

/**
 * `clientRateKey` for one prefix length, remembered per address text: a client sends many
 * requests, and the parse is dear beside a map lookup. At most 1,024 addresses
 * are kept; a flood of made-up addresses (possible only through a trusted proxy's forwarded
 * header) empties the memory instead of growing it.
 */
export function rememberedRateKeys(ipv6PrefixBits: number): (address: string) => string {
  const known = new BoundedMap<string, string>(1024)
  return (address) => {
    let key = known.get(address)
    if (key === undefined) known.set(address, (key = clientRateKey(address, ipv6PrefixBits)))
    return key
  }
}

/** `[v6]:port`, `[v6]`, `a.b.c.d:port` and a zone id (`%eth0`, or `%25eth0` in URL form) are not part of the address. */
function stripPortAndZone(text: string): string {
  let out = text
  const bracketed = /^\[([^\]]*)\](?::\d{1,5})?$/.exec(out)
  if (bracketed) out = bracketed[1]!
  else if (/^[\d.]+:\d{1,5}$/.test(out)) out = out.slice(0, out.indexOf(':'))
  const zone = out.indexOf('%')
  // Only an IPv6 address carries a zone id.
  if (zone > 0 && out.includes(':')) out = out.slice(0, zone)
  return out
}

/** Four decimal octets without leading zeros (a leading zero reads as octal to some parsers). */
function parseIpv4(text: string): number[] | null {
  const match = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text)
  if (!match) return null
  const octets: number[] = []
  for (const part of match.slice(1)) {
    if (part.length > 1 && part.startsWith('0')) return null
    const value = Number(part)
    if (value > 255) return null
    octets.push(value)
  }
  return octets
}

const HEXTET = /^[0-9a-f]{1,4}$/i

/** Parses one side of an IPv6 address into 16-bit groups; a dotted IPv4 tail counts as two. */
function parseGroups(side: string, ipv4TailAllowed: boolean): number[] | null {
  if (side === '') return []
  const parts = side.split(':')
  const groups: number[] = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (ipv4TailAllowed && i === parts.length - 1 && part.includes('.')) {
      const v4 = parseIpv4(part)
      if (!v4) return null
      groups.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!)
    } else if (HEXTET.test(part)) {
      groups.push(parseInt(part, 16))
    } else return null
  }
  return groups
}

/** Eight 16-bit groups, or null when `text` is not an IPv6 address (RFC 4291 §2.2 text forms). */
function parseIpv6(text: string): number[] | null {
  if (!text.includes(':') || text.length > 45) return null
  const halves = text.split('::')
  if (halves.length > 2) return null
  if (halves.length === 1) {
    const groups = parseGroups(text, true)
    return groups && groups.length === 8 ? groups : null
  }
  const head = parseGroups(halves[0]!, false)
  const tail = parseGroups(halves[1]!, true)
  // "::" stands for at least one group of zeros.
  if (!head || !tail || head.length + tail.length > 7) return null
  return [...head, ...Array.from({ length: 8 - head.length - tail.length }, () => 0), ...tail]
}

function isIpv4Mapped(groups: readonly number[]): boolean {
  return groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff
}

function maskIpv6(groups: readonly number[], bits: number): number[] {
  return groups.map((group, i) => {
    const keep = Math.max(0, Math.min(16, bits - i * 16))
    return keep === 0 ? 0 : group & ((0xffff << (16 - keep)) & 0xffff)
  })
}

/** RFC 5952 §4: lower case, no leading zeros, the first longest run of two or more zero groups as "::". */
function formatIpv6(groups: readonly number[]): string {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart < 0) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}
