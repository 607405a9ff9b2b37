// The series every request updates (request duration, decisions and their duration), kept by us
// and exposed through prom-client's registry, which still writes the text format. prom-client's
// own Counter and Histogram check and hash a label object on every call, even from a child made by
// `labels()`; that was most of what metrics cost a decision. Here a series is found once by its
// label values and then updated with a few additions. Everything else uses prom-client's metrics.

/** One line of a metric as prom-client's registry formats it. */
interface Sample {
  readonly metricName: string
  readonly labels: Readonly<Record<string, string | number>>
  readonly value: number
}

/** What prom-client's Registry reads of a metric (`registerMetric`, then `get()` at each scrape). */
interface Exposed {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly aggregator: 'sum'
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }>
}

abstract class Family<S> implements Exposed {
  abstract readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum'
  /** Every series, in the order they were first used, with its labels. */
  protected readonly series: { readonly labels: Record<string, string>; readonly series: S }[] = []
  /** The series by label value, one level per label: the values are strings the caller already holds. */
  private readonly index = new Map<string | number, unknown>()

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelNames: readonly string[],
  ) {
    if (labelNames.length < 1 || labelNames.length > 3) throw new Error(`${name}: a series family takes one to three labels`)
  }

  protected abstract make(): S
  protected abstract samples(labels: Record<string, string>, series: S, into: Sample[]): void

  /**
   * The series of these label values, in `labelNames` order (made on first use); a label takes
   * strings or numbers, not both. Up to three labels, as separate arguments: a rest parameter
   * would allocate an array on every observation.
   */
  of(a: string | number, b?: string | number, c?: string | number): S {
    const labels = this.labelNames.length
    // One Map per label but the last, whose Map holds the series.
    let level = this.index
    if (labels > 1) level = step(level, a)
    if (labels > 2) level = step(level, b!)
    const last = labels === 1 ? a : labels === 2 ? b! : c!
    let found = level.get(last) as S | undefined
    if (found === undefined) {
      const values = [a, b, c]
      const named: Record<string, string> = {}
      this.labelNames.forEach((name, i) => (named[name] = String(values[i] ?? '')))
      level.set(last, (found = this.make()))
      this.series.push({ labels: named, series: found })
    }
    return found
  }

  async get() {
    const values: Sample[] = []
    for (const { labels, series } of this.series) this.samples(labels, series, values)
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }
}

/** The Map under `level` for `value`, made on first use. */
function step(level: Map<string | number, unknown>, value: string | number): Map<string | number, unknown> {
  let next = level.get(value) as Map<string | number, unknown> | undefined
  if (next === undefined) level.set(value, (next = new Map()))
  return next
}

export class CounterSeries {
  value = 0
  inc(by = 1): void {
    this.value += by
  }
}

export class SeriesCounter extends Family<CounterSeries> {
  readonly type = 'counter'
  protected make() {
    return new CounterSeries()
  }
  protected samples(labels: Record<string, string>, series: CounterSeries, into: Sample[]) {
    into.push({ metricName: this.name, labels, value: series.value })
  }
}

export class HistogramSeries {
  /** Observations per bucket (not cumulative), the last one above every bound. */
  readonly counts: Float64Array
  sum = 0
  count = 0
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1)
  }
  observe(value: number): void {
    if (!Number.isFinite(value)) return
    let i = 0
    while (i < this.bounds.length && value > this.bounds[i]!) i++
    this.counts[i]!++
    this.sum += value
    this.count++
  }
}

export class SeriesHistogram extends Family<HistogramSeries> {
  readonly type = 'histogram'
  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
  ) {
    super(name, help, labelNames)
  }
  protected make() {
    return new HistogramSeries(this.bounds)
  }
  protected samples(labels: Record<string, string>, series: HistogramSeries, into: Sample[]) {
    let cumulative = 0
    this.bounds.forEach((bound, i) => {
      cumulative += series.counts[i]!
      into.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: bound }, value: cumulative })
    })
    into.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: series.count })
    into.push({ metricName: `${this.name}_sum`, labels, value: series.sum })
    into.push({ metricName: `${this.name}_count`, labels, value: series.count })
  }
}
