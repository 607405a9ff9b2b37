// The request context: what the pipeline learned about a request before any route runs (who the
// client is, whether the transport is secure, the time), plus the configuration and dependencies
// the handler was built with. It travels through the router as the extra fetch argument: handlers
// read configuration and dependencies from it, never from a closure.
import type { Lifecycle } from '../domain/lifecycle.ts'
import type { Logger } from '../log.ts'
import { rememberedRateKeys } from './client-address.ts'

/** The settings the pipeline itself reads; the whole configuration satisfies it. */
export interface PipelineConfig {
  readonly corsOrigins: '*' | readonly string[]
  readonly trustProxy: '*' | readonly string[]
  readonly tlsCertFile: string | null
  readonly rateLimitIpv6Prefix: number
  readonly bodyLimitBytes: number
  readonly bodyTimeoutMs: number
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error' | 'silent'
  readonly lifecycle: Lifecycle
}

/** The dependencies the pipeline itself uses; the routes' dependencies extend them. */
export interface PipelineDeps {
  /** Milliseconds since the epoch; tests pass a fake. */
  readonly clock: () => number
  readonly logger: Logger
  /** Told of every answer when metrics or traces are on (services/telemetry.ts). */
  readonly telemetry?: AnswerObserver
}

export interface AnswerObserver {
  /**
   * An answer is about to be sent: `status` and `headers` are its own, `startedAt` the
   * performance.now() reading taken when the request came.
   */
  answered(request: Request, requestId: string, status: number, headers: Readonly<Record<string, string>>, startedAt: number): void
}

export interface RequestContext<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> {
  readonly config: C
  readonly deps: D
  readonly requestId: string
  /** The client's address: the peer, or the forwarded one when the peer is a trusted proxy. */
  readonly clientAddress: string
  /** The client as per-client limits count it: `clientAddress`, IPv6 grouped by its network prefix. */
  readonly clientKey: string
  /** The request reached us over TLS (directly, or through a trusted proxy), or from loopback. */
  readonly secure: boolean
  /** Milliseconds since the epoch, read once per request from the injected clock. */
  readonly now: number
}

/** What a runtime adapter knows about the connection; all optional for embedders. */
export interface ConnectionInfo {
  readonly remoteAddress?: string
  readonly tls?: boolean
}
const LOOPBACK = /^(127\.|::1$|::ffff:127\.)/

function isLoopback(address: string): boolean {
  return LOOPBACK.test(address)
}

/**
 * The request id the pipeline gave a request, kept on the request itself so that what wraps the
 * handler (telemetry) can read it without touching the answer's headers: on Node the adapter's
 * Response builds a full Headers object the first time `headers` is read.
 */
const REQUEST_ID = Symbol('steward.requestId')

export function requestIdOf(request: Request): string | null {
  return (request as Request & { [REQUEST_ID]?: string })[REQUEST_ID] ?? null
}

export function buildContext<C extends PipelineConfig, D extends PipelineDeps>(
  request: Request,
  config: C,
  deps: D,
  conn: ConnectionInfo | undefined,
  /** An id to use instead of the request's own X-Request-Id (a refusal before routing gets a fresh one). */
  requestId?: string,
): RequestContext<C, D> {
  const peer = conn?.remoteAddress ?? '127.0.0.1'
  const trusted = config.trustProxy === '*' || config.trustProxy.includes(peer)
  let clientAddress = peer
  let tls = conn?.tls === true || config.tlsCertFile !== null
  if (trusted) {
    // The proxy appends the address it saw last: that is the one the proxy vouches for.
    const forwarded = request.headers.get('x-forwarded-for')
    const last = forwarded?.split(',').pop()?.trim()
    if (last) clientAddress = last
    const proto = request.headers.get('x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase()
    if (proto === 'https') tls = true
  }
  const id = requestId ?? (request.headers.get('x-request-id')?.slice(0, 64).replace(/[^\w.-]/g, '') || crypto.randomUUID())
  ;(request as Request & { [REQUEST_ID]?: string })[REQUEST_ID] = id
  return new Context(
    config,
    deps,
    id,
    clientAddress,
    tls || (!trusted && isLoopback(peer)),
    deps.clock(),
  )
}

/** One remembered key function per configuration (its IPv6 prefix length), made on first use. */
const RATE_KEYS = new WeakMap<PipelineConfig, (address: string) => string>()
function rateKeyOf(config: PipelineConfig, address: string): string {
  let keyOf = RATE_KEYS.get(config)
  if (keyOf === undefined) RATE_KEYS.set(config, (keyOf = rememberedRateKeys(config.rateLimitIpv6Prefix)))
  return keyOf(address)
}

/**
 * A class, not an object literal with a `get clientKey()`: V8 builds a literal with an accessor
 * through a slow runtime path, and such objects outlive the young generation, so under load every
 * scavenge copies and promotes them. The getter on the prototype costs nothing per request.
 */
class Context<C extends PipelineConfig, D extends PipelineDeps> implements RequestContext<C, D> {
  readonly config: C
  readonly deps: D
  readonly requestId: string
  readonly clientAddress: string
  readonly secure: boolean
  readonly now: number
  #clientKey: string | undefined
  constructor(config: C, deps: D, requestId: string, clientAddress: string, secure: boolean, now: number) {
    this.config = config
    this.deps = deps
    this.requestId = requestId
    this.clientAddress = clientAddress
    this.secure = secure
    this.now = now
  }

  /** Worked out when a limit asks for it: most answers (a 404, a warm credential check) never do. */
  get clientKey(): string {
    return (this.#clientKey ??= rateKeyOf(this.config, this.clientAddress))
  }
}
