// A local OTLP/HTTP receiver for the tracing tests: a node:http server taking POST /v1/traces in
// the JSON encoding (what @opentelemetry/exporter-trace-otlp-http sends) and keeping every span.
import { createServer } from 'node:http'
import type { Test } from 'tap'

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string
  readonly name: string
  /** 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Record<string, string | number | boolean>
  readonly serviceName: string
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number }

function valueOf(value: AnyValue): string | number | boolean {
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.boolValue !== undefined) return value.boolValue
  if (value.doubleValue !== undefined) return value.doubleValue
  throw new Error(`unexpected attribute value ${JSON.stringify(value)}`)
}

function attributesOf(list: { key: string; value: AnyValue }[] = []): Record<string, string | number | boolean> {
  return Object.fromEntries(list.map(({ key, value }) => [key, valueOf(value)]))
}

export async function otlpReceiver(t: Test): Promise<{ url: string; spans: ReceivedSpan[]; contentTypes: string[] }> {
  const spans: ReceivedSpan[] = []
  const contentTypes: string[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      if (request.method !== 'POST' || request.url !== '/v1/traces') return void response.writeHead(404).end()
      contentTypes.push(String(request.headers['content-type']))
      const body = JSON.parse(Buffer.concat(chunks).toString())
      for (const resourceSpans of body.resourceSpans ?? []) {
        const serviceName = String(attributesOf(resourceSpans.resource?.attributes)['service.name'])
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({ traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, kind: span.kind, attributes: attributesOf(span.attributes), serviceName })
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, contentTypes }
}
