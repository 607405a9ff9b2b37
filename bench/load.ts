// Load generation for the benchmark, in the benchmark's own process (never the server's):
// closed-loop maximum throughput through autocannon (keep-alive, no pipelining) with the server's
// CPU time per request, and an open-loop fixed-rate latency probe with sub-millisecond timing
// (autocannon records whole milliseconds and only 2xx latencies).
import net from 'node:net'
import { Worker } from 'node:worker_threads'
import autocannon from 'autocannon'
import { statFields } from './lib.ts'

export interface RequestSpec {
  readonly method: 'GET' | 'POST'
  readonly path: string
  readonly headers?: Record<string, string>
  /** A fixed body, or one made fresh for each request (e.g. a new email each time). */
  readonly body?: string | (() => string)
}

/**
 * The refusals of the pipeline rows, answered before any database work, with the status every
 * target must give: a path no route has, a lead post missing its required fields, and a key that
 * is not of the key format (refused on its format, so the organization in the query is never read).
 */
export const PIPELINE_REFUSALS = {
  'notfound-404': { method: 'GET', path: '/no-such-resource', status: 404 },
  'bad-body-400': { method: 'POST', path: '/demo-request', body: JSON.stringify({ email: 'not-an-email' }), status: 400 },
  'bad-key-401': { method: 'GET', path: '/policies?organization_id=00000000-0000-0000-0000-000000000000', headers: { authorization: 'Bearer stw_key_notavalidkeyatall' }, status: 401 },
} as const satisfies Record<string, RequestSpec & { readonly status: number }>

export interface Throughput {
  readonly rps: number
  /** Requests answered in the window. */
  readonly answered: number
  readonly statuses: Record<string, number>
  readonly errors: number
  /**
   * CPU time the server process spent per answered request (user + system, every thread, µs),
   * when its pid was given and /proc can tell; else null. Throughput says how much the client
   * could get through; this says what each request cost the server, whether or not the client
   * (on the same two cores) was the limit.
   */
  readonly cpuMicros?: number | null
}

/** User + system CPU time of a process so far, in µs (Linux /proc; null elsewhere). */
export function processCpuMicros(pid: number): number | null {
  try {
    const fields = statFields(pid)
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS
  } catch {
    return null
  }
}
/** USER_HZ: 100 on every Linux this runs on (getconf CLK_TCK); /proc counts CPU time in it. */
const CLOCK_TICKS = 100

export async function maxThroughput(base: string, spec: RequestSpec, seconds: number, connections = 10, pid?: number): Promise<Throughput> {
  const headers = { ...(spec.body !== undefined ? { 'content-type': 'application/json' } : {}), ...spec.headers }
  const makeBody = spec.body
  const cpuBefore = pid === undefined ? null : processCpuMicros(pid)
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
  const cpuAfter = pid === undefined ? null : processCpuMicros(pid)
  const answered = result.requests.total
  const cpuMicros = cpuBefore !== null && cpuAfter !== null && answered > 0 ? (cpuAfter - cpuBefore) / answered : null
  // autocannon stops on its next once-a-second tick after the duration: divide by the time it ran.
  const elapsed = result.duration > 0 ? result.duration : seconds
  return { rps: answered / elapsed, answered, statuses, errors: result.errors + result.timeouts, cpuMicros }
}

export interface Latency {
  readonly p50: number
  readonly p99: number
  readonly sent: number
  readonly rate: number
  readonly errors: number
}

/**
 * Sends `rate` requests per second for `seconds` over `connections` keep-alive sockets (one request
 * in flight per socket, no pipelining) with a minimal HTTP/1.1 client on raw sockets, so the
 * client stays far below the server's cost. Sends are evenly spaced by a pacing thread (PACER).
 * Each request is timed from the moment it was due (as this thread heard the tick) to the end of
 * its response: waiting for a free socket behind a slow response counts (no coordinated
 * omission), the pacing's own wake-up lag does not.
 */
/**
 * Ticks the parent once per request at startAt + i × interval, startAt being `delay` ms after the
 * thread is up: a worker takes 50–70 ms to start on this machine, and a schedule fixed before
 * that began with a burst of every tick already due (3–5 % of a 1 s probe, enough to make its p99).
 */
const PACER = `
const { parentPort, workerData } = require('node:worker_threads')
const { total, interval, delay } = workerData
const startAt = performance.timeOrigin + performance.now() + delay
const sleeper = new Int32Array(new SharedArrayBuffer(4))
for (let i = 0; i < total; i++) {
  const wait = startAt + i * interval - (performance.timeOrigin + performance.now())
  if (wait > 0) Atomics.wait(sleeper, 0, 0, wait)
  parentPort.postMessage(i)
}
`

export async function fixedRateLatency(base: string, spec: RequestSpec, rate: number, seconds: number, connections = 10): Promise<Latency> {
  const url = new URL(base)
  const head = (body: string | undefined) =>
    `${spec.method} ${spec.path} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: keep-alive\r\n` +
    Object.entries({ ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}), ...spec.headers })
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('') +
    '\r\n' +
    (body ?? '')
  const fixed = typeof spec.body === 'function' ? null : head(spec.body)
  const samples: number[] = []
  let errors = 0
  const due: number[] = []
  const idle: Array<(start: number) => void> = []
  const sockets: net.Socket[] = []
  await Promise.all(
    Array.from({ length: connections }, () => new Promise<void>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => resolve())
      socket.setNoDelay(true)
      socket.once('error', reject)
      sockets.push(socket)
      let buffer: Buffer = Buffer.alloc(0)
      let started = 0
      const send = (start: number) => {
        started = start
        socket.write(fixed ?? head((spec.body as () => string)()))
      }
      const next = () => {
        const start = due.shift()
        if (start === undefined) idle.push(send)
        else send(start)
      }
      socket.on('data', (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
        for (;;) {
          const end = buffer.indexOf('\r\n\r\n')
          if (end < 0) return
          const headers = buffer.subarray(0, end).toString('latin1')
          const length = /\r\ncontent-length: *(\d+)/i.exec(headers)
          let total: number
          if (length) total = end + 4 + Number(length[1])
          else if (/\r\ntransfer-encoding: *chunked/i.test(headers)) {
            const last = buffer.indexOf('\r\n0\r\n\r\n', end)
            if (last < 0) return
            total = last + 7
          } else total = end + 4
          if (buffer.length < total) return
          buffer = buffer.subarray(total)
          if (!/^HTTP\/1\.1 [1-5]\d\d/.test(headers)) errors++
          samples.push(performance.now() - started)
          next()
        }
      })
      idle.push(send)
    })),
  )
  const total = Math.max(1, Math.round(rate * seconds))
  let scheduled = 0
  // Evenly spaced sends. A timer loop in this thread wakes at best every millisecond (later when
  // the two cores are busy) and sent what was due in a burst: the server then queued the burst,
  // and that queueing, made by the probe, showed up in p99. The pacing thread sleeps until each
  // request is due (Atomics.wait: a timed wait, no spinning) and ticks this thread, which stays
  // free to read responses.
  const pacer = new Worker(PACER, { eval: true, workerData: { total, interval: 1000 / rate, delay: 20 } })
  const ticked = new Promise<void>((resolve) => {
    pacer.on('message', () => {
      const now = performance.now()
      scheduled++
      const send = idle.pop()
      if (send) send(now)
      else due.push(now)
    })
    pacer.once('exit', () => resolve())
    pacer.once('error', () => resolve())
  })
  const stop = setTimeout(() => void pacer.terminate(), seconds * 3000)
  await ticked
  clearTimeout(stop)
  const deadline = performance.now() + 10_000
  while (samples.length + errors < scheduled && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  for (const socket of sockets) socket.destroy()
  samples.sort((a, b) => a - b)
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? NaN
  return { p50: at(0.5), p99: at(0.99), sent: scheduled, rate, errors }
}
