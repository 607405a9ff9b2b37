// What the server tells operators about itself (docs/observability.md): Prometheus metrics when
// METRICS_TOKEN is set, OpenTelemetry traces when OTEL_EXPORTER_OTLP_ENDPOINT is set, neither by
// default. Built once per handler by the composition root and handed to the services in Deps as
// `telemetry`; the packages each part needs are imported on first use, so with both off nothing
// is loaded and every hook is a skipped optional call.
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { Database } from '../database/schema.ts'
import type { AnswerObserver, ConnectionInfo } from '../http/context.ts'
import type { Logger } from '../log.ts'
import { loadMetrics, type Metrics, type PoolStats } from './metrics.ts'
import { loadTracing, type SpanDecision, type Tracing } from './tracing.ts'

export type { PoolStats } from './metrics.ts'

export interface Telemetry extends AnswerObserver {
  /** Metrics are served (METRICS_TOKEN is set). */
  readonly metricsOn: boolean
  /**
   * A decision was made and logged in `seconds`, for the request `requestId` (its span gets the
   * outcome). `agent`: the handle the request named; `agentId`: the agent of an agent key (which
   * names no handle).
   */
  decided(answer: { readonly decision: string; readonly reasons: readonly object[] }, agent: string | null, action: string, seconds: number, requestId: string | null, agentId?: string | null): void
  /** An approval was approved, denied or cancelled, `seconds` after it was requested. */
  approvalClosed(result: string, seconds: number): void
  /** One webhook delivery attempt's result. */
  webhookAttempt(result: 'delivered' | 'failed' | 'gave_up'): void
  /** Runs an outgoing request under a client span (tracing on): `work` adds the headers it gets ({} when off). */
  outgoing<T>(name: string, attributes: Readonly<Record<string, string>>, work: (headers: Readonly<Record<string, string>>) => Promise<T>, parent?: string | null): Promise<T>
  /** The traceparent of the span of `request` while it is served (tracing on), else null. */
  traceparentOf(request: Request): string | null
  /**
   * The handler's fetch, holding the requests that come before the packages are loaded until
   * they are: each request is then observed whole, its trace continued into work done for it.
   */
  gate(fetch: Fetch): Fetch
  /** The /metrics answer; null when metrics are off. */
  scrape(): Promise<{ contentType: string; text: string } | null>
  /** Sends the spans that wait (tests, shutdown). */
  flush(): Promise<void>
  close(): Promise<void>
}

export interface TelemetryDeps {
  readonly db: Kysely<Database>
  readonly clock: () => number
  readonly logger: Logger
  readonly pool?: PoolStats | null
}

type Fetch = (request: Request, conn?: ConnectionInfo) => Response | Promise<Response>

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/** The rule a decision's first reason names: a policy, or the rule (default_decision, limit_exceeded…). */
function ruleOf(reasons: readonly object[]): string {
  const first = reasons[0] as { rule?: unknown } | undefined
  if (!first) return 'none'
  return typeof first.rule === 'string' ? first.rule : 'policy'
}

/** The limiter named by a 429's RateLimit-Policy header (`"api";q=…`). */
function limiterOf(headers: Readonly<Record<string, string>>): string {
  let policy = ''
  for (const name in headers) if (name.toLowerCase() === 'ratelimit-policy') policy = headers[name]!
  return /^"([\w.-]{1,40})"/.exec(policy)?.[1] ?? 'other'
}

/** The telemetry the configuration asks for, or null when it asks for none. */
export function createTelemetry(config: Pick<Config, 'metricsToken' | 'otelEndpoint' | 'otelServiceName' | 'otelSampler' | 'otelSamplerRatio'>, deps: TelemetryDeps): Telemetry | null {
  const metricsOn = config.metricsToken !== null
  const tracingOn = config.otelEndpoint !== null
  if (!metricsOn && !tracingOn) return null
  let metrics: Metrics | null = null
  let tracing: Tracing | null = null
  const fail = (what: string) => (error: unknown) => {
    deps.logger.log('error', `${what} could not be loaded`, { message: String((error as Error)?.message ?? error).slice(0, 200) })
    return null
  }
  const exportFailed = (error: unknown) => deps.logger.log('warn', 'trace export failed', { code: (error as { code?: string }).code ?? null, message: String((error as Error)?.message ?? error).slice(0, 200) })
  // Loaded once, at construction; answers that come before it is done are observed once it is.
  const ready = Promise.all([
    metricsOn ? loadMetrics({ ...deps, onScrapeError: (error) => deps.logger.log('warn', 'metrics scrape read failed', { code: (error as { code?: string }).code ?? null }) }).catch(fail('metrics (prom-client)')) : null,
    tracingOn ? loadTracing({ endpoint: config.otelEndpoint!, serviceName: config.otelServiceName, sampler: config.otelSampler, samplerRatio: config.otelSamplerRatio, onExportError: exportFailed }).catch(fail('tracing')) : null,
  ]).then(([loadedMetrics, loadedTracing]) => {
    metrics = loadedMetrics
    tracing = loadedTracing
  })
  let loaded = false
  void ready.then(() => (loaded = true))
  // A decision's span attributes, by request id, until its request's span ends: the decision
  // service knows the request id, not the span. Bounded: a flood of ids empties it.
  const decisions = new Map<string, SpanDecision>()
  /** An answer's request metric and span. */
  const observe = (request: Request, requestId: string, status: number, headers: Readonly<Record<string, string>>, startedAt: number, endedAt: number) => {
    // The route template itty-router matched (never the raw path); none: no route matched.
    const route = (request as { route?: string }).route ?? null
    metrics?.request(request.method, route ?? 'unmatched', status, (endedAt - startedAt) / 1000, status === 429 ? limiterOf(headers) : null)
    if (tracing === null) return
    const decision = decisions.get(requestId) ?? null
    if (decision !== null) decisions.delete(requestId)
    ;(tracing as Tracing).served(request, startedAt, endedAt, route, status, decision)
  }

  return {
    metricsOn,
    decided(answer, agent, action, seconds, requestId, agentId) {
      metrics?.decided(answer.decision, ruleOf(answer.reasons), seconds)
      if (tracing === null || requestId === null) return
      if (decisions.size >= 10_000) decisions.clear()
      decisions.set(requestId, { outcome: answer.decision, agent, agentId: agentId ?? null, action })
    },
    approvalClosed(result, seconds) {
      metrics?.approvalClosed(result, seconds)
    },
    webhookAttempt(result) {
      metrics?.webhookAttempt(result)
    },
    outgoing(name, attributes, work, parent) {
      return tracing ? (tracing as Tracing).outgoing(name, attributes, work, parent) : work(NO_HEADERS)
    },
    traceparentOf(request) {
      return tracing ? (tracing as Tracing).traceparentOf(request) : null
    },
    answered(request, requestId, status, headers, startedAt) {
      const endedAt = performance.now()
      if (loaded) observe(request, requestId, status, headers, startedAt, endedAt)
      // Only a handler's other doors (not gated) answer before the packages are loaded.
      else void ready.then(() => observe(request, requestId, status, headers, startedAt, endedAt))
    },
    gate(fetch) {
      return (request, conn) => (loaded ? fetch(request, conn) : ready.then(() => fetch(request, conn)))
    },
    async scrape() {
      await ready
      return metrics ? (metrics as Metrics).scrape() : null
    },
    async flush() {
      await ready
      await (tracing as Tracing | null)?.flush().catch(exportFailed)
    },
    async close() {
      await ready
      // A collector that is down must not fail the shutdown: the spans are lost, and logged so.
      await (tracing as Tracing | null)?.close().catch(exportFailed)
    },
  }
}

/**
 * `fetch` with a client span per request when tracing is on, its traceparent sent as a header
 * (the MCP gateway's requests to upstream servers); `fetch` itself when it is off.
 */
export function tracedFetch(fetch: typeof globalThis.fetch, telemetry: Telemetry | undefined, name: string): typeof globalThis.fetch {
  if (!telemetry) return fetch
  return (input, init = {}) =>
    telemetry.outgoing(
      name,
      {},
      (trace) => {
        if (trace.traceparent === undefined) return fetch(input, init)
        const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined))
        for (const [header, value] of Object.entries(trace)) headers.set(header, value)
        return fetch(input, { ...init, headers })
      },
      parentIn(init.body),
    )
}

/**
 * The trace an MCP message continues: `params._meta.traceparent`, where the gateway puts the
 * traceparent of the request it serves (OpenTelemetry's convention for MCP); null for others.
 */
function parentIn(body: unknown): string | null {
  if (typeof body !== 'string' || !body.includes('"traceparent"')) return null
  try {
    const value = (JSON.parse(body) as { params?: { _meta?: { traceparent?: unknown } } }).params?._meta?.traceparent
    // Checked where it is used (services/tracing.ts, parseTraceparent): a malformed one starts a new trace.
    return typeof value === 'string' ? value : null
  } catch {
    return null
  }
}
