// Headers every answer carries, whatever produced it (a route, the router's 404/405, or the
// runtime adapter refusing a malformed request): added last, so they win over a handler's.
import { setCorsHeaders } from './cors.ts'
import type { PipelineConfig, RequestContext } from './context.ts'
import { JSON_TYPE, type Reply } from './reply.ts'

// No answer of ours may be framed (clickjacking). Nothing we serve is HTML, so nothing in an
// answer may load or run either: JSON, llms.txt and the SVG logo get `default-src 'none'` too.
// The console's HTML pages set their own stricter-than-nothing policy (routes/console.ts).
const CSP_FRAME = "frame-ancestors 'none'"
const CSP_NONE = "default-src 'none'; frame-ancestors 'none'"

/**
 * Sets the headers every answer carries, whatever produced it (a route, the router's 404/405,
 * or the runtime adapter refusing a malformed request): they win over a handler's.
 */
export function setSecurityHeaders(reply: Reply): void {
  // Written by their lower-case names straight into the reply's record (reply.ts): this runs on
  // every answer, and setHeaders lower-cases every name it is given.
  reply.headers['x-content-type-options'] = 'nosniff'
  const type = reply.headers['content-type'] ?? ''
  // Nearly every answer is JSON (reply.ts): no pattern to run for it.
  const html = type !== JSON_TYPE && /^\s*text\/html\b/i.test(type)
  // A page that brings its own policy (the console's, which forbids framing too) keeps it.
  if (html && reply.headers['content-security-policy']?.includes("frame-ancestors 'none'")) return
  reply.headers['content-security-policy'] = html ? CSP_FRAME : CSP_NONE
}

/** Security, request-id, CORS and HSTS headers: the last step of every answer. */
export function finish(reply: Reply, request: Request, ctx: RequestContext<PipelineConfig>): void {
  setSecurityHeaders(reply)
  reply.headers['x-request-id'] = ctx.requestId
  // Discovery documents (any origin) and preflights carry their own CORS answer: keep it.
  if (!('access-control-allow-origin' in reply.headers)) setCorsHeaders(reply, ctx.config, request)
  if (ctx.config.tlsCertFile) reply.headers['strict-transport-security'] = 'max-age=31536000'
}
