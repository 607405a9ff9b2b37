// The Prometheus series (docs/observability.md), in a registry of their own per handler, so two
// handlers in one process (tests, embedders) never mix their counts. prom-client is loaded by
// `loadMetrics` only when metrics are on (METRICS_TOKEN set). Names follow OpenTelemetry's
// semantic conventions in Prometheus form where one exists (http.server.request.duration →
// http_server_request_duration_seconds), else start with steward_. No label carries an id, a
// path or anything a client chose: routes are templates, methods and limiter names a fixed set.
import { SeriesCounter, SeriesHistogram } from './metric-series.ts'
import { registerProcessMetrics } from './process-metrics.ts'
import type { Kysely } from 'kysely'
import type { Database } from '../database/schema.ts'
import { scrapeFigures } from '../storage/metrics.ts'

/** What a metrics observer needs to know of a PostgreSQL pool (pg.Pool has it). */
export interface PoolStats {
  readonly totalCount: number
  readonly idleCount: number
  readonly waitingCount: number
  readonly options?: { readonly max?: number }
  on(event: 'error', listener: (error: Error) => void): unknown
}

export interface Metrics {
  request(method: string, route: string, status: number, seconds: number, limiter: string | null): void
  decided(outcome: string, rule: string, seconds: number): void
  approvalClosed(result: string, seconds: number): void
  webhookAttempt(result: 'delivered' | 'failed' | 'gave_up'): void
  /** The text exposition of every series, the database's figures read now. */
  scrape(): Promise<{ contentType: string; text: string }>
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** OpenTelemetry's advised buckets for http.server.request.duration. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
const DECISION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
const APPROVAL_BUCKETS = [5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86_400, 3 * 86_400]

export interface MetricsDeps {
  readonly db: Kysely<Database>
  readonly clock: () => number
  /** The PostgreSQL pool, for its use and errors; absent on PGlite (one connection, no pool). */
  readonly pool?: PoolStats | null
  /** A failed database read at scrape time (the scrape still answers, with the last figures). */
  readonly onScrapeError?: (error: unknown) => void
}

/** Loads prom-client and builds the series. */
export async function loadMetrics(deps: MetricsDeps): Promise<Metrics> {
  const prom = await import('prom-client')
  const registry = new prom.Registry()
  const register = [registry]
  // Process metrics (CPU, memory, open files, event-loop lag), read at the scrape.
  registerProcessMetrics(prom, registry)
  // The series each request updates: kept by services/metric-series.ts, formatted by the registry.
  const http = new SeriesHistogram('http_server_request_duration_seconds', 'Duration of HTTP server requests, by method, route template and status.', ['http_request_method', 'http_route', 'http_response_status_code'], HTTP_BUCKETS)
  const decisions = new SeriesCounter('steward_decisions_total', 'Decisions made, by outcome and by the rule that made them (policy, default_decision, limit_exceeded…).', ['outcome', 'rule'])
  const decisionDuration = new SeriesHistogram('steward_decision_duration_seconds', 'Time to decide and log a decision, by outcome.', ['outcome'], DECISION_BUCKETS)
  for (const metric of [http, decisions, decisionDuration]) registry.registerMetric(metric as unknown as Parameters<typeof registry.registerMetric>[0])
  const pending = new prom.Gauge({ name: 'steward_approvals_pending', help: 'Approvals pending and not yet expired, read from the database at scrape time.', registers: register })
  const approvalTime = new prom.Histogram({ name: 'steward_approval_time_to_decision_seconds', help: 'Time from an approval request to its outcome (approved, denied, cancelled).', labelNames: ['result'] as const, buckets: APPROVAL_BUCKETS, registers: register })
  const webhooks = new prom.Counter({ name: 'steward_webhook_deliveries_total', help: 'Webhook delivery attempts, by result (delivered, failed and to be retried, gave_up).', labelNames: ['result'] as const, registers: register })
  const undelivered = new prom.Gauge({ name: 'steward_webhook_oldest_undelivered_age_seconds', help: 'Age of the oldest webhook event not yet delivered (0: none waits), read at scrape time.', registers: register })
  const sealLag = new prom.Gauge({ name: 'steward_audit_seal_lag_seconds', help: 'Age of the oldest audit event or decision not yet under a seal (0: all sealed), read at scrape time.', registers: register })
  const refusals = new prom.Counter({ name: 'steward_rate_limit_refusals_total', help: 'Requests refused with 429 by a rate limit, by limiter.', labelNames: ['limiter'] as const, registers: register })
  const dbErrors = new prom.Counter({ name: 'steward_db_client_errors_total', help: 'Database errors outside a request: a pooled connection lost (pool), a failed scrape read (scrape).', labelNames: ['source'] as const, registers: register })
  dbErrors.inc({ source: 'scrape' }, 0)
  const pool = deps.pool ?? null
  if (pool) {
    dbErrors.inc({ source: 'pool' }, 0)
    pool.on('error', () => dbErrors.inc({ source: 'pool' }))
    // OpenTelemetry's db.client.connection.* in Prometheus form, read from the pool when scraped.
    new prom.Gauge({
      name: 'db_client_connection_count',
      help: 'Connections of the database pool, by state (idle, used).',
      labelNames: ['state'] as const,
      registers: register,
      collect() {
        this.set({ state: 'idle' }, pool.idleCount)
        this.set({ state: 'used' }, pool.totalCount - pool.idleCount)
      },
    })
    new prom.Gauge({ name: 'db_client_connection_max', help: 'Most connections the pool opens.', registers: register, collect() { this.set(pool.options?.max ?? 10) } })
    new prom.Gauge({ name: 'db_client_connection_pending_requests', help: 'Queries waiting for a pooled connection.', registers: register, collect() { this.set(pool.waitingCount) } })
  }

  // Series are bounded: methods, route templates, statuses, outcomes and rules are fixed sets.
  return {
    request(method, route, status, seconds, limiter) {
      http.of(METHODS.has(method) ? method : '_OTHER', route, status).observe(seconds)
      if (limiter !== null) refusals.inc({ limiter })
    },
    decided(outcome, rule, seconds) {
      decisions.of(outcome, rule).inc()
      decisionDuration.of(outcome).observe(seconds)
    },
    approvalClosed(result, seconds) {
      approvalTime.observe({ result }, Math.max(0, seconds))
    },
    webhookAttempt(result) {
      webhooks.inc({ result })
    },
    async scrape() {
      try {
        const figures = await scrapeFigures(deps.db, new Date(deps.clock()))
        pending.set(figures.pendingApprovals)
        undelivered.set(figures.oldestUndeliveredSeconds)
        sealLag.set(figures.sealLagSeconds)
      } catch (error) {
        dbErrors.inc({ source: 'scrape' })
        deps.onScrapeError?.(error)
      }
      return { contentType: registry.contentType, text: await registry.metrics() }
    },
  }
}
