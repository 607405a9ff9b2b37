// The protobuf wire format as OTLP's messages need it (services/otlp.ts): varints, fixed-width
// integers, text, ids given in hex or made at random, nested messages and OTLP's KeyValue.
import { randomFillSync } from 'node:crypto'

/** The value of each hex digit's character code (the ids are checked or made lower-case hex). */
const HEX_VALUE = new Uint8Array(128)
for (let i = 0; i < 16; i++) HEX_VALUE['0123456789abcdef'.charCodeAt(i)] = i
const TWO_32 = 2 ** 32
/** Random bytes for new ids, refilled when used up. */
const RANDOM = new Uint8Array(4096)
let randomAt = RANDOM.length

/**
 * A growable byte buffer with the protobuf wire format's writers. Plain JavaScript on a
 * Uint8Array: each span is a few dozen short fields, and a call into C++ per field (Buffer's
 * hex and BigInt writers) cost more than the bytes it wrote.
 */
export class Writer {
  bytes = new Uint8Array(4096)
  at = 0

  private room(n: number): void {
    if (this.at + n <= this.bytes.length) return
    const bigger = new Uint8Array(Math.max(this.bytes.length * 2, this.at + n))
    bigger.set(this.bytes.subarray(0, this.at))
    this.bytes = bigger
  }

  varint(value: number): void {
    this.room(10)
    const bytes = this.bytes
    let at = this.at
    while (value > 0x7f) {
      bytes[at++] = (value & 0x7f) | 0x80
      value = Math.floor(value / 128)
    }
    bytes[at++] = value
    this.at = at
  }

  /** A tag: field number and wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32). */
  tag(field: number, wire: number): void {
    this.varint(field * 8 + wire)
  }

  private uint32(value: number): void {
    const bytes = this.bytes
    bytes[this.at++] = value & 0xff
    bytes[this.at++] = (value >>> 8) & 0xff
    bytes[this.at++] = (value >>> 16) & 0xff
    bytes[this.at++] = (value >>> 24) & 0xff
  }

  /** A time as fixed64 Unix epoch nanoseconds, to the microsecond, without a BigInt. */
  nanos(field: number, epochMs: number): void {
    this.tag(field, 1)
    this.room(8)
    // µs fit a double exactly; ns = µs × 1000 does not, so it is built from two 32-bit halves.
    const micros = Math.round(epochMs * 1000)
    const high = Math.floor(micros / TWO_32)
    const low = (micros - high * TWO_32) * 1000
    const carry = Math.floor(low / TWO_32)
    this.uint32(low - carry * TWO_32)
    this.uint32(high * 1000 + carry)
  }

  fixed32(field: number, value: number): void {
    this.tag(field, 5)
    this.room(4)
    this.uint32(value)
  }

  string(field: number, text: string): void {
    this.tag(field, 2)
    const length = text.length
    // Short ASCII (every name and most values) byte by byte: cheaper than a call into C++.
    if (length < 0x80) {
      this.room(length + 1)
      const bytes = this.bytes
      let at = this.at
      bytes[at++] = length
      let i = 0
      for (; i < length; i++) {
        const code = text.charCodeAt(i)
        if (code >= 0x80) break
        bytes[at++] = code
      }
      if (i === length) {
        this.at = at
        return
      }
    }
    const encoded = Buffer.from(text)
    this.varint(encoded.length)
    this.raw(encoded)
  }

  /**
   * A KeyValue field with a text value, `key` being its encoded `key = 1` field, when every length
   * fits one byte and the text is ASCII (most attributes): written in one pass. Otherwise false,
   * with nothing written.
   */
  text(field: number, key: Uint8Array, value: string): boolean {
    const length = value.length
    const size = key.length + length + 4
    if (size >= 0x80 || field >= 16) return false
    this.room(size + 2)
    const bytes = this.bytes
    let at = this.at
    bytes[at++] = field * 8 + 2
    bytes[at++] = size
    for (let i = 0; i < key.length; i++) bytes[at++] = key[i]!
    // value = 2 { string_value = 1 }
    bytes[at++] = 0x12
    bytes[at++] = length + 2
    bytes[at++] = 0x0a
    bytes[at++] = length
    for (let i = 0; i < length; i++) {
      const code = value.charCodeAt(i)
      if (code >= 0x80) return false
      bytes[at++] = code
    }
    this.at = at
    return true
  }

  /** The same for a small non-negative integer value (an HTTP status code). */
  integer(field: number, key: Uint8Array, value: number): boolean {
    const size = key.length + 5
    if (!(value >= 0 && value < 0x4000) || size >= 0x80 || field >= 16) return false
    this.room(size + 2)
    const bytes = this.bytes
    let at = this.at
    bytes[at++] = field * 8 + 2
    bytes[at++] = value < 0x80 ? size - 1 : size
    for (let i = 0; i < key.length; i++) bytes[at++] = key[i]!
    // value = 2 { int_value = 3 }, a varint of one or two bytes
    bytes[at++] = 0x12
    if (value < 0x80) {
      bytes[at++] = 2
      bytes[at++] = 0x18
      bytes[at++] = value
    } else {
      bytes[at++] = 3
      bytes[at++] = 0x18
      bytes[at++] = (value & 0x7f) | 0x80
      bytes[at++] = value >>> 7
    }
    this.at = at
    return true
  }

  /** Bytes given as lower-case hex digits (a trace or span id), `length` bytes from `from` in `hex`. */
  hex(field: number, hex: string, from = 0, length = hex.length >>> 1): void {
    this.tag(field, 2)
    this.varint(length)
    this.room(length)
    const bytes = this.bytes
    let at = this.at
    const to = from + length * 2
    for (let i = from; i < to; i += 2) bytes[at++] = (HEX_VALUE[hex.charCodeAt(i)]! << 4) | HEX_VALUE[hex.charCodeAt(i + 1)]!
    this.at = at
  }

  /** A new random id of `length` bytes, not all zero (W3C Trace Context rules that out). */
  randomId(field: number, length: number): void {
    this.tag(field, 2)
    this.varint(length)
    this.room(length)
    for (;;) {
      if (randomAt + length > RANDOM.length) {
        randomFillSync(RANDOM)
        randomAt = 0
      }
      let zero = true
      for (let i = 0; i < length; i++) if ((this.bytes[this.at + i] = RANDOM[randomAt++]!) !== 0) zero = false
      if (!zero) break
    }
    this.at += length
  }

  /**
   * Opens a nested message; `end` with what this returns closes it. One byte is kept for its
   * length, enough for most (an attribute); a longer message moves forward to make room.
   */
  begin(field: number): number {
    this.tag(field, 2)
    this.room(1)
    return this.at++
  }

  end(lengthAt: number): void {
    const length = this.at - lengthAt - 1
    if (length < 0x80) {
      this.bytes[lengthAt] = length
      return
    }
    const size = length < 0x4000 ? 2 : length < 0x200000 ? 3 : length < 0x10000000 ? 4 : 5
    this.room(size - 1)
    this.bytes.copyWithin(lengthAt + size, lengthAt + 1, this.at)
    this.at += size - 1
    let value = length
    for (let i = 0; i < size; i++) {
      this.bytes[lengthAt + i] = (value & 0x7f) | (i < size - 1 ? 0x80 : 0)
      value = Math.floor(value / 128)
    }
  }

  /** Copies a few bytes (an encoded field): a loop, cheaper than TypedArray.set at this size. */
  copy(source: Uint8Array): void {
    this.room(source.length)
    const bytes = this.bytes
    let at = this.at
    for (let i = 0; i < source.length; i++) bytes[at++] = source[i]!
    this.at = at
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.length)
    this.bytes.set(bytes, this.at)
    this.at += bytes.length
  }

  /** A copy of what was written (a request body of its own), and an empty writer. */
  take(): Uint8Array<ArrayBuffer> {
    const out = this.bytes.slice(0, this.at)
    this.at = 0
    return out
  }
}

/** How many bytes the varint of `value` takes. */
export function varintSize(value: number): number {
  let size = 1
  while (value > 0x7f) {
    value = Math.floor(value / 128)
    size++
  }
  return size
}
