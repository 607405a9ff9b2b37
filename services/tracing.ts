// OpenTelemetry traces (docs/observability.md), on only when OTEL_EXPORTER_OTLP_ENDPOINT is set: a
// span per request (kind server) continues the trace of an incoming `traceparent`; a span per
// webhook delivery (kind client) gives the receiver a `traceparent` of its own, as does each HTTP
// request to an MCP upstream. There is no ambient context (no AsyncLocalStorage:
// docs/architecture.md): what a span needs travels as arguments.
//
// Spans are encoded as they end (services/otlp.ts) and leave in batches as OTLP/HTTP protobuf,
// one request at a time, retried on the codes the OTLP specification names as transient. Not the
// OpenTelemetry SDK: with no context to manage, its Tracer and exporter only added objects per span,
// and their garbage was most of what tracing cost.
import { randomFillSync } from 'node:crypto'
import http from 'node:http'
import https from 'node:https'
import type { EndedSpan } from './otlp.ts'

export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL; spans go to <it>/v1/traces. */
  readonly endpoint: string
  readonly serviceName: string
  /** OTEL_TRACES_SAMPLER (those that need no remote configuration) and OTEL_TRACES_SAMPLER_ARG. */
  readonly sampler: 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio'
  readonly samplerRatio: number
  /** A batch that could not be delivered (after its retries): its spans are dropped. */
  readonly onExportError: (error: Error) => void
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

/** A request's span, while the request runs. */
export interface RequestSpan {
  /** The decision made for the request: its outcome, agent and action become attributes. */
  setDecision(decision: SpanDecision): void
  /** Ends the span with what the answer was; `at`: performance.now() when it was sent. */
  end(method: string, route: string | null, status: number, at: number): void
  /** The W3C traceparent naming this span: what work done for the request continues. */
  traceparent(): string
}

export interface Tracing {
  /**
   * Starts the span of an incoming request (continuing its `traceparent`, if valid); `at`:
   * performance.now() when it came (the caller's clock reading, not a second one).
   */
  request(request: Request, at: number): RequestSpan
  /**
   * Runs `work` (an outgoing request) under a client span, a child of `parent` (a traceparent)
   * when given, else the root of a new trace; `work` sends the headers it is given.
   */
  outgoing<T>(name: string, attributes: Readonly<Record<string, string>>, work: (headers: Readonly<Record<string, string>>) => Promise<T>, parent?: string | null): Promise<T>
  /** Sends the spans that are waiting. */
  flush(): Promise<void>
  /** Sends what waits, then stops. */
  close(): Promise<void>
}

/** A parsed W3C traceparent. */
interface Parent {
  readonly traceId: string
  readonly spanId: string
  readonly sampled: boolean
}

// OTLP's SpanKind and StatusCode.
const SERVER = 2
const CLIENT = 3
const ERROR = 2
/** A batch leaves when it holds this many spans, or `DELAY_MS` after its first span. */
const BATCH = 512
const DELAY_MS = 1000
/** Spans waiting (encoded) beyond this, while the collector is slow or down, are dropped. */
const MAX_WAITING = 8192
const TIMEOUT_MS = 10_000
/** OTLP/HTTP: these answers mean "try again later"; anything else non-2xx drops the batch. */
const RETRYABLE = new Set([429, 502, 503, 504])
const RETRY_DELAYS_MS = [1000, 4000]

const NO_ATTRIBUTES: readonly (string | number)[] = []
/** Version, trace id, parent id and flags, then the end or (a later version's) more after a dash. */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(?:$|-)/
const ZEROS = '0000000000000000'

/**
 * W3C Trace Context: `version-traceid-parentid-flags`, lower-case hex; version ff is invalid,
 * version 00 has exactly these four fields, and neither id may be all zeros. It runs on every
 * request: one test of the whole, then slices, and no capture groups.
 */
export function parseTraceparent(header: string | null | undefined): Parent | null {
  if (!header) return null
  const value = header.trim()
  if (!TRACEPARENT.test(value) || value.startsWith('ff')) return null
  if (value.length > 55 && (value.startsWith('00') || /[\r\n]/.test(value))) return null
  if ((value.startsWith(ZEROS, 3) && value.startsWith(ZEROS, 19)) || value.startsWith(ZEROS, 36)) return null
  return { traceId: value.slice(3, 35), spanId: value.slice(36, 52), sampled: (parseInt(value[54]!, 16) & 1) === 1 }
}

/** Random ids in hex, from a pool of random bytes refilled when used up. */
function idSource(): (bytes: number) => string {
  const pool = Buffer.allocUnsafe(4096)
  let at = pool.length
  return (bytes) => {
    for (;;) {
      if (at + bytes > pool.length) {
        randomFillSync(pool)
        at = 0
      }
      const start = at
      at += bytes
      for (let i = start; i < at; i++) if (pool[i] !== 0) return pool.toString('hex', start, at)
    }
  }
}

/** The W3C traceparent (version 00) naming a span. */
const traceparent = (traceId: string, spanId: string, sampled: boolean): string => `00-${traceId}-${spanId}-0${sampled ? 1 : 0}`

/** Now, in Unix epoch milliseconds with a fraction: a monotonic clock anchored once. */
const epochMs = (): number => performance.timeOrigin + performance.now()

/** Builds the tracer: spans are encoded as they end and sent in batches to the collector. */
export async function loadTracing(settings: TracingSettings): Promise<Tracing> {
  const { SpanBatch } = await import('./otlp.ts')
  const url = `${settings.endpoint.replace(/\/+$/, '')}/v1/traces`
  const newId = idSource()
  const parentBased = settings.sampler.startsWith('parentbased_')
  // The ratio samplers keep a trace when the low 56 bits of its id fall under ratio × 2^56
  // (OpenTelemetry's TraceIdRatioBased, the same choice in every process of the trace).
  const threshold = settings.sampler.endsWith('always_on') ? 2n ** 56n : settings.sampler.endsWith('always_off') ? 0n : BigInt(Math.round(settings.samplerRatio * 2 ** 56))
  const sampledRoot = (traceId: string) => BigInt(`0x${traceId.slice(18)}`) < threshold

  const batch = new SpanBatch(settings.serviceName)
  const waiting: { body: Uint8Array; spans: number }[] = []
  let waitingSpans = 0
  let timer: ReturnType<typeof setTimeout> | null = null
  let closed = false

  // node:http rather than fetch: a batch is one buffer, and fetch's body handling cost more
  // than the encoding of the spans in it.
  const target = new URL(url)
  const client = target.protocol === 'https:' ? https : http
  const agent = new client.Agent({ keepAlive: true, maxSockets: 1 })
  const send = (body: Uint8Array) =>
    new Promise<number>((resolve, reject) => {
      const request = client.request(target, { method: 'POST', agent, timeout: TIMEOUT_MS, headers: { 'content-type': 'application/x-protobuf', 'content-length': body.length } }, (response) => {
        response.resume()
        response.on('end', () => resolve(response.statusCode ?? 0))
        response.on('error', reject)
      })
      request.on('timeout', () => request.destroy(new Error(`no answer from the collector within ${TIMEOUT_MS} ms`)))
      request.on('error', reject)
      request.end(body)
    })
  const post = async (body: Uint8Array): Promise<void> => {
    for (let attempt = 0; ; attempt++) {
      let failure: Error
      let retryable = true
      try {
        const status = await send(body)
        if (status >= 200 && status < 300) return
        failure = new Error(`the collector answered ${status}`)
        retryable = RETRYABLE.has(status)
      } catch (error) {
        // Unreachable, reset or timed out: worth another try.
        failure = error instanceof Error ? error : new Error(String(error))
      }
      if (!retryable || closed || attempt >= RETRY_DELAYS_MS.length) throw failure
      await new Promise((resolve) => setTimeout(resolve, RETRY_DELAYS_MS[attempt]).unref())
    }
  }
  /** Sends the waiting bodies one after another, one pump at a time. */
  let pumping = false
  const idle: (() => void)[] = []
  const pump = async () => {
    if (pumping) return
    pumping = true
    try {
      while (waiting.length > 0) {
        const next = waiting.shift()!
        waitingSpans -= next.spans
        await post(next.body).catch((error: Error) => settings.onExportError(error))
      }
    } finally {
      pumping = false
      for (const resolve of idle.splice(0)) resolve()
    }
  }
  /** Settles when nothing waits and nothing is being sent. */
  const settled = () => (pumping ? new Promise<void>((resolve) => idle.push(resolve)) : Promise.resolve())
  const cut = () => {
    if (timer !== null) clearTimeout(timer)
    timer = null
    if (batch.count === 0) return
    const spans = batch.count
    const body = batch.take()
    if (waitingSpans + spans > MAX_WAITING) return settings.onExportError(new Error(`${spans} spans dropped: the collector is not keeping up`))
    waiting.push({ body, spans })
    waitingSpans += spans
    void pump()
  }
  const finish = (span: EndedSpan) => {
    if (closed) return
    batch.add(span)
    if (batch.count >= BATCH) cut()
    else if (timer === null) timer = setTimeout(cut, DELAY_MS).unref()
  }
  /** A new span under `parent` (if any): its ids and whether it is sampled. */
  /** Whether a new span under `parent` (or a new trace `traceId`) is sampled. */
  const sampled = (parent: Parent | null, traceId: string) => (parent !== null && parentBased ? parent.sampled : sampledRoot(traceId))

  return {
    request(request, at) {
      const parent = parseTraceparent(request.headers.get('traceparent'))
      const traceId = parent?.traceId ?? newId(16)
      return new ServerSpan(finish, traceId, newId(8), parent, sampled(parent, traceId), at)
    },
    async outgoing(name, attributes, work, parentHeader) {
      const startMs = epochMs()
      const parent = parseTraceparent(parentHeader)
      const traceId = parent?.traceId ?? newId(16)
      const span = { traceId, spanId: newId(8), sampled: sampled(parent, traceId) }
      let failed = false
      try {
        return await work({ traceparent: traceparent(span.traceId, span.spanId, span.sampled) })
      } catch (error) {
        failed = true
        throw error
      } finally {
        // The parent is the request's own span (same process), not a remote one.
        if (span.sampled) {
          finish({ traceId: span.traceId, spanId: span.spanId, parentSpanId: parent?.spanId ?? null, flags: 1, remoteParent: false, name, kind: CLIENT, startMs, endMs: epochMs(), attributes: Object.entries(attributes).flat(), status: failed ? ERROR : 0 })
        }
      }
    },
    async flush() {
      cut()
      await settled()
    },
    async close() {
      cut()
      closed = true
      await settled()
      agent.destroy()
    },
  }
}

/**
 * The span of a request being served: a class, so a span is one object with its fields and no
 * closures; it becomes the encoded span itself when it ends.
 */
class ServerSpan implements RequestSpan, EndedSpan {
  readonly startMs: number
  endMs = 0
  readonly parentSpanId: string | null
  readonly flags = 1
  readonly remoteParent = true
  name = ''
  readonly kind = SERVER
  attributes: readonly (string | number)[] = NO_ATTRIBUTES
  status = 0
  private decision: SpanDecision | null = null

  constructor(
    private readonly finish: (span: EndedSpan) => void,
    readonly traceId: string,
    readonly spanId: string,
    parent: Parent | null,
    private readonly sampled: boolean,
    at: number,
  ) {
    this.startMs = performance.timeOrigin + at
    this.parentSpanId = parent?.spanId ?? null
  }

  setDecision(decision: SpanDecision): void {
    this.decision = decision
  }

  traceparent(): string {
    return traceparent(this.traceId, this.spanId, this.sampled)
  }

  end(method: string, route: string | null, status: number, at: number): void {
    if (!this.sampled) return
    this.endMs = performance.timeOrigin + at
    // Built once, at the end, in one list: OpenTelemetry's HTTP attributes, then the decision's.
    const attributes: (string | number)[] = ['http.request.method', method, 'http.response.status_code', status]
    if (route !== null) attributes.push('http.route', route)
    const decision = this.decision
    if (decision !== null) {
      attributes.push('steward.decision.outcome', decision.outcome)
      if (decision.agent !== null) attributes.push('steward.agent', decision.agent)
      if (decision.agentId !== null) attributes.push('steward.agent_id', decision.agentId)
      attributes.push('steward.action', decision.action)
    }
    this.attributes = attributes
    // OpenTelemetry's HTTP span name: the method and the route template.
    this.name = route !== null ? `${method} ${route}` : method
    this.status = status >= 500 ? ERROR : 0
    this.finish(this)
  }
}
