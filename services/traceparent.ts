// W3C Trace Context's traceparent header, as the tracer reads it (services/tracing.ts) and the
// span encoder checks it (services/otlp.ts).

/** A parsed W3C traceparent. */
export interface Parent {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

const ZEROS = '0000000000000000'
const DASH = 0x2d

/** Whether `value` holds only lower-case hex digits from `from` to `to`. */
function isHex(value: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) {
    const code = value.charCodeAt(i)
    if (!((code >= 0x30 && code <= 0x39) || (code >= 0x61 && code <= 0x66))) return false
  }
  return true
}

/** The value of a lower-case hex digit's character code. */
const hexValue = (code: number): number => (code <= 0x39 ? code - 0x30 : code - 0x57)

/**
 * W3C Trace Context: `version-traceid-parentid-flags`, lower-case hex; version ff is invalid,
 * version 00 has exactly these four fields, a later one may add more after a dash, and neither
 * id may be all zeros. The flags of a valid traceparent (bit 0: sampled), else -1. It runs on
 * every request: character codes, no regular expression and nothing allocated.
 */
export function traceFlags(value: string): number {
  if (value.length < 55 || value.charCodeAt(2) !== DASH || value.charCodeAt(35) !== DASH || value.charCodeAt(52) !== DASH) return -1
  if (!isHex(value, 0, 2) || !isHex(value, 3, 35) || !isHex(value, 36, 52) || !isHex(value, 53, 55) || value.startsWith('ff')) return -1
  if (value.length > 55 && (value.charCodeAt(55) !== DASH || value.startsWith('00') || /[\r\n]/.test(value))) return -1
  if ((value.startsWith(ZEROS, 3) && value.startsWith(ZEROS, 19)) || value.startsWith(ZEROS, 36)) return -1
  return hexValue(value.charCodeAt(53)) * 16 + hexValue(value.charCodeAt(54))
}

/**
 * Whether a traceparent's flags (its 55th character) have the sampled bit, without checking the
 * rest: true for every valid sampled one, and for some invalid ones, which traceFlags then finds.
 */
export function readsSampled(header: string): boolean {
  return (hexValue(header.charCodeAt(54)) & 1) === 1
}

/** A W3C traceparent's ids and sampled flag, or null when it is absent or invalid (see traceFlags). */
export function parseTraceparent(header: string | null | undefined): Parent | null {
  if (!header) return null
  const value = header.trim()
  const flags = traceFlags(value)
  if (flags < 0) return null
  return { traceId: value.slice(3, 35), spanId: value.slice(36, 52), sampled: (flags & 1) === 1 }
}
