// W3C Trace Context's traceparent as the tracer reads it (services/traceparent.ts): what continues a
// caller's trace and what starts a new one.
import t from 'tap'
import { parseTraceparent, readsSampled, traceFlags } from '../../services/traceparent.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const SPAN = '00f067aa0ba902b7'

t.test('a valid traceparent gives its ids and sampled flag', async (t) => {
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-01`), { traceId: TRACE, spanId: SPAN, sampled: true })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-00`), { traceId: TRACE, spanId: SPAN, sampled: false })
  t.same(parseTraceparent(`00-${TRACE}-${SPAN}-03`)?.sampled, true, 'other flag bits beside sampled')
  t.same(parseTraceparent(`01-${TRACE}-${SPAN}-01-future`)?.traceId, TRACE, 'a later version may carry more fields')
  t.same([traceFlags(`00-${TRACE}-${SPAN}-00`), traceFlags(`00-${TRACE}-${SPAN}-09`), traceFlags(`00-${TRACE}-${SPAN}-a0`), traceFlags(`00-${TRACE}-${SPAN}-ff`)], [0, 9, 160, 255], 'the flags, as a number')
  // The quick look the tracer takes before a batch checks the whole: it agrees with the flags.
  t.same(['00', '01', '0a', '0b', 'fe', 'ff'].map((flags) => readsSampled(`00-${TRACE}-${SPAN}-${flags}`)), [false, true, false, true, false, true])
  t.equal(readsSampled('00-short'), false, 'too short to read')
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
    [`01-${TRACE}-${SPAN}-01x`, 'a later version whose flags run on'],
    [`00-${TRACE}-${SPAN}-0g`, 'flags that are not hex'],
    [`00-${TRACE}_${SPAN}-01`, 'no dash after the trace id'],
    [`01-${TRACE}-${SPAN}-01-\r\nx`, 'a line break in what a later version adds'],
    ['garbage', 'not a traceparent'],
  ] as const) {
    t.equal(parseTraceparent(header), null, why)
  }
})
