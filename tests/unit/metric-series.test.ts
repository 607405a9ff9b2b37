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
