// The OTLP protobuf encoder (services/otlp.ts), read back with the tests' own decoder
// (tests/support/otlp-receiver.ts): the paths a request's span rarely takes (text that is not
// ASCII, a value of 128 bytes or more, a message longer than 127 bytes, an error status, a
// parent from another process) and the times to the microsecond.
import t from 'tap'
import { SpanBatch } from '../../services/otlp.ts'
import { decodeRequest } from '../support/otlp-receiver.ts'

t.test('a batch decodes to exactly the spans added, field by field', async (t) => {
  const batch = new SpanBatch('steward-ünïcode')
  const long = 'x'.repeat(300)
  batch.add({
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    parentSpanId: 'a3ce929d0e0e4736',
    flags: 1,
    remoteParent: true,
    name: 'POST /décisions',
    kind: 2,
    startMs: 1_765_000_000_123.456,
    endMs: 1_765_000_000_125.5,
    attributes: ['http.response.status_code', 503, 'steward.agent', 'agent-ü', 'long', long, 'big', 2 ** 40, 'negative', -1],
    status: 2,
  })
  batch.add({ traceId: 'ffffffffffffffffffffffffffffffff', spanId: '0000000000000001', parentSpanId: null, flags: 1, remoteParent: false, name: 'webhook.delivery', kind: 3, startMs: 0.001, endMs: 0.002, attributes: [], status: 0 })
  t.equal(batch.count, 2)
  const body = decodeRequest(Buffer.from(batch.take()))
  t.equal(batch.count, 0, 'the batch is empty after take()')
  t.equal(body.resourceSpans.length, 1)
  const [resource] = body.resourceSpans
  t.same(resource!.resource.attributes, [{ key: 'service.name', value: { stringValue: 'steward-ünïcode' } }])
  const [first, second] = resource!.scopeSpans[0]!.spans
  t.same(first, {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7',
    parentSpanId: 'a3ce929d0e0e4736',
    name: 'POST /décisions',
    kind: 2,
    startTimeUnixNano: '1765000000123456000',
    endTimeUnixNano: '1765000000125500000',
    attributes: [
      { key: 'http.response.status_code', value: { intValue: 503 } },
      { key: 'steward.agent', value: { stringValue: 'agent-ü' } },
      { key: 'long', value: { stringValue: long } },
      { key: 'big', value: { intValue: 2 ** 40 } },
      // Only non-negative safe integers go as int_value; anything else as its text.
      { key: 'negative', value: { stringValue: '-1' } },
    ],
    status: { code: 2 },
    // Sampled, with "has is_remote" and "is_remote" set: the parent came from another process.
    flags: 0x301,
  })
  t.same(second, {
    traceId: 'ffffffffffffffffffffffffffffffff',
    spanId: '0000000000000001',
    parentSpanId: '',
    name: 'webhook.delivery',
    kind: 3,
    startTimeUnixNano: '1000',
    endTimeUnixNano: '2000',
    attributes: [],
    status: { code: 0 },
    flags: 0x101,
  })
})

t.test("served requests' spans: ids from a traceparent, from ids given or new, and their attributes", async (t) => {
  const batch = new SpanBatch('steward')
  const header = `00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`
  const long = 'y'.repeat(200)
  batch.addServed(header, 1_765_000_000_000.25, 1_765_000_000_001.5, 'POST', '/decisions', 200, { outcome: 'allow', agent: 'agent-ü', agentId: null, action: 'refund.order' })
  batch.addServed({ traceId: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', spanId: 'bbbbbbbbbbbbbbbb', parentSpanId: null }, 1, 2, 'POST', '/decisions', 99, { outcome: 'deny', agent: null, agentId: 'ag_1', action: long })
  batch.addServed(null, 3, 4, 'GET', null, 503, null)
  // Kept unchecked by the tracer; an all-zero trace id makes it invalid: a new trace.
  batch.addServed(`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, 5, 6, 'GET', null, 200, null)
  t.equal(batch.count, 4, 'served spans count before they are encoded')
  const body = decodeRequest(Buffer.from(batch.take()))
  t.equal(batch.count, 0)
  const spans = body.resourceSpans[0]!.scopeSpans[0]!.spans
  t.equal(spans.length, 4)
  const [continued, given, root, invalid] = spans
  t.same({ ...continued, spanId: undefined }, {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: undefined,
    parentSpanId: '00f067aa0ba902b7',
    name: 'POST /decisions',
    kind: 2,
    startTimeUnixNano: '1765000000000250000',
    endTimeUnixNano: '1765000000001500000',
    attributes: [
      { key: 'http.request.method', value: { stringValue: 'POST' } },
      { key: 'http.response.status_code', value: { intValue: 200 } },
      { key: 'http.route', value: { stringValue: '/decisions' } },
      { key: 'steward.decision.outcome', value: { stringValue: 'allow' } },
      { key: 'steward.agent', value: { stringValue: 'agent-ü' } },
      { key: 'steward.action', value: { stringValue: 'refund.order' } },
    ],
    status: { code: 0 },
    flags: 0x301,
  })
  t.match(continued!.spanId, /^[0-9a-f]{16}$/, 'a new span id')
  t.not(continued!.spanId, '0000000000000000')
  t.same(given, {
    traceId: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    spanId: 'bbbbbbbbbbbbbbbb',
    parentSpanId: '',
    name: 'POST /decisions',
    kind: 2,
    startTimeUnixNano: '1000000',
    endTimeUnixNano: '2000000',
    attributes: [
      { key: 'http.request.method', value: { stringValue: 'POST' } },
      { key: 'http.response.status_code', value: { intValue: 99 } },
      { key: 'http.route', value: { stringValue: '/decisions' } },
      { key: 'steward.decision.outcome', value: { stringValue: 'deny' } },
      { key: 'steward.agent_id', value: { stringValue: 'ag_1' } },
      { key: 'steward.action', value: { stringValue: long } },
    ],
    status: { code: 0 },
    flags: 0x101,
  })
  t.same({ ...root, traceId: undefined, spanId: undefined }, {
    traceId: undefined,
    spanId: undefined,
    parentSpanId: '',
    name: 'GET',
    kind: 2,
    startTimeUnixNano: '3000000',
    endTimeUnixNano: '4000000',
    attributes: [
      { key: 'http.request.method', value: { stringValue: 'GET' } },
      { key: 'http.response.status_code', value: { intValue: 503 } },
    ],
    status: { code: 2 },
    flags: 0x101,
  })
  t.match(root!.traceId, /^[0-9a-f]{32}$/, 'a new trace id')
  t.not(root!.traceId, continued!.traceId)
  t.match(root!.spanId, /^[0-9a-f]{16}$/)
  t.match(invalid!.traceId, /^[0-9a-f]{32}$/)
  t.not(invalid!.traceId, '0'.repeat(32), 'an invalid traceparent starts a new trace')
  t.same([invalid!.parentSpanId, invalid!.flags], ['', 0x101], 'with no parent')
})
