// The series kept outside prom-client (services/metric-series.ts), as prom-client's registry
// writes them: buckets cumulative with `le` inclusive (and last, as Prometheus' own clients put
// it), +Inf, _sum and _count, one series per combination of label values.
import t from 'tap'
import { Registry } from 'prom-client'
import { SeriesCounter, SeriesHistogram } from '../../services/metric-series.ts'

async function exposition(...metrics: (SeriesCounter | SeriesHistogram)[]): Promise<string[]> {
  const registry = new Registry()
  for (const metric of metrics) registry.registerMetric(metric as unknown as Parameters<typeof registry.registerMetric>[0])
  return (await registry.metrics()).trim().split('\n')
}

t.test('a histogram: cumulative buckets, a bound counts as its own bucket, +Inf, sum and count', async (t) => {
  const histogram = new SeriesHistogram('request_seconds', 'Request time.', ['method', 'status'], [0.1, 1])
  const get = histogram.of('GET', 200)
  t.equal(histogram.of('GET', 200), get, 'the same label values find the same series')
  for (const value of [0.1, 0.5, 2]) get.observe(value)
  get.observe(Number.NaN)
  histogram.of('POST', 500).observe(0.05)
  t.same(await exposition(histogram), [
    '# HELP request_seconds Request time.',
    '# TYPE request_seconds histogram',
    'request_seconds_bucket{method="GET",status="200",le="0.1"} 1',
    'request_seconds_bucket{method="GET",status="200",le="1"} 2',
    'request_seconds_bucket{method="GET",status="200",le="+Inf"} 3',
    'request_seconds_sum{method="GET",status="200"} 2.6',
    'request_seconds_count{method="GET",status="200"} 3',
    'request_seconds_bucket{method="POST",status="500",le="0.1"} 1',
    'request_seconds_bucket{method="POST",status="500",le="1"} 1',
    'request_seconds_bucket{method="POST",status="500",le="+Inf"} 1',
    'request_seconds_sum{method="POST",status="500"} 0.05',
    'request_seconds_count{method="POST",status="500"} 1',
  ])
})

t.test('a counter: one line per series, label values escaped by the registry', async (t) => {
  const counter = new SeriesCounter('decisions_total', 'Decisions.', ['outcome', 'rule'])
  counter.of('allow', 'policy').inc()
  counter.of('allow', 'policy').inc(2)
  counter.of('deny', 'a "quoted" rule').inc()
  t.same(await exposition(counter), [
    '# HELP decisions_total Decisions.',
    '# TYPE decisions_total counter',
    'decisions_total{outcome="allow",rule="policy"} 3',
    'decisions_total{outcome="deny",rule="a \\"quoted\\" rule"} 1',
  ])
})

t.test('one to three labels: each combination of values is a series of its own', async (t) => {
  const one = new SeriesCounter('one_total', 'One label.', ['outcome'])
  one.of('allow').inc()
  one.of('deny').inc(4)
  const three = new SeriesCounter('three_total', 'Three labels.', ['a', 'b', 'c'])
  for (const [a, b, c] of [['x', 'y', 'z'], ['x', 'y', 'w'], ['x', 'v', 'z'], ['x', 'y', 'z']] as const) three.of(a, b, c).inc()
  t.same(await exposition(one, three), [
    '# HELP one_total One label.',
    '# TYPE one_total counter',
    'one_total{outcome="allow"} 1',
    'one_total{outcome="deny"} 4',
    '',
    '# HELP three_total Three labels.',
    '# TYPE three_total counter',
    'three_total{a="x",b="y",c="z"} 2',
    'three_total{a="x",b="y",c="w"} 1',
    'three_total{a="x",b="v",c="z"} 1',
  ])
  t.throws(() => new SeriesCounter('none_total', 'No label.', []), /one to three labels/)
  t.throws(() => new SeriesCounter('four_total', 'Four labels.', ['a', 'b', 'c', 'd']), /one to three labels/)
})
