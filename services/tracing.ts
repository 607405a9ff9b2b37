// OpenTelemetry traces (docs/observability.md), on only when OTEL_EXPORTER_OTLP_ENDPOINT is set:
// the packages (@opentelemetry/*, optional dependencies) are imported here, by `loadTracing`,
// and nowhere else, so a server without the setting never loads them. A span per request (kind
// server) continues the trace of an incoming `traceparent`; a span per webhook delivery (kind
// client) gives the receiver a `traceparent` of its own, as does each HTTP request to an MCP
// upstream. There is no ambient context (no AsyncLocalStorage: docs/architecture.md): what a span
// needs travels as arguments. Spans leave in batches, as OTLP/HTTP JSON.

export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL; spans go to <it>/v1/traces. */
  readonly endpoint: string
  readonly serviceName: string
}

/** A request's span, while the request runs. */
export interface RequestSpan {
  /** Adds attributes (the decision's outcome, agent and action). */
  setAttributes(attributes: Readonly<Record<string, string>>): void
  /** Ends the span with what the answer was. */
  end(method: string, route: string | null, status: number): void
  /** The W3C traceparent naming this span: what work done for the request continues. */
  traceparent(): string
}

export interface Tracing {
  /** Starts the span of an incoming request (continuing its `traceparent`, if valid). */
  request(request: Request): RequestSpan
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

/** Imports the OpenTelemetry packages and builds the tracer. */
export async function loadTracing(settings: TracingSettings): Promise<Tracing> {
  const [api, core, sdk, exporterModule, resources] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/core'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ])
  const exporter = new exporterModule.OTLPTraceExporter({ url: `${settings.endpoint.replace(/\/+$/, '')}/v1/traces` })
  const provider = new sdk.BasicTracerProvider({
    resource: resources.resourceFromAttributes({ 'service.name': settings.serviceName }),
    // Larger batches than the default 512: fewer exports (each one a JSON body and a request).
    spanProcessors: [new sdk.BatchSpanProcessor(exporter, { maxQueueSize: 8192, maxExportBatchSize: 2048, scheduledDelayMillis: 2000 })],
  })
  // The provider is not registered globally: two handlers in one process keep their own.
  const tracer = provider.getTracer('steward')
  const propagator = new core.W3CTraceContextPropagator()
  const getter = { get: (carrier: Headers, key: string) => carrier.get(key) ?? undefined, keys: (carrier: Headers) => [...carrier.keys()] }

  const traceparentOf = (span: import('@opentelemetry/api').Span): string => {
    const context = span.spanContext()
    return `00-${context.traceId}-${context.spanId}-0${(context.traceFlags & 1).toString(16)}`
  }

  return {
    request(request) {
      const traceparent = request.headers.get('traceparent')
      const parent = traceparent === null ? api.ROOT_CONTEXT : propagator.extract(api.ROOT_CONTEXT, request.headers, getter)
      const span = tracer.startSpan(request.method, { kind: api.SpanKind.SERVER, attributes: { 'http.request.method': request.method } }, parent)
      return {
        setAttributes: (attributes) => void span.setAttributes(attributes),
        traceparent: () => traceparentOf(span),
        end(method, route, status) {
          // OpenTelemetry's HTTP span name: the method and the route template.
          if (route !== null) span.updateName(`${method} ${route}`)
          span.setAttributes({ 'http.response.status_code': status, ...(route !== null ? { 'http.route': route } : {}) })
          if (status >= 500) span.setStatus({ code: api.SpanStatusCode.ERROR })
          span.end()
        },
      }
    },
    async outgoing(name, attributes, work, parent) {
      const context = parent ? propagator.extract(api.ROOT_CONTEXT, new Headers({ traceparent: parent }), getter) : api.ROOT_CONTEXT
      const span = tracer.startSpan(name, { kind: api.SpanKind.CLIENT, attributes }, context)
      try {
        return await work({ traceparent: traceparentOf(span) })
      } catch (error) {
        span.setStatus({ code: api.SpanStatusCode.ERROR })
        throw error
      } finally {
        span.end()
      }
    },
    flush: () => provider.forceFlush(),
    close: () => provider.shutdown(),
  }
}
