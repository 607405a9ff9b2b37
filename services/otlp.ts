// The OTLP/HTTP protobuf encoding of our spans (opentelemetry-proto's ExportTraceServiceRequest),
// written as each span ends. The SDK's exporter keeps every span as an object until its batch
// leaves and then builds the message through intermediate objects; at one span per request that
// garbage, not the spans, was most of what tracing cost (docs/observability.md). Here a span is
// encoded once into bytes and nothing else is kept. Our spans have one shape: ids, a name, a kind,
// two times, string or integer attributes and a status code; nothing else is encoded.

/** A span as it ends: what the message carries. */
export interface EndedSpan {
  /** 32 lower-case hex digits. */
  readonly traceId: string
  /** 16 lower-case hex digits. */
  readonly spanId: string
  /** 16 lower-case hex digits, or null for the root of a trace. */
  readonly parentSpanId: string | null
  /** The W3C trace flags (bit 0: sampled). */
  readonly flags: number
  /** The parent's context came from another process (an incoming traceparent). */
  readonly remoteParent: boolean
  readonly name: string
  /** OTLP's SpanKind: 2 server, 3 client. */
  readonly kind: number
  /** Unix epoch milliseconds, with a fraction (performance.timeOrigin + performance.now()). */
  readonly startMs: number
  readonly endMs: number
  /** Keys and values, alternating: a flat list, not an object whose keys vary from span to span. */
  readonly attributes: readonly (string | number)[]
  /** OTLP's StatusCode: 0 unset, 2 error. */
  readonly status: number
}

/** The value of each hex digit's character code (the ids are checked or made lower-case hex). */
const HEX_VALUE = new Uint8Array(128)
for (let i = 0; i < 16; i++) HEX_VALUE['0123456789abcdef'.charCodeAt(i)] = i
const TWO_32 = 2 ** 32

/**
 * A growable byte buffer with the protobuf wire format's writers. Plain JavaScript on a
 * Uint8Array: each span is a few dozen short fields, and a call into C++ per field (Buffer's
 * hex and BigInt writers) cost more than the bytes it wrote.
 */
class Writer {
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

  /** Bytes given as lower-case hex digits (a trace or span id). */
  hex(field: number, hex: string): void {
    const length = hex.length >>> 1
    this.tag(field, 2)
    this.varint(length)
    this.room(length)
    const bytes = this.bytes
    let at = this.at
    for (let i = 0; i < hex.length; i += 2) bytes[at++] = (HEX_VALUE[hex.charCodeAt(i)]! << 4) | HEX_VALUE[hex.charCodeAt(i + 1)]!
    this.at = at
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

const SPAN_FLAGS_HAS_IS_REMOTE = 0x100
const SPAN_FLAGS_IS_REMOTE = 0x200

/** The encoded `key = 1` field of each attribute key seen: a handful of constants, made once each. */
const KEY_FIELDS = new Map<string, Uint8Array>()
function keyField(key: string): Uint8Array {
  let field = KEY_FIELDS.get(key)
  if (field === undefined) {
    const scratch = new Writer()
    scratch.string(1, key)
    field = scratch.take()
    if (KEY_FIELDS.size < 64) KEY_FIELDS.set(key, field)
  }
  return field
}

/** KeyValue{ key = 1; AnyValue value = 2 { string_value = 1 | int_value = 3 } }. */
function attribute(writer: Writer, field: number, key: string, value: string | number): void {
  const pair = writer.begin(field)
  writer.copy(keyField(key))
  const any = writer.begin(2)
  // int_value is a varint here: other numbers (none of ours) go as their text.
  if (typeof value === 'string' || !Number.isSafeInteger(value) || value < 0) writer.string(1, String(value))
  else {
    writer.tag(3, 0)
    writer.varint(value)
  }
  writer.end(any)
  writer.end(pair)
}

/** Span fields: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9, status 15, flags 16. */
function encodeSpan(writer: Writer, span: EndedSpan): void {
  const message = writer.begin(2)
  writer.hex(1, span.traceId)
  writer.hex(2, span.spanId)
  if (span.parentSpanId !== null) writer.hex(4, span.parentSpanId)
  writer.string(5, span.name)
  writer.tag(6, 0)
  writer.varint(span.kind)
  writer.nanos(7, span.startMs)
  writer.nanos(8, span.endMs)
  const attributes = span.attributes
  for (let i = 0; i + 1 < attributes.length; i += 2) attribute(writer, 9, attributes[i] as string, attributes[i + 1]!)
  if (span.status !== 0) {
    const status = writer.begin(15)
    writer.tag(3, 0)
    writer.varint(span.status)
    writer.end(status)
  }
  writer.fixed32(16, (span.flags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (span.parentSpanId !== null && span.remoteParent ? SPAN_FLAGS_IS_REMOTE : 0))
  writer.end(message)
}

/**
 * Spans encoded as they end, gathered into one ExportTraceServiceRequest:
 * resource_spans 1 { resource 1 { attributes 1 }, scope_spans 2 { scope 1 { name 1 }, spans 2 } }.
 */
export class SpanBatch {
  private readonly spans = new Writer()
  private readonly envelope = new Writer()
  count = 0

  constructor(private readonly serviceName: string) {}

  add(span: EndedSpan): void {
    encodeSpan(this.spans, span)
    this.count++
  }

  /** The request body with every span added since the last call, and an empty batch after it. */
  take(): Uint8Array<ArrayBuffer> {
    const spans = this.spans.take()
    this.count = 0
    const writer = this.envelope
    const resourceSpans = writer.begin(1)
    const resource = writer.begin(1)
    attribute(writer, 1, 'service.name', this.serviceName)
    writer.end(resource)
    const scopeSpans = writer.begin(2)
    const scope = writer.begin(1)
    writer.string(1, 'steward')
    writer.end(scope)
    writer.raw(spans)
    writer.end(scopeSpans)
    writer.end(resourceSpans)
    return writer.take()
  }
}
