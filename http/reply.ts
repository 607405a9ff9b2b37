// What a handler answers, and the helpers that build one.

/**
 * What a handler answers. The pipeline (access guard, surface, CORS, security headers) adds its
 * headers to the reply, and pipeline.ts turns it into a Response once, at the very end. Why not a
 * Response from the start: on Node, @hono/node-server writes a Response straight to the socket
 * only while its headers are the plain object it was built with; a single `headers.set` on it
 * builds a Headers object and a second, native Response, a large part of a small request's cost.
 */
export interface Reply {
  readonly status: number
  readonly body: string | null
  /**
   * A body that streams instead (the MCP gateway's server-sent events): sent in place of `body`,
   * which is then null. Only a route sets it; refusals never do.
   */
  readonly stream?: ReadableStream<Uint8Array>
  /**
   * Lower-cased names, so a later header replaces an earlier one of the same name as
   * Headers.set does (and as Headers wrote them to the wire). Owned by this reply, never shared.
   */
  readonly headers: Record<string, string>
}

/** The default of no extra headers: one shared object, not a new one per reply. */
const NONE: Readonly<Record<string, string>> = Object.freeze({})

export function reply(status: number, body: string | null, headers: Readonly<Record<string, string>> = NONE): Reply {
  const out: Reply = { status, body, headers: {} }
  setHeaders(out, headers)
  return out
}

/** Sets headers on a reply, replacing any of the same name whatever its case. */
export function setHeaders(reply: Reply, headers: Readonly<Record<string, string>>): void {
  for (const name in headers) reply.headers[name.toLowerCase()] = headers[name]!
}

export function json(status: number, body: unknown, headers: Readonly<Record<string, string>> = NONE): Reply {
  return jsonText(status, JSON.stringify(body), headers)
}

/** The media type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8'

/** A JSON reply whose body is already serialized (a fixed refusal's, serialized once: pipeline.ts). */
export function jsonText(status: number, text: string, headers: Readonly<Record<string, string>> = NONE): Reply {
  const out: Reply = { status, body: text, headers: { 'content-type': JSON_TYPE } }
  setHeaders(out, headers)
  return out
}

export function created(body: unknown, location: string): Reply {
  return json(201, body, { Location: location })
}

export function noContent(): Reply {
  return reply(204, null)
}

/** Whether an answer is still to come (a promise) or already here. */
export function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function'
}
