// The request context: what the pipeline learned about a request before any route runs (who the
// client is, whether the transport is secure, the time), plus the configuration and dependencies
// the handler was built with. It travels through the router as the extra fetch argument: handlers
// read configuration and dependencies from it, never from a closure.
import type { Lifecycle } from '../domain/lifecycle.ts'
import type { Logger } from '../log.ts'
import { clientRateKey } from './client-address.ts'

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

export function buildContext<C extends PipelineConfig, D extends PipelineDeps>(request: Request, config: C, deps: D, conn: ConnectionInfo | undefined): RequestContext<C, D> {
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
  // Worked out when a limit asks for it: most answers (a 404, a warm credential check) never do.
  let clientKey: string | undefined
  return {
    config,
    deps,
    requestId: request.headers.get('x-request-id')?.slice(0, 64).replace(/[^\w.-]/g, '') || crypto.randomUUID(),
    clientAddress,
    get clientKey() {
      return (clientKey ??= clientRateKey(clientAddress, config.rateLimitIpv6Prefix))
    },
    secure: tls || (!trusted && isLoopback(peer)),
    now: deps.clock(),
  }
}
