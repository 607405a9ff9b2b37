// The MCP gateway's vocabulary, no I/O: an upstream server's name (the tool namespace), how a
// namespaced tool name is made and split, and which headers may be configured to go upstream.

/** An upstream server's name: a handle without underscores, so `<server>__<tool>` splits one way. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,31}$/
export const MCP_SERVER_NAME_MESSAGE = 'must be 1 to 32 of a-z, 0-9 and -, starting with a letter'

/** Between the server's name and the upstream tool's name in a tool name the gateway lists. */
export const TOOL_SEPARATOR = '__'

/** `<server>__<tool>`. */
export function namespacedTool(server: string, tool: string): string {
  return `${server}${TOOL_SEPARATOR}${tool}`
}

/** The server and tool of a namespaced name (split at the first `__`), or null when it is not one. */
export function splitToolName(name: string): { readonly server: string; readonly tool: string } | null {
  const at = name.indexOf(TOOL_SEPARATOR)
  if (at < 0) return null
  const server = name.slice(0, at)
  const tool = name.slice(at + TOOL_SEPARATOR.length)
  return MCP_SERVER_NAME.test(server) && tool !== '' ? { server, tool } : null
}

/** The decision's action for a tool call: `mcp.<server>.<tool>`. */
export function toolAction(server: string, tool: string): string {
  return `mcp.${server}.${tool}`
}

export const MAX_UPSTREAM_HEADERS = 16
export const MAX_HEADER_NAME = 64
export const MAX_HEADER_VALUE = 4096

/** An HTTP field name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** Visible ASCII, spaces and tabs: nothing a header could be split or smuggled with. */
const FIELD_VALUE = /^[\t\x20-\x7e]*$/

/**
 * Headers the transport sets itself or that describe the connection: configuring them would break
 * the exchange with the upstream or smuggle something past it.
 */
const RESERVED = new Set([
  'accept',
  'accept-encoding',
  'connection',
  'content-encoding',
  'content-length',
  'content-type',
  'expect',
  'host',
  'keep-alive',
  'last-event-id',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

/** Why `name` may not be configured as an upstream header, or null when it may. */
export function headerNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > MAX_HEADER_NAME || !TOKEN.test(name)) return `is not a header name (1 to ${MAX_HEADER_NAME} token characters)`
  const lower = name.toLowerCase()
  if (RESERVED.has(lower) || lower.startsWith('mcp-') || lower.startsWith('proxy-')) return 'is set by the gateway itself'
  return null
}

/** Why `value` may not be sent as a header value, or null when it may. */
export function headerValueProblem(value: string): string | null {
  if (value.length > MAX_HEADER_VALUE) return `is longer than ${MAX_HEADER_VALUE} characters`
  if (!FIELD_VALUE.test(value)) return 'holds a character a header value may not hold (only visible ASCII, spaces and tabs)'
  return null
}
