// The fetch the gateway's MCP client uses to reach upstream servers: node:http(s) with the SSRF
// guard's lookup (services/outbound-url.ts), so every connection goes only to an address checked
// when it was resolved (a name that rebinds to a private address between a check and the connect
// is refused), no redirect is followed, and no answer is read past a size bound. It speaks just
// what the SDK's Streamable HTTP client transport needs: a method, headers, a string body, a
// signal, and a streamed answer.
import http from 'node:http'
import https from 'node:https'
import { Readable } from 'node:stream'
import { guardedLookup, outboundUrlProblem, REFUSED_CODE, type OutboundPolicy } from './outbound-url.ts'

/** More than any tool result the gateway forwards: a larger answer is cut off as an error. */
export const MAX_UPSTREAM_ANSWER_BYTES = 8 * 1024 * 1024

export interface GuardedFetch {
  readonly fetch: typeof fetch
  /** Ends the keep-alive connections. */
  close(): void
}

export function createGuardedFetch(policy: OutboundPolicy): GuardedFetch {
  const lookup = guardedLookup(policy)
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 256 }),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 256 }),
  }

  async function guardedFetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
    const request = input instanceof Request ? input : null
    const url = new URL(request ? request.url : String(input))
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`unsupported protocol ${url.protocol}`)
    // An IP literal is never looked up, so the lookup's check cannot refuse it: checked here, with
    // the scheme (a setting turned off since the server was registered applies at once).
    const problem = outboundUrlProblem(url, 'url', policy)
    if (problem !== null) throw Object.assign(new Error(problem.replace(/^Field url /, 'the URL ')), { code: REFUSED_CODE })
    const method = (init.method ?? request?.method ?? 'GET').toUpperCase()
    const headers = new Headers(init.headers ?? request?.headers)
    const body = init.body ?? null
    if (body !== null && typeof body !== 'string') throw new TypeError('the upstream fetch sends string bodies only')
    const signal = init.signal ?? request?.signal ?? null
    signal?.throwIfAborted()
    const client = url.protocol === 'https:' ? https : http
    return new Promise<Response>((resolve, reject) => {
      const outgoing = client.request(
        url,
        { method, headers: Object.fromEntries(headers), agent: agents[url.protocol as 'http:'], lookup, ...(signal ? { signal } : {}) },
        (answer) => {
          const status = answer.statusCode ?? 502
          const responseHeaders = new Headers()
          for (const [name, value] of Object.entries(answer.headers)) {
            if (value === undefined) continue
            for (const one of Array.isArray(value) ? value : [value]) responseHeaders.append(name, one)
          }
          // A body of a status that has none (204, 304) or of a HEAD is dropped, as fetch does.
          if (status === 204 || status === 304 || method === 'HEAD') {
            answer.resume()
            resolve(new Response(null, { status, headers: responseHeaders }))
            return
          }
          const init = { status, statusText: answer.statusMessage ?? '', headers: responseHeaders }
          const tooLarge = () => new Error(`the upstream answer is larger than ${MAX_UPSTREAM_ANSWER_BYTES} bytes`)
          // An event stream is passed on as it comes; any other answer (JSON) is read whole first,
          // which costs less than a web stream for the few chunks it has.
          if ((answer.headers['content-type'] ?? '').startsWith('text/event-stream')) {
            let read = 0
            answer.on('data', (chunk: Buffer) => {
              read += chunk.length
              if (read > MAX_UPSTREAM_ANSWER_BYTES) answer.destroy(tooLarge())
            })
            resolve(new Response(Readable.toWeb(answer) as ReadableStream<Uint8Array>, init))
            return
          }
          const chunks: Buffer[] = []
          let read = 0
          answer.on('data', (chunk: Buffer) => {
            read += chunk.length
            if (read > MAX_UPSTREAM_ANSWER_BYTES) answer.destroy(tooLarge())
            else chunks.push(chunk)
          })
          answer.on('end', () => resolve(new Response(Buffer.concat(chunks), init)))
          answer.on('error', reject)
        },
      )
      outgoing.on('error', reject)
      outgoing.end(body ?? undefined)
    })
  }

  return {
    fetch: guardedFetch as typeof fetch,
    close() {
      agents['http:'].destroy()
      agents['https:'].destroy()
    },
  }
}
