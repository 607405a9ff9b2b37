// The SSRF guard every outbound request shares (webhook deliveries, upstream MCP servers): which
// URLs may be configured as targets, and a DNS lookup that checks every address it returns, so a
// socket built with it connects only to checked addresses and a name that changes its answer
// between a check and the connect (rebinding) cannot reach a private or loopback address.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import type { LookupFunction } from 'node:net'
import { forbiddenAddress, isIpLiteral } from '../domain/webhooks.ts'

/** Whether internal targets are allowed, and the setting that allows them (named in refusals). */
export interface OutboundPolicy {
  readonly allowPrivate: boolean
  readonly setting: 'WEBHOOK_ALLOW_PRIVATE' | 'MCP_ALLOW_PRIVATE' | 'CAPTCHA_ALLOW_PRIVATE'
}

/** The error code of a connection the guarded lookup refused. */
export const REFUSED_CODE = 'ETARGETREFUSED'

/** Why `url`'s host may not be a target when it is an IP literal, or null. */
export function refusedLiteral(hostname: string): string | null {
  if (!isIpLiteral(hostname)) return null
  const reason = forbiddenAddress(hostname)
  return reason ? `${hostname} is a ${reason} address` : null
}

/**
 * Why a target URL given as `field` is refused, as a 400 says it, or null: without the setting,
 * only https to a host that is not an internal IP literal. (Names are checked when they resolve.)
 */
export function outboundUrlProblem(url: URL, field: string, policy: OutboundPolicy): string | null {
  if (policy.allowPrivate) return null
  if (url.protocol !== 'https:') return `Field ${field} must be an https URL (plain http only with ${policy.setting}=true)`
  const refused = refusedLiteral(url.hostname)
  return refused ? `Field ${field} is refused: ${refused} (allowed only with ${policy.setting}=true)` : null
}

/**
 * outboundUrlProblem, and then the host name resolved now: refused when any address it has is
 * internal. A name that does not resolve (yet), or not within `timeoutMs`, passes here: the
 * guarded lookup checks it again at every connection.
 */
export async function resolvedUrlProblem(url: URL, field: string, policy: OutboundPolicy, timeoutMs: number): Promise<string | null> {
  const problem = outboundUrlProblem(url, field, policy)
  if (problem || policy.allowPrivate || isIpLiteral(url.hostname)) return problem
  const host = url.hostname
  const addresses = await new Promise<LookupAddress[]>((resolve) => {
    const timer = setTimeout(() => resolve([]), timeoutMs)
    dnsLookup(host, { all: true }, (error, found) => {
      clearTimeout(timer)
      resolve(error ? [] : found)
    })
  })
  for (const entry of addresses) {
    const reason = forbiddenAddress(entry.address)
    if (reason) return `Field ${field} is refused: ${host} resolves to ${entry.address}, a ${reason} address (allowed only with ${policy.setting}=true)`
  }
  return null
}

/** A lookup for http(s).request that refuses, unless `policy` allows it, any name with an internal address. */
export function guardedLookup(policy: OutboundPolicy): LookupFunction {
  const hint = `set ${policy.setting}=true to allow internal targets`
  return ((hostname: string, options: { family?: number; all?: boolean }, callback: (...args: unknown[]) => void) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses: LookupAddress[]) => {
      if (error) return callback(error)
      if (!policy.allowPrivate) {
        for (const entry of addresses) {
          const reason = forbiddenAddress(entry.address)
          if (reason) {
            const refused = Object.assign(new Error(`refused: ${hostname} resolves to ${entry.address}, a ${reason} address; ${hint}`), { code: REFUSED_CODE })
            return callback(refused)
          }
        }
      }
      if (addresses.length === 0) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }))
      if (options.all) return callback(null, addresses)
      return callback(null, addresses[0]!.address, addresses[0]!.family)
    })
  }) as LookupFunction
}
