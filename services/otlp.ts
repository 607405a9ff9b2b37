// The OTLP/HTTP protobuf encoding of our spans (opentelemetry-proto's ExportTraceServiceRequest),
// written as each span ends. The SDK's exporter keeps every span as an object until its batch
// leaves and then builds the message through intermediate objects; at one span per request that
// garbage, not the spans, was most of what tracing cost (docs/observability.md). Here a span is
// encoded once into bytes and nothing else is kept. Our spans have one shape: ids, a name, a kind,
// two times, string or integer attributes and a status code; nothing else is encoded.

/** A span as it ends: what the message carries. */
export interface EndedSpan {
  /** 32 hex digits. */
  readonly traceId: string
  /** 16 hex digits. */
  readonly spanId: string
  /** 16 hex digits, or null for the root of a trace. */
  readonly parentSpanId: string | null
  /** The W3C trace flags (bit 0: sampled). */
  readonly flags: number
  /** The parent's context came from another process (an incoming traceparent). */
  readonly remoteParent: boolean
  readonly name: string
  /** OTLP's SpanKind: 2 server, 3 client. */
  readonly kind: number
  /** Unix epoch nanoseconds. */
  readonly startNanos: bigint
  readonly endNanos: bigint
  readonly attributes: Readonly<Record<string, string | number>>
  /** OTLP's StatusCode: 0 unset, 2 error. */
  readonly status: number
}

/** A growable byte buffer with the protobuf wire format's writers. */
class Writer {
  bytes = Buffer.allocUnsafe(512)
  at = 0

  private room(n: number): void {
    if (this.at + n <= this.bytes.length) return
    const bigger = Buffer.allocUnsafe(Math.max(this.bytes.length * 2, this.at + n))
    this.bytes.copy(bigger, 0, 0, this.at)
    this.bytes = bigger
  }

  varint(value: number): void {
    this.room(10)
    while (value > 0x7f) {
      this.bytes[this.at++] = (value & 0x7f) | 0x80
      value = Math.floor(value / 128)
    }
    this.bytes[this.at++] = value
  }

  /** A tag: field number and wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32). */
  tag(field: number, wire: number): void {
    this.varint(field * 8 + wire)
  }

  fixed64(field: number, value: bigint): void {
    this.tag(field, 1)
    this.room(8)
    this.bytes.writeBigUInt64LE(value, this.at)
    this.at += 8
  }

  fixed32(field: number, value: number): void {
    this.tag(field, 5)
    this.room(4)
    this.bytes.writeUInt32LE(value, this.at)
    this.at += 4
  }

  string(field: number, text: string): void {
    this.tag(field, 2)
    // Short ASCII (every name and most values) byte by byte: cheaper than a call into C++.
    if (text.length < 0x80) {
      this.room(text.length + 1)
      const start = this.at
      this.bytes[this.at++] = text.length
      let i = 0
      for (; i < text.length; i++) {
        const code = text.charCodeAt(i)
        if (code >= 0x80) break
        this.bytes[this.at++] = code
      }
      if (i === text.length) return
      this.at = start
    }
    const length = Buffer.byteLength(text)
    this.varint(length)
    this.room(length)
    this.at += this.bytes.write(text, this.at)
  }

  hex(field: number, hex: string): void {
    this.tag(field, 2)
    this.varint(hex.length / 2)
    this.room(hex.length / 2)
    this.at += this.bytes.write(hex, this.at, 'hex')
  }

  /** A nested message: written by `body`, its length put in front afterwards. */
  message(field: number, body: () => void): void {
    this.tag(field, 2)
    // Room for the longest length we write (under 2^28: four bytes), moved back when shorter.
    this.room(4)
    const lengthAt = this.at
    this.at += 4
    body()
    const length = this.at - lengthAt - 4
    const size = length < 0x80 ? 1 : length < 0x4000 ? 2 : length < 0x200000 ? 3 : 4
    if (size < 4) this.bytes.copyWithin(lengthAt + size, lengthAt + 4, this.at)
    this.at -= 4 - size
    let value = length
    for (let i = 0; i < size; i++) {
      this.bytes[lengthAt + i] = (value & 0x7f) | (i < size - 1 ? 0x80 : 0)
      value >>>= 7
    }
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.length)
    this.bytes.set(bytes, this.at)
    this.at += bytes.length
  }

  /** A copy of what was written (a fetch body of its own), and an empty writer. */
  take(): Uint8Array<ArrayBuffer> {
    const out = new Uint8Array(this.at)
    out.set(this.bytes.subarray(0, this.at))
    this.at = 0
    return out
  }
}

const SPAN_FLAGS_HAS_IS_REMOTE = 0x100
const SPAN_FLAGS_IS_REMOTE = 0x200

/** KeyValue{ key = 1; AnyValue value = 2 { string_value = 1 | int_value = 3 } }. */
function attribute(writer: Writer, field: number, key: string, value: string | number): void {
  writer.message(field, () => {
    writer.string(1, key)
    writer.message(2, () => {
      // int_value is a varint here: other numbers (none of ours) go as their text.
      if (typeof value === 'string' || !Number.isSafeInteger(value) || value < 0) writer.string(1, String(value))
      else {
        writer.tag(3, 0)
        writer.varint(value)
      }
    })
  })
}

/** Span fields: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8, attributes 9, status 15, flags 16. */
function encodeSpan(writer: Writer, span: EndedSpan): void {
  writer.message(2, () => {
    writer.hex(1, span.traceId)
    writer.hex(2, span.spanId)
    if (span.parentSpanId !== null) writer.hex(4, span.parentSpanId)
    writer.string(5, span.name)
    writer.tag(6, 0)
    writer.varint(span.kind)
    writer.fixed64(7, span.startNanos)
    writer.fixed64(8, span.endNanos)
    for (const key in span.attributes) attribute(writer, 9, key, span.attributes[key]!)
    if (span.status !== 0) {
      writer.message(15, () => {
        writer.tag(3, 0)
        writer.varint(span.status)
      })
    }
    writer.fixed32(16, (span.flags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (span.parentSpanId !== null && span.remoteParent ? SPAN_FLAGS_IS_REMOTE : 0))
  })
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
    writer.message(1, () => {
      writer.message(1, () => attribute(writer, 1, 'service.name', this.serviceName))
      writer.message(2, () => {
        writer.message(1, () => writer.string(1, 'steward'))
        writer.raw(spans)
      })
    })
    return writer.take()
  }
}
