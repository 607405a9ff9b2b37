// The webhook delivery worker, run between start() and close(): each tick fans the outbox out
// into the delivery log (storage/webhook-fanout.ts fanOut, bodies built by
// services/webhook-payloads.ts), then claims endpoints whose oldest pending delivery is due and
// sends their queues in order, signed with the Standard Webhooks scheme. A failed delivery blocks
// the endpoint's later ones until it succeeds or its schedule ends.
import { createLeadLinks } from '../services/lead-links.ts'
import { unsubscribeUrls } from '../services/lead-mail.ts'
import { createSecrets } from '../services/secrets.ts'
import type { Config } from '../config.ts'
import {
  claimEndpoints,
  queuedDeliveries,
  recordDelivered,
  recordFailure,
  releaseEndpoint,
  type ClaimedEndpoint,
  type DeliveredResult,
} from '../storage/webhook-deliveries.ts'
import { fanOut } from '../storage/webhook-fanout.ts'
import { turn } from '../database/turn.ts'
import type { Deps } from '../services/deps.ts'
import { webhookPayloads } from '../services/webhook-payloads.ts'
import { createSender, webhookSigner, type Sender, type Signer } from '../services/webhook-sender.ts'

export interface WebhookWorkerOptions {
  /** How often a tick runs, in ms. */
  readonly intervalMs?: number
  /** Replaces the HTTP sender (tests). */
  readonly send?: Sender
  readonly timeoutMs?: number
  /** Endpoints worked at once by this process. */
  readonly concurrency?: number
}

export interface WebhookWorker {
  start(): void
  /** One pass: fan out, then deliver everything due now. Resolves when done. */
  tick(): Promise<void>
  close(): Promise<void>
}

const BATCH = 500
const LEASE_MS = 5 * 60_000

export function createWebhookWorker(config: Config, deps: Pick<Deps, 'db' | 'clock' | 'logger' | 'telemetry'>, options: WebhookWorkerOptions = {}): WebhookWorker {
  const timeoutMs = options.timeoutMs ?? 10_000
  let sender: (Sender & { close?(): void }) | null = options.send ?? null
  const send: Sender = (url, headers, body) => {
    sender ??= createSender({ allowPrivate: config.webhookAllowPrivate, timeoutMs, maxResponseBytes: 64 * 1024 })
    return sender(url, headers, body)
  }
  // A newsletter signup's lead.created carries its one-click unsubscribe URL (services/lead-mail.ts).
  const payloadOf = webhookPayloads(config.productApiUrl, unsubscribeUrls(config, createLeadLinks(createSecrets(config))))
  const signers = new Map<string, Signer>()
  let timer: ReturnType<typeof setInterval> | null = null
  let running: Promise<void> | null = null
  let closed = false

  async function deliverEndpoint(endpoint: ClaimedEndpoint): Promise<void> {
    const started = performance.now()
    try {
      let sign = signers.get(endpoint.webhook_id)
      if (!sign) signers.set(endpoint.webhook_id, (sign = webhookSigner(endpoint.secret)))
      let successes: DeliveredResult[] = []
      const flush = async () => {
        if (successes.length === 0) return
        await recordDelivered(deps.db, endpoint.webhook_id, successes)
        endpoint.failing_since = null
        successes = []
      }
      for (;;) {
        const queue = await queuedDeliveries(deps.db, endpoint.webhook_id, BATCH)
        let blocked = queue.length < BATCH
        for (const delivery of queue) {
          const now = deps.clock()
          // Stop well before the lease ends, so no other process starts on this queue meanwhile.
          if (closed || delivery.next_attempt_at.getTime() > now || performance.now() - started > LEASE_MS - 3 * timeoutMs) {
            blocked = true
            break
          }
          const at = new Date(now)
          const signed = sign(delivery.message_id, now, delivery.payload)
          // With tracing on, under a client span whose traceparent the request carries.
          const attempt = (trace: Readonly<Record<string, string>>) => send(endpoint.url, { ...signed, ...trace }, delivery.payload)
          const result = await (deps.telemetry ? deps.telemetry.outgoing('webhook.delivery', { 'steward.webhook.message_id': delivery.message_id }, attempt) : attempt({}))
          if (result.ok) {
            deps.telemetry?.webhookAttempt('delivered')
            successes.push({ deliveryId: delivery.delivery_id, statusCode: result.statusCode ?? 200, at })
            continue
          }
          await flush()
          const outcome = await recordFailure(deps.db, endpoint, delivery, { statusCode: result.statusCode, error: result.error ?? 'failed', at })
          endpoint.failing_since ??= at
          deps.telemetry?.webhookAttempt(outcome.gaveUp ? 'gave_up' : 'failed')
          deps.logger.log('info', 'webhook delivery failed', { webhook_id: endpoint.webhook_id, status: result.statusCode, gave_up: outcome.gaveUp, disabled: outcome.disabled })
          // Given up: the next event may go. Otherwise the endpoint waits for this one's retry.
          if (!outcome.gaveUp || outcome.disabled) {
            blocked = true
            break
          }
        }
        await flush()
        if (blocked) break
      }
    } finally {
      await releaseEndpoint(deps.db, endpoint.webhook_id)
    }
  }

  async function pass(): Promise<void> {
    await fanOut(deps.db, new Date(deps.clock()), payloadOf)
    for (let round = 0; round < 1000 && !closed; round++) {
      // Requests get the thread between this pass's statements (database/turn.ts).
      await turn()
      const endpoints = await claimEndpoints(deps.db, new Date(deps.clock()), LEASE_MS, options.concurrency ?? 16)
      if (endpoints.length === 0) return
      await Promise.all(endpoints.map((endpoint) => deliverEndpoint(endpoint)))
    }
  }

  function tick(): Promise<void> {
    running ??= pass()
      .catch((error: unknown) => {
        deps.logger.log('warn', 'webhook delivery pass failed', { code: (error as { code?: string }).code ?? null, message: String((error as Error)?.message ?? error).slice(0, 200) })
      })
      .finally(() => {
        running = null
      })
    return running
  }

  return {
    start() {
      if (timer || closed) return
      timer = setInterval(() => void tick(), options.intervalMs ?? 1000)
      timer.unref?.()
    },
    tick,
    async close() {
      closed = true
      if (timer) clearInterval(timer)
      timer = null
      await running
      sender?.close?.()
    },
  }
}
