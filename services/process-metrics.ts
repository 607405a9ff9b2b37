// The process's own series, read when /metrics is scraped and at no other time. Not prom-client's
// collectDefaultMetrics: its GC histogram keeps a PerformanceObserver on every collection, and a
// busy server collects young objects hundreds of times a second, which cost more than every other
// series together (docs/observability.md). The names are prom-client's, so its dashboards work.
import { readdirSync } from 'node:fs'

type Prom = typeof import('prom-client')

export function registerProcessMetrics(prom: Prom, registry: import('prom-client').Registry): void {
  const registers = [registry]
  const seconds = (microseconds: number) => microseconds / 1e6
  let last = process.cpuUsage()
  // Counters only go up: each scrape adds what was spent since the last one. The first series
  // reads for all three (registered first, it is collected before the others are read).
  new prom.Counter({
    name: 'process_cpu_user_seconds_total',
    help: 'User CPU time spent, in seconds.',
    registers,
    collect() {
      const now = process.cpuUsage()
      this.inc(seconds(now.user - last.user))
      system.inc(seconds(now.system - last.system))
      total.inc(seconds(now.user - last.user + now.system - last.system))
      last = now
    },
  })
  const system = new prom.Counter({ name: 'process_cpu_system_seconds_total', help: 'System CPU time spent, in seconds.', registers })
  const total = new prom.Counter({ name: 'process_cpu_seconds_total', help: 'User and system CPU time spent, in seconds.', registers })
  const started = Math.round(Date.now() / 1000 - process.uptime())
  new prom.Gauge({ name: 'process_start_time_seconds', help: 'Start time of the process since the Unix epoch, in seconds.', registers, collect() { this.set(started) } })
  new prom.Gauge({ name: 'process_resident_memory_bytes', help: 'Resident memory size, in bytes.', registers, collect() { this.set(process.memoryUsage.rss()) } })
  new prom.Gauge({ name: 'nodejs_heap_size_total_bytes', help: 'JavaScript heap size, in bytes.', registers, collect() { this.set(process.memoryUsage().heapTotal) } })
  new prom.Gauge({ name: 'nodejs_heap_size_used_bytes', help: 'JavaScript heap used, in bytes.', registers, collect() { this.set(process.memoryUsage().heapUsed) } })
  new prom.Gauge({ name: 'nodejs_external_memory_bytes', help: 'Memory of C++ objects bound to JavaScript (buffers, the embedded database), in bytes.', registers, collect() { this.set(process.memoryUsage().external) } })
  new prom.Gauge({
    name: 'process_open_fds',
    help: 'Open file descriptors (Linux only).',
    registers,
    collect() {
      try {
        this.set(readdirSync('/proc/self/fd').length)
      } catch {
        // No /proc: the series stays at 0.
      }
    },
  })
  // How long a callback queued now waits for the event loop: measured at the scrape, as prom-client does.
  new prom.Gauge({
    name: 'nodejs_eventloop_lag_seconds',
    help: 'Lag of the event loop at the scrape, in seconds.',
    registers,
    async collect() {
      const start = performance.now()
      await new Promise((resolve) => setImmediate(resolve))
      this.set((performance.now() - start) / 1000)
    },
  })
}
