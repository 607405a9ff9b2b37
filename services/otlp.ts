// The OTLP/HTTP protobuf encoding of our spans (opentelemetry-proto's ExportTraceServiceRequest).
// The SDK's exporter keeps every span as an object until its batch leaves and then builds the
// message through intermediate objects; at one span per request that garbage, not the spans, was
// most of what tracing cost (docs/observability.md). Here a served request's span is kept as a few
// fields in arrays and encoded with its whole batch, in one loop when the batch leaves: work done
// inside each request, among everything else the request touches, cost several times what the
// same work costs done together. Our spans have one shape: ids, a name, a kind, two times, string
// or integer attributes and a status code; nothing else is encoded.
import { varintSize, Writer } from './otlp-writer.ts'
import { traceFlags } from './traceparent.ts'

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

// OTLP's SpanKind (server) and StatusCode (error), and its span flags beside the W3C ones.
const SERVER = 2
const ERROR = 2
const SAMPLED = 1
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
function attribute(writer: Writer, field: number, key: string | Uint8Array, value: string | number): void {
  const keyBytes = typeof key === 'string' ? keyField(key) : key
  if (typeof value === 'string' ? writer.text(field, keyBytes, value) : Number.isInteger(value) && writer.integer(field, keyBytes, value)) return
  const pair = writer.begin(field)
  writer.copy(keyBytes)
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

/** The keys of a served request's span, encoded once. */
const KEY = {
  method: keyField('http.request.method'),
  status: keyField('http.response.status_code'),
  route: keyField('http.route'),
  outcome: keyField('steward.decision.outcome'),
  agent: keyField('steward.agent'),
  agentId: keyField('steward.agent_id'),
  action: keyField('steward.action'),
}

/** Span fields after the ids: name 5, kind 6, start 7, end 8 (then attributes 9). */
function named(writer: Writer, name: string, kind: number, startMs: number, endMs: number): void {
  writer.string(5, name)
  writer.tag(6, 0)
  writer.varint(kind)
  writer.nanos(7, startMs)
  writer.nanos(8, endMs)
}

/** The last span fields: status 15 (when an error) and flags 16 (the W3C ones, has is_remote, is_remote). */
function closing(writer: Writer, status: number, flags: number, remoteParent: boolean): void {
  if (status !== 0) {
    const message = writer.begin(15)
    writer.tag(3, 0)
    writer.varint(status)
    writer.end(message)
  }
  writer.fixed32(16, (flags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (remoteParent ? SPAN_FLAGS_IS_REMOTE : 0))
}

/** Span fields: trace_id 1, span_id 2, parent_span_id 4, then the rest. */
function encodeSpan(writer: Writer, span: EndedSpan): void {
  const message = writer.begin(2)
  writer.hex(1, span.traceId)
  writer.hex(2, span.spanId)
  if (span.parentSpanId !== null) writer.hex(4, span.parentSpanId)
  named(writer, span.name, span.kind, span.startMs, span.endMs)
  const attributes = span.attributes
  for (let i = 0; i + 1 < attributes.length; i += 2) attribute(writer, 9, attributes[i] as string, attributes[i + 1]!)
  closing(writer, span.status, span.flags, span.parentSpanId !== null && span.remoteParent)
  writer.end(message)
}

/** What a decision adds to its request's span (steward.decision.outcome, steward.agent, …). */
export interface SpanDecision {
  readonly outcome: string
  /** The handle the request named, if any. */
  readonly agent: string | null
  /** The agent of an agent key (which names no handle), if any. */
  readonly agentId: string | null
  readonly action: string
}

/** Ids a served request's span was given before it ended (its traceparent was asked for). */
export interface SpanIds {
  readonly traceId: string
  readonly spanId: string
  /** The span id of the incoming traceparent, if any. */
  readonly parentSpanId: string | null
}

/**
 * The spans of served requests (kind server), kept as their fields until their batch is encoded.
 * A span's ids come from `source`: an incoming traceparent (its trace id, and its parent id as the
 * parent; the span id is new; checked here, and if invalid a new trace), ids given earlier, or
 * null (a new trace: both ids new).
 */
class ServedSpans {
  private readonly sources: (string | SpanIds | null)[] = []
  private readonly times: number[] = []
  private readonly methods: string[] = []
  private readonly routes: (string | null)[] = []
  private readonly statuses: number[] = []
  private readonly decisions: (SpanDecision | null)[] = []
  private lastMethod = ''
  private lastRoute: string | null = null
  private lastName = ''
  count = 0

  add(source: string | SpanIds | null, startMs: number, endMs: number, method: string, route: string | null, status: number, decision: SpanDecision | null): void {
    const i = this.count++
    this.sources[i] = source
    this.times[2 * i] = startMs
    this.times[2 * i + 1] = endMs
    this.methods[i] = method
    this.routes[i] = route
    this.statuses[i] = status
    this.decisions[i] = decision
  }

  /** Encodes every span kept, and forgets them (the references, so their strings can go). */
  encode(writer: Writer): void {
    for (let i = 0; i < this.count; i++) {
      const message = writer.begin(2)
      const source = this.sources[i]!
      let remote = false
      if (source === null) {
        writer.randomId(1, 16)
        writer.randomId(2, 8)
      } else if (typeof source === 'string' && traceFlags(source) < 0) {
        // Kept unchecked (services/tracing.ts) and not a valid traceparent: a new trace.
        writer.randomId(1, 16)
        writer.randomId(2, 8)
      } else if (typeof source === 'string') {
        writer.hex(1, source, 3, 16)
        writer.randomId(2, 8)
        writer.hex(4, source, 36, 8)
        remote = true
      } else {
        writer.hex(1, source.traceId)
        writer.hex(2, source.spanId)
        if (source.parentSpanId !== null) writer.hex(4, source.parentSpanId)
        remote = source.parentSpanId !== null
      }
      const method = this.methods[i]!
      const route = this.routes[i]!
      const status = this.statuses[i]!
      // OpenTelemetry's HTTP span name and attributes: the method and the route template. Most
      // spans of a batch are named alike: the last name is kept rather than made again.
      if (method !== this.lastMethod || route !== this.lastRoute) {
        this.lastMethod = method
        this.lastRoute = route
        this.lastName = route !== null ? `${method} ${route}` : method
      }
      named(writer, this.lastName, SERVER, this.times[2 * i]!, this.times[2 * i + 1]!)
      attribute(writer, 9, KEY.method, method)
      attribute(writer, 9, KEY.status, status)
      if (route !== null) attribute(writer, 9, KEY.route, route)
      const decision = this.decisions[i]!
      if (decision !== null) {
        attribute(writer, 9, KEY.outcome, decision.outcome)
        if (decision.agent !== null) attribute(writer, 9, KEY.agent, decision.agent)
        if (decision.agentId !== null) attribute(writer, 9, KEY.agentId, decision.agentId)
        attribute(writer, 9, KEY.action, decision.action)
      }
      closing(writer, status >= 500 ? ERROR : 0, SAMPLED, remote)
      writer.end(message)
      this.sources[i] = null
      this.decisions[i] = null
      this.routes[i] = null
    }
    this.count = 0
  }
}

/**
 * Spans gathered into one ExportTraceServiceRequest:
 * resource_spans 1 { resource 1 { attributes 1 }, scope_spans 2 { scope 1 { name 1 }, spans 2 } }.
 */
export class SpanBatch {
  private readonly spans = new Writer()
  private readonly served = new ServedSpans()
  private readonly envelope = new Writer()
  /** resource 1 { attributes 1 { service.name } } and scope 1 { name 1 }, encoded once. */
  private readonly resource: Uint8Array
  private readonly scope: Uint8Array
  private ended = 0

  constructor(serviceName: string) {
    const writer = new Writer()
    const resource = writer.begin(1)
    attribute(writer, 1, 'service.name', serviceName)
    writer.end(resource)
    this.resource = writer.take()
    const scope = writer.begin(1)
    writer.string(1, 'steward')
    writer.end(scope)
    this.scope = writer.take()
  }

  /** Spans waiting in the batch. */
  get count(): number {
    return this.ended + this.served.count
  }

  /** A span that ended (encoded now). */
  add(span: EndedSpan): void {
    encodeSpan(this.spans, span)
    this.ended++
  }

  /**
   * The span of a served request (encoded with the batch); sampled, or not added. Times: Unix
   * epoch milliseconds; `source`: see ServedSpans.
   */
  addServed(source: string | SpanIds | null, startMs: number, endMs: number, method: string, route: string | null, status: number, decision: SpanDecision | null): void {
    this.served.add(source, startMs, endMs, method, route, status, decision)
  }

  /**
   * The request body with every span added since the last call, and an empty batch after it.
   * What comes before the spans is written first, its lengths counted from theirs, and the spans
   * are copied once after it.
   */
  take(): Uint8Array<ArrayBuffer> {
    this.served.encode(this.spans)
    this.ended = 0
    const spans = this.spans
    const scopeSpans = this.scope.length + spans.at
    const resourceSpans = this.resource.length + 1 + varintSize(scopeSpans) + scopeSpans
    const head = this.envelope
    head.tag(1, 2)
    head.varint(resourceSpans)
    head.raw(this.resource)
    head.tag(2, 2)
    head.varint(scopeSpans)
    head.raw(this.scope)
    const body = new Uint8Array(head.at + spans.at)
    body.set(head.bytes.subarray(0, head.at))
    body.set(spans.bytes.subarray(0, spans.at), head.at)
    head.at = 0
    spans.at = 0
    return body
  }
}
