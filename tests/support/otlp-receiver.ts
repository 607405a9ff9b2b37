// A local OTLP/HTTP receiver for the tracing tests: a node:http server taking POST /v1/traces in
// the protobuf encoding (the default) or JSON, and keeping every span. The protobuf is read here
// from the wire format of opentelemetry-proto's ExportTraceServiceRequest, field by field, not with
// the exporter's own code, so a test would notice the exporter sending something else.
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
  /** Unix epoch nanoseconds. */
  readonly startNanos: bigint
  readonly endNanos: bigint
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
      const contentType = String(request.headers['content-type'])
      contentTypes.push(contentType)
      const bytes = Buffer.concat(chunks)
      const body = contentType === 'application/x-protobuf' ? decodeRequest(bytes) : JSON.parse(bytes.toString())
      for (const resourceSpans of body.resourceSpans ?? []) {
        const serviceName = String(attributesOf(resourceSpans.resource?.attributes)['service.name'])
        for (const scope of resourceSpans.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({ traceId: span.traceId, spanId: span.spanId, parentSpanId: span.parentSpanId ?? '', name: span.name, kind: span.kind, attributes: attributesOf(span.attributes), serviceName, startNanos: BigInt(span.startTimeUnixNano ?? 0), endNanos: BigInt(span.endTimeUnixNano ?? 0) })
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

// The protobuf wire format: (field number << 3 | wire type) tags, then a varint (0), 8 bytes (1),
// a length and bytes (2) or 4 bytes (5). Each message is read into what its fields hold, repeated
// fields collected in arrays, as the JSON encoding has them.
type Fields = Map<number, (bigint | Buffer)[]>

function fields(bytes: Buffer): Fields {
  const out: Fields = new Map()
  let at = 0
  const varint = (): bigint => {
    let value = 0n
    for (let shift = 0n; ; shift += 7n) {
      const byte = bytes[at++]!
      value |= BigInt(byte & 0x7f) << shift
      if (byte < 0x80) return value
    }
  }
  while (at < bytes.length) {
    const tag = Number(varint())
    const [field, wire] = [tag >> 3, tag & 7]
    let value: bigint | Buffer
    if (wire === 0) value = varint()
    else if (wire === 1) value = bytes.subarray(at, (at += 8))
    else if (wire === 5) value = bytes.subarray(at, (at += 4))
    else if (wire === 2) {
      const length = Number(varint())
      value = bytes.subarray(at, (at += length))
    } else throw new Error(`wire type ${wire} in an OTLP body`)
    out.set(field, [...(out.get(field) ?? []), value])
  }
  return out
}

const bytesOf = (f: Fields, n: number) => f.get(n)?.[0] as Buffer | undefined
const textOf = (f: Fields, n: number) => bytesOf(f, n)?.toString('utf8')

function anyValue(bytes: Buffer): AnyValue {
  const f = fields(bytes)
  if (f.has(1)) return { stringValue: textOf(f, 1) ?? '' }
  if (f.has(2)) return { boolValue: f.get(2)![0] === 1n }
  if (f.has(3)) return { intValue: Number(BigInt.asIntN(64, f.get(3)![0] as bigint)) }
  if (f.has(4)) return { doubleValue: (f.get(4)![0] as Buffer).readDoubleLE(0) }
  throw new Error('an attribute value of a type the tests do not expect')
}

function keyValues(list: (bigint | Buffer)[] = []): { key: string; value: AnyValue }[] {
  return list.map((item) => {
    const f = fields(item as Buffer)
    return { key: textOf(f, 1) ?? '', value: anyValue(bytesOf(f, 2) ?? Buffer.alloc(0)) }
  })
}

/** ExportTraceServiceRequest → the shape of its JSON encoding (ids in hex, as JSON has them). */
export function decodeRequest(bytes: Buffer) {
  return {
    resourceSpans: (fields(bytes).get(1) ?? []).map((item) => {
      const resourceSpans = fields(item as Buffer)
      const resource = fields(bytesOf(resourceSpans, 1) ?? Buffer.alloc(0))
      return {
        resource: { attributes: keyValues(resource.get(1)) },
        scopeSpans: (resourceSpans.get(2) ?? []).map((scope) => ({
          spans: (fields(scope as Buffer).get(2) ?? []).map((item) => {
            const span = fields(item as Buffer)
            return {
              traceId: bytesOf(span, 1)?.toString('hex'),
              spanId: bytesOf(span, 2)?.toString('hex'),
              parentSpanId: bytesOf(span, 4)?.toString('hex') ?? '',
              name: textOf(span, 5),
              kind: Number(span.get(6)?.[0] ?? 0n),
              // fixed64, as the JSON encoding's decimal string.
              startTimeUnixNano: bytesOf(span, 7)?.readBigUInt64LE(0).toString(),
              endTimeUnixNano: bytesOf(span, 8)?.readBigUInt64LE(0).toString(),
              attributes: keyValues(span.get(9)),
              status: { code: Number(fields(bytesOf(span, 15) ?? Buffer.alloc(0)).get(3)?.[0] ?? 0n) },
              flags: bytesOf(span, 16)?.readUInt32LE(0) ?? 0,
            }
          }),
        })),
      }
    }),
  }
}
