// The webhook vocabulary, no I/O: which names an endpoint may subscribe to (the named
// subscriptions, any audit type, a family such as `policy.*`, or `*`) and which types each covers,
// the retry schedule, and which addresses a delivery must never reach.

import { AUDIT_EVENT_TYPES } from './audit.ts'

/**
 * The named subscriptions of the first release, kept working: each covers the audit types listed
 * in SUBSCRIPTION_COVERS. An endpoint may also name any audit type, a family (`policy.*`) or `*`.
 */
export const WEBHOOK_EVENT_TYPES = [
  'approval.requested',
  'approval.approved',
  'approval.denied',
  'approval.expired',
  'decision.denied',
  'policy.changed',
  'agent.discovered',
  'agent.suspended',
  'key.created',
  'key.revoked',
  'lead.created',
  'mcp_server.changed',
  'limit.reached',
  'limit.changed',
] as const
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number]

/** The audit types a subscription covers (decision.denied comes from the decision log instead). */
export const SUBSCRIPTION_COVERS: Readonly<Record<WebhookEventType, readonly string[]>> = Object.freeze({
  'approval.requested': ['approval.requested'],
  'approval.approved': ['approval.approved'],
  'approval.denied': ['approval.denied'],
  'approval.expired': ['approval.expired'],
  'decision.denied': ['decision.denied'],
  'policy.changed': ['policy.created', 'policy.updated', 'policy.archived', 'policy.rolled_back'],
  'agent.discovered': ['agent.discovered'],
  'agent.suspended': ['agent.suspended'],
  'key.created': ['key.created'],
  'key.revoked': ['key.revoked'],
  'lead.created': ['lead.created'],
  'mcp_server.changed': ['mcp_server.created', 'mcp_server.updated', 'mcp_server.deleted'],
  'limit.reached': ['limit.reached'],
  'limit.changed': ['limit.changed'],
})

/** Every type a delivery can carry: the audit types, and decision.denied from the decision log. */
export const DELIVERABLE_TYPES: readonly string[] = Object.freeze([...AUDIT_EVENT_TYPES, 'decision.denied'])

/** The families (`policy.*`): the part of each deliverable type before its dot. */
export const WEBHOOK_FAMILIES: readonly string[] = Object.freeze([...new Set(DELIVERABLE_TYPES.map((type) => `${type.slice(0, type.indexOf('.'))}.*`))])

/** Every name an endpoint may subscribe to: the named ones, each deliverable type, each family, and `*`. */
export const WEBHOOK_SUBSCRIPTIONS: readonly string[] = Object.freeze([...new Set<string>([...WEBHOOK_EVENT_TYPES, ...DELIVERABLE_TYPES, ...WEBHOOK_FAMILIES, '*'])])

/** The deliverable types one subscription name covers (none for an unknown name). */
function typesOf(name: string): readonly string[] {
  if (name === '*') return DELIVERABLE_TYPES
  if (name.endsWith('.*')) return WEBHOOK_FAMILIES.includes(name) ? DELIVERABLE_TYPES.filter((type) => type.startsWith(name.slice(0, -1))) : []
  return SUBSCRIPTION_COVERS[name as WebhookEventType] ?? (DELIVERABLE_TYPES.includes(name) ? [name] : [])
}

/** The deliverable types any of `subscriptions` covers (decision.denied included when covered). */
export function coveredTypes(subscriptions: readonly string[]): string[] {
  const out = new Set<string>()
  for (const name of subscriptions) for (const type of typesOf(name)) out.add(type)
  return [...out]
}

/**
 * Standard Webhooks' schedule: the first attempt at once, then retries this many milliseconds after
 * the previous failure (8 attempts over about 27.6 hours). After the last, the event is given up.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = Object.freeze([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000])

/** An endpoint that has failed every attempt for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 86_400_000

/** Milliseconds until the retry after failed attempt number `attempts` (1-based), or null: give up. */
export function retryDelay(attempts: number): number | null {
  return RETRY_SCHEDULE_MS[attempts - 1] ?? null
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/

/** Whether `text` is an IP literal (IPv4 dotted quad, or IPv6 with or without brackets). */
export function isIpLiteral(text: string): boolean {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
  return IPV4.test(bare) || (bare.includes(':') && ipv6Bytes(bare) !== null)
}

type Range = readonly [base: number[], bits: number, label: string]

const V4: readonly Range[] = [
  [[0, 0, 0, 0], 8, 'unspecified ("this network")'],
  [[10, 0, 0, 0], 8, 'private'],
  [[100, 64, 0, 0], 10, 'shared address space (CGNAT)'],
  [[127, 0, 0, 0], 8, 'loopback'],
  [[169, 254, 0, 0], 16, 'link-local'],
  [[172, 16, 0, 0], 12, 'private'],
  [[192, 0, 0, 0], 24, 'IETF protocol assignments'],
  [[192, 0, 2, 0], 24, 'documentation'],
  [[192, 88, 99, 0], 24, '6to4 relay anycast'],
  [[192, 168, 0, 0], 16, 'private'],
  [[198, 18, 0, 0], 15, 'benchmarking'],
  [[198, 51, 100, 0], 24, 'documentation'],
  [[203, 0, 113, 0], 24, 'documentation'],
  [[224, 0, 0, 0], 4, 'multicast'],
  [[240, 0, 0, 0], 4, 'reserved or broadcast'],
]

/** IPv6 ranges over the 16 bytes; embedded IPv4 forms are checked as IPv4 first. */
const V6: readonly Range[] = [
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 128, 'unspecified'],
  [[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128, 'loopback'],
  [[0x01, 0, 0, 0, 0, 0, 0, 0], 64, 'discard-only'],
  [[0x20, 0x01, 0x0d, 0xb8], 32, 'documentation'],
  [[0x20, 0x01, 0, 0], 32, 'Teredo'],
  [[0xfc], 7, 'unique-local'],
  [[0xfe, 0x80], 10, 'link-local'],
  [[0xfe, 0xc0], 10, 'site-local'],
  [[0xff], 8, 'multicast'],
]

function inRange(bytes: readonly number[], [base, bits]: Range): boolean {
  for (let i = 0; i < Math.ceil(bits / 8); i++) {
    const mask = i < Math.floor(bits / 8) ? 0xff : (0xff << (8 - (bits % 8))) & 0xff
    if (((bytes[i] ?? 0) & mask) !== ((base[i] ?? 0) & mask)) return false
  }
  return true
}

/** The 16 bytes of an IPv6 address in any text form (with a dotted tail, ::, a zone). */
function ipv6Bytes(text: string): number[] | null {
  let address = text.replace(/%.*$/, '')
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(address)
  let tail: number[] = []
  if (dotted) {
    if (!IPV4.test(dotted[1]!)) return null
    tail = dotted[1]!.split('.').map(Number)
    address = `${address.slice(0, -dotted[1]!.length)}0:0`
  }
  const halves = address.split('::')
  if (halves.length > 2) return null
  const words = (part: string) => (part === '' ? [] : part.split(':').map((word) => parseInt(word, 16)))
  const head = words(halves[0]!)
  const rest = halves.length === 2 ? words(halves[1]!) : []
  const all = halves.length === 2 ? [...head, ...Array.from({ length: Math.max(0, 8 - head.length - rest.length) }, () => 0), ...rest] : head
  if (all.length !== 8 || !/^[0-9a-f:]*$/i.test(address) || all.some((word) => !Number.isInteger(word) || word < 0 || word > 0xffff)) return null
  const bytes = all.flatMap((word) => [word >> 8, word & 0xff])
  if (dotted) bytes.splice(12, 4, ...tail)
  return bytes
}

/** The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIpv4(bytes: readonly number[]): number[] | null {
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((byte) => byte === 0)
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12, 16)
  if (zeros(0, 12)) return bytes.slice(12, 16)
  if (bytes[0] === 0x00 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12)) return bytes.slice(12, 16)
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6)
  return null
}

/**
 * Why a delivery must not reach `address` (an IP literal), or null when it may: private,
 * loopback, link-local, unique-local, CGNAT, multicast, unspecified, documentation and reserved
 * ranges, also in their IPv4-mapped, IPv4-compatible, NAT64 and 6to4 forms. Not an IP: refused.
 */
export function forbiddenAddress(address: string): string | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address
  if (IPV4.test(bare)) {
    const bytes = bare.split('.').map(Number)
    return V4.find((range) => inRange(bytes, range))?.[2] ?? null
  }
  const bytes = bare.includes(':') ? ipv6Bytes(bare) : null
  if (bytes) {
    const special = V6.find((range) => inRange(bytes, range))
    // :: and ::1 lie inside the IPv4-compatible form; name them as themselves.
    if (special && special[1] === 128) return special[2]
    const v4 = embeddedIpv4(bytes)
    if (v4) {
      const reason = V4.find((range) => inRange(v4, range))?.[2]
      if (reason) return `${reason} (IPv4 inside IPv6)`
    }
    return special?.[2] ?? null
  }
  return 'not an IP address'
}
