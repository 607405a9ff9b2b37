// Load generation for the benchmark, in the benchmark's own process (never the server's):
// closed-loop maximum throughput through autocannon (keep-alive, no pipelining), an open-loop
// fixed-rate latency probe with sub-millisecond timing (autocannon records whole milliseconds and
// only 2xx latencies), and a bare pg loop for the database baselines.
import http from 'node:http'
import autocannon from 'autocannon'
import type pg from 'pg'

export interface RequestSpec {
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly headers?: Record<string, string>
  /** A fixed body, or one made fresh for each request (e.g. a new email each time). */
  readonly body?: string | (() => string)
}

export interface Throughput {
  readonly rps: number
  readonly statuses: Record<string, number>
  readonly errors: number
}

export async function maxThroughput(base: string, spec: RequestSpec, seconds: number, connections = 10): Promise<Throughput> {
  const headers = { ...(spec.body !== undefined ? { 'content-type': 'application/json' } : {}), ...spec.headers }
  const makeBody = spec.body
  const result = await autocannon({
    url: base,
    connections,
    pipelining: 1,
    duration: seconds,
    requests: [
      {
        method: spec.method,
        path: spec.path,
        headers,
        ...(typeof makeBody === 'function'
          ? { setupRequest: (request: Record<string, unknown>) => ({ ...request, body: makeBody() }) }
          : makeBody !== undefined
            ? { body: makeBody }
            : {}),
      },
    ],
  })
  const statuses: Record<string, number> = {}
  for (const [key, value] of Object.entries(result.statusCodeStats ?? {})) statuses[key] = (value as { count: number }).count
  return { rps: result.requests.total / seconds, statuses, errors: result.errors + result.timeouts }
}

export interface Latency {
  readonly p50: number
  readonly p99: number
  readonly sent: number
  readonly rate: number
  readonly errors: number
}

/**
 * Sends `rate` requests per second for `seconds` over at most `connections` keep-alive sockets and
 * measures each from its scheduled send time (so queueing behind a slow response is counted).
 */
export async function fixedRateLatency(base: string, spec: RequestSpec, rate: number, seconds: number, connections = 10): Promise<Latency> {
  const url = new URL(base)
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections })
  const total = Math.max(1, Math.round(rate * seconds))
  const interval = 1000 / rate
  const samples: number[] = []
  let errors = 0
  const pending = new Set<Promise<void>>()
  const start = performance.now()
  const send = (scheduled: number): Promise<void> =>
    new Promise<void>((resolve) => {
      const body = typeof spec.body === 'function' ? spec.body() : spec.body
      const request = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          method: spec.method,
          path: spec.path,
          headers: { ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}), ...spec.headers },
        },
        (response) => {
          response.resume()
          response.once('end', () => {
            samples.push(performance.now() - scheduled)
            resolve()
          })
        },
      )
      request.once('error', () => {
        errors++
        resolve()
      })
      request.end(body)
    })
  let next = 0
  while (next < total) {
    const now = performance.now()
    while (next < total && start + next * interval <= now) {
      const p = send(start + next * interval)
      pending.add(p)
      void p.then(() => pending.delete(p))
      next++
    }
    await new Promise((resolve) => setTimeout(resolve, 1))
    if (performance.now() - start > seconds * 1000 * 3) break
  }
  await Promise.race([Promise.all(pending), new Promise((resolve) => setTimeout(resolve, 10_000))])
  agent.destroy()
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? NaN
  return { p50: at(0.5), p99: at(0.99), sent: next, rate, errors }
}

/** `workers` concurrent loops of one query for `seconds`: completions per second. */
export async function pgLoop(pool: pg.Pool, query: () => [string, unknown[]], seconds: number, workers = 10): Promise<Throughput> {
  const deadline = performance.now() + seconds * 1000
  let done = 0
  let errors = 0
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < deadline) {
        const [text, values] = query()
        try {
          await pool.query(text, values)
          done++
        } catch {
          errors++
        }
      }
    }),
  )
  return { rps: done / seconds, statuses: {}, errors }
}
