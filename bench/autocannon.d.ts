// The part of autocannon's API the benchmark uses (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface Options {
      url: string
      connections?: number
      pipelining?: number
      duration?: number
      overallRate?: number
      requests?: Array<Record<string, unknown>>
    }
    interface Histogram {
      average: number
      total: number
      p50: number
      p99: number
    }
    interface Result {
      requests: Histogram
      /** Seconds it ran. */
      duration: number
      latency: Histogram
      errors: number
      timeouts: number
      non2xx: number
      statusCodeStats?: Record<string, { count: number }>
    }
  }
  function autocannon(options: autocannon.Options): Promise<autocannon.Result>
  export default autocannon
}
