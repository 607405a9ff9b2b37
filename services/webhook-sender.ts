// One webhook request out: its Standard Webhooks signature, then a POST with a deadline, a cap on
// the answer read, no redirect followed, and the SSRF guard (services/outbound-url.ts): names are
// resolved by a `lookup` that checks every address it returns, and the socket connects to exactly
// those addresses, so a DNS answer that changes between a check and the connect (rebinding)
// cannot reach a private or loopback address.
import http from 'node:http'
import https from 'node:https'
import { Webhook } from 'standardwebhooks'
import { guardedLookup, REFUSED_CODE, refusedLiteral } from './outbound-url.ts'

export interface SendOptions {
  /** WEBHOOK_ALLOW_PRIVATE: private, loopback and other internal targets are allowed. */
  readonly allowPrivate: boolean
  readonly timeoutMs: number
  /** Bytes of the answer read before the connection is dropped (the body is not kept). */
  readonly maxResponseBytes: number
}

export interface SendResult {
  readonly ok: boolean
  readonly statusCode: number | null
  readonly error: string | null
}

export type Sender = (url: string, headers: Readonly<Record<string, string>>, body: string) => Promise<SendResult>

const ALLOW_HINT = 'set WEBHOOK_ALLOW_PRIVATE=true to allow internal targets'

/** The three Standard Webhooks headers of one attempt. */
export type SignedHeaders = {
  readonly 'webhook-id': string
  readonly 'webhook-timestamp': string
  readonly 'webhook-signature': string
}

/** Signs one attempt of a delivery: `now` in ms since the epoch, sent as whole seconds. */
export type Signer = (messageId: string, now: number, body: string) => SignedHeaders

/**
 * The signer of an endpoint whose secret is `secret` (`whsec_` and base64): the standardwebhooks
 * library's `v1,` HMAC-SHA256 of `id.timestamp.body`, the same library receivers verify with.
 * The key is decoded once, here; make one signer per endpoint and keep it.
 */
export function webhookSigner(secret: string): Signer {
  const webhook = new Webhook(secret)
  return (messageId, now, body) => ({
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(now / 1000)),
    'webhook-signature': webhook.sign(messageId, new Date(now), body),
  })
}

/** A sender with its own keep-alive agents (each connection's address was checked when it opened). */
export function createSender(options: SendOptions): Sender & { close(): void } {
  const lookup = guardedLookup({ allowPrivate: options.allowPrivate, setting: 'WEBHOOK_ALLOW_PRIVATE' })
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 64 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 64 }),
  }
  // Endpoints are few and their URLs repeat for every delivery: parse each once.
  const parsed = new Map<string, URL | null>()
  const parse = (target: string): URL | null => {
    let url = parsed.get(target)
    if (url === undefined) {
      try {
        url = new URL(target)
      } catch {
        url = null
      }
      if (parsed.size >= 1000) parsed.clear()
      parsed.set(target, url)
    }
    return url
  }
  const send: Sender = (target, headers, body) =>
    new Promise<SendResult>((resolve) => {
      const url = parse(target)
      if (!url) return resolve({ ok: false, statusCode: null, error: 'invalid URL' })
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return resolve({ ok: false, statusCode: null, error: `refused: scheme ${url.protocol} is not http(s)` })
      if (!options.allowPrivate) {
        const literal = refusedLiteral(url.hostname)
        if (literal) return resolve({ ok: false, statusCode: null, error: `refused: ${literal}; ${ALLOW_HINT}` })
      }
      let settled = false
      const finish = (result: SendResult) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(result)
      }
      const module = url.protocol === 'https:' ? https : http
      const request = module.request(
        url,
        {
          method: 'POST',
          agent: agents[url.protocol],
          lookup,
          headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'Steward-Webhooks/1' },
        },
        (response) => {
          const status = response.statusCode ?? 0
          let read = 0
          response.on('data', (chunk: Buffer) => {
            read += chunk.length
            // The answer is not kept: past the cap, stop reading and drop the connection.
            if (read > options.maxResponseBytes) response.destroy()
          })
          const done = () => {
            if (status >= 200 && status < 300) finish({ ok: true, statusCode: status, error: null })
            else if (status >= 300 && status < 400) finish({ ok: false, statusCode: status, error: `HTTP ${status}: redirects are not followed` })
            else finish({ ok: false, statusCode: status, error: `HTTP ${status}` })
          }
          response.on('end', done)
          response.on('close', done)
          response.on('error', done)
        },
      )
      const timer = setTimeout(() => {
        request.destroy(Object.assign(new Error(`no answer within ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' }))
      }, options.timeoutMs)
      request.on('error', (error: Error & { code?: string }) => {
        finish({ ok: false, statusCode: null, error: error.code === REFUSED_CODE || error.code === 'ETIMEDOUT' ? error.message : `${error.code ?? 'error'}: ${error.message}` })
      })
      // A string body goes out in the same write as the head (a Buffer would be a second chunk).
      request.end(body)
    })
  return Object.assign(send, {
    close() {
      agents['http:'].destroy()
      agents['https:'].destroy()
    },
  })
}
