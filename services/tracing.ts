// OpenTelemetry traces (docs/observability.md), on only when OTEL_EXPORTER_OTLP_ENDPOINT is set: a
// span per request (kind server) continues the trace of an incoming `traceparent`; a span per
// webhook delivery (kind client) gives the receiver a `traceparent` of its own, as does each HTTP
// request to an MCP upstream. There is no ambient context (no AsyncLocalStorage:
// docs/architecture.md): what a span needs travels as arguments.
//
// A served request's span is kept as a few fields until its batch leaves; the batch is encoded
// then, in one loop (services/otlp.ts), and sent as OTLP/HTTP protobuf, one request at a time,
// retried on the codes the OTLP specification names as transient. Not the OpenTelemetry SDK:
// with no context to manage, its Tracer and exporter only added objects per span, and their
// garbage was most of what tracing cost.
import { randomFillSync } from 'node:crypto'
import http from 'node:http'
import https from 'node:https'
import type { SpanDecision, SpanIds } from './otlp.ts'
import { parseTraceparent, readsSampled, traceFlags, type Parent } from './traceparent.ts'

export type { SpanDecision } from './otlp.ts'
export { parseTraceparent, traceFlags } from './traceparent.ts'

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

export interface Tracing {
  /**
   * The span of a request that was served (continuing its `traceparent`, if valid), with what
   * the answer was; `startAt` and `endAt`: performance.now() when it came and when it was answered
   * (the caller's clock readings, not more of them). `decision`: the decision made for it.
   */
  served(request: Request, startAt: number, endAt: number, route: string | null, status: number, decision: SpanDecision | null): void
  /**
   * The W3C traceparent naming the span of `request`, while it is served: what work done for it
   * (a call to an MCP upstream) continues. Its span gets its ids now, not when it ends.
   */
  traceparentOf(request: Request): string
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

// OTLP's SpanKind and StatusCode.
const CLIENT = 3
const ERROR = 2
/**
 * A batch leaves when it holds this many spans, or `DELAY_MS` after its first span. Four times
 * the SDK's 512: a send costs about the same whatever its size (node:http's work, done too
 * rarely to be compiled hot), and it was a per-request cost worth cutting at full load.
 */
const BATCH = 2048
const DELAY_MS = 1000
/** Spans waiting (encoded) beyond this, while the collector is slow or down, are dropped. */
const MAX_WAITING = 8192
const TIMEOUT_MS = 10_000
/** OTLP/HTTP: these answers mean "try again later"; anything else non-2xx drops the batch. */
const RETRYABLE = new Set([429, 502, 503, 504])
const RETRY_DELAYS_MS = [1000, 4000]

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

/** Where performance.now() counts from, in Unix epoch milliseconds (a getter that calls into C++). */
const TIME_ORIGIN = performance.timeOrigin
/** Now, in Unix epoch milliseconds with a fraction: a monotonic clock anchored once. */
const epochMs = (): number => TIME_ORIGIN + performance.now()

/** The ids a request's span was given when its traceparent was asked for, and whether it is sampled. */
interface GivenIds extends SpanIds {
  readonly sampled: boolean
}
const IDS = Symbol('steward.trace')
type Traced = Request & { [IDS]?: GivenIds }

/**
 * Builds the tracer: served requests' spans wait as their fields and are encoded when their batch
 * leaves, client spans as they end; batches go to the collector one at a time.
 */
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
  const added = () => {
    if (batch.count >= BATCH) cut()
    else if (timer === null) timer = setTimeout(cut, DELAY_MS).unref()
  }
  /** Whether a new span under `parent` (or a new trace `traceId`) is sampled. */
  const sampled = (parent: Parent | null, traceId: string) => (parent !== null && parentBased ? parent.sampled : sampledRoot(traceId))
  const always = threshold === 2n ** 56n
  const never = threshold === 0n

  /** The ids of a request's span, given now (and kept on the request for its end). */
  const idsOf = (request: Request): GivenIds => {
    let ids = (request as Traced)[IDS]
    if (ids === undefined) {
      const parent = parseTraceparent(request.headers.get('traceparent'))
      const traceId = parent?.traceId ?? newId(16)
      ids = { traceId, spanId: newId(8), parentSpanId: parent?.spanId ?? null, sampled: sampled(parent, traceId) }
      ;(request as Traced)[IDS] = ids
    }
    return ids
  }

  return {
    served(request, startAt, endAt, route, status, decision) {
      if (closed) return
      // Most requests: nothing asked for their ids, so the batch makes them as it is encoded.
      let source: string | GivenIds | null = (request as Traced)[IDS] ?? null
      if (source === null) {
        const header = request.headers.get('traceparent')?.trim() ?? ''
        if (always && (header === '' || !parentBased || readsSampled(header))) {
          // Kept whatever the header holds: it waits unchecked and its batch checks it (an
          // invalid one starts a new trace there, as it would here). Only a valid "not sampled"
          // must be told apart now.
          source = header === '' ? null : header
        } else {
          const flags = header === '' ? -1 : traceFlags(header)
          if (flags >= 0 && parentBased) {
            if ((flags & 1) === 0) return
            source = header
          } else if (always) source = null
          else if (never) return
          // A ratio sampler: the trace id decides.
          else source = idsOf(request)
        }
      }
      if (source !== null && typeof source !== 'string' && !source.sampled) return
      batch.addServed(source, TIME_ORIGIN + startAt, TIME_ORIGIN + endAt, request.method, route, status, decision)
      added()
    },
    traceparentOf(request) {
      const ids = idsOf(request)
      return traceparent(ids.traceId, ids.spanId, ids.sampled)
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
        if (span.sampled && !closed) {
          batch.add({ traceId: span.traceId, spanId: span.spanId, parentSpanId: parent?.spanId ?? null, flags: 1, remoteParent: false, name, kind: CLIENT, startMs, endMs: epochMs(), attributes: Object.entries(attributes).flat(), status: failed ? ERROR : 0 })
          added()
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
