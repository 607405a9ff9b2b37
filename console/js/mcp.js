// What the console shows of a decision or approval about an MCP tool: the tool and server its
// action names (mcp.<server>.<tool> through Steward's gateway or ToolHive; mcp-prompt.<server>.<name>
// and mcp-resource.<server> through ToolHive), where it came from, and its arguments in short.
import { h } from './dom.js'

/** GET /decisions?via=: null in the log is a POST /decisions. */
export const VIA = [
  ['api', 'API'],
  ['mcp', 'MCP gateway'],
  ['toolhive', 'ToolHive'],
]

export function viaLabel(via) {
  const found = VIA.find(([value]) => value === (via ?? 'api'))
  return found ? found[1] : String(via)
}

/** The MCP tool, prompt or resource an action names, or null for any other action. */
export function toolOf(action) {
  if (typeof action !== 'string') return null
  const tool = /^mcp\.([^.]+)\.(.+)$/.exec(action)
  if (tool) return { kind: 'tool', server: tool[1], name: tool[2] }
  const prompt = /^mcp-prompt\.([^.]+)\.(.+)$/.exec(action)
  if (prompt) return { kind: 'prompt', server: prompt[1], name: prompt[2] }
  const resource = /^mcp-resource\.(.+)$/.exec(action)
  if (resource) return { kind: 'resource', server: resource[1], name: null }
  return null
}

/** "Tool create_issue on server github", as a line of text with the names in code. */
export function toolLine(tool, resource) {
  if (tool.kind === 'resource') return h('span', {}, 'Resource ', h('code', { text: resource || '—' }), ' on server ', h('code', { text: tool.server }))
  return h('span', {}, tool.kind === 'tool' ? 'Tool ' : 'Prompt ', h('code', { text: tool.name }), ' on server ', h('code', { text: tool.server }))
}

const SHORT = 80

/** The arguments on one line, cut short: the details page shows them in full. */
export function argsInShort(args) {
  if (!args || typeof args !== 'object' || Object.keys(args).length === 0) return '{}'
  const text = JSON.stringify(args)
  return text.length > SHORT ? `${text.slice(0, SHORT - 1)}…` : text
}

/** The MCP client a gateway decision names in its context, as "name version", or null. */
export function clientOf(context) {
  const client = context?.mcp?.client ?? context?.client ?? null
  if (!client || typeof client !== 'object') return null
  return [client.name, client.version].filter((part) => typeof part === 'string' && part).join(' ') || null
}
