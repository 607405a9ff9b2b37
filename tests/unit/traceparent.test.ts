// W3C Trace Context's traceparent as the tracer reads it (services/tracing.ts): what continues a
// caller's trace and what starts a new one.
import t from 'tap'
import { parseTraceparent } from '../../services/tracing.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

t.test('a valid traceparent gives its ids and sampled flag', async (t) => {
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, sampled: true })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-00`), { traceId: TRACE, spanId: SPAN, sampled: false })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-03`)?.sampled, true, 'other flag bits beside sampled')
  t.same(parseTraceparent(`01-${TRACE}-${SPAN}-01-future`)?.traceId, TRACE, 'a later version may carry more fields')
})

t.test('what the specification rules out starts a new trace', async (t) => {
  for (const [header, why] of [
    [null, 'absent'],
    ['', 'empty'],
    [`ff-${TRACE}-${SPAN}-01`, 'version ff'],
    [`00-${TRACE}-${SPAN}-01-extra`, 'version 00 with a fifth field'],
    [`00-${'0'.repeat(32)}-${SPAN}-01`, 'an all-zero trace id'],
    [`00-${TRACE}-${'0'.repeat(16)}-01`, 'an all-zero parent id'],
    [`00-${TRACE.toUpperCase()}-${SPAN}-01`, 'upper-case hex'],
    [`00-${TRACE.slice(1)}-${SPAN}-01`, 'a short trace id'],
    ['garbage', 'not a traceparent'],
  ] as const) {
    t.equal(parseTraceparent(header), null, why)
  }
})
