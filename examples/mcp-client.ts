// An MCP client of the kind an agent runs, to try Steward's gateway from a shell (docs/mcp.md):
// the official SDK's client, unmodified, connected to Steward's /mcp with an agent key as its
// bearer token. Nothing in it asks Steward anything: the gateway decides every call.
//
//   STEWARD_AGENT_KEY=stw_key_… node --import tsx examples/mcp-client.ts [--legacy] <url> list
//   STEWARD_AGENT_KEY=stw_key_… node --import tsx examples/mcp-client.ts [--legacy] <url> call <tool> '<arguments as JSON>'
//
// By default it speaks protocol revision 2026-07-28 with the 2.x client: a call that needs an
// approval answers with a URL elicitation, printed on stderr for a person to open, and the
// client retries until the approval is decided. --legacy speaks 2025-11-25 with the 1.x client:
// the gateway holds the call while a person decides, and progress is printed on stderr.
// The key is read from the environment, never from the command line (which other users of the
// machine can see).
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'

const USAGE = "usage: STEWARD_AGENT_KEY=stw_key_… node --import tsx examples/mcp-client.ts [--legacy] <url> list | call <tool> '<arguments as JSON>'"
/** How long a call may wait for a person: a retry answers after at most MCP_APPROVAL_HOLD_SECONDS. */
const CALL_TIMEOUT_MS = 15 * 60_000

function fail(message: string): never {
  console.error(message)
  process.exit(2)
}

const argv = process.argv.slice(2)
const legacy = argv[0] === '--legacy'
const [url, command, tool, rawArgs] = legacy ? argv.slice(1) : argv
const key = process.env.STEWARD_AGENT_KEY
if (!url || !URL.canParse(url) || (command !== 'list' && command !== 'call') || (command === 'call' && !tool)) fail(USAGE)
if (!key) fail('STEWARD_AGENT_KEY is not set: create an agent key (POST /agents/{agent_id}/keys) and export it')
let args: Record<string, unknown> = {}
if (command === 'call' && rawArgs !== undefined) {
  try {
    args = JSON.parse(rawArgs)
  } catch {
    fail(`the arguments are not JSON: ${rawArgs}`)
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) fail('the arguments must be a JSON object')
}
const requestInit = { headers: { authorization: `Bearer ${key}` } }
const info = { name: 'steward-example-client', version: '1.0.0' }

/** Prints what came back: the tool result as JSON (isError set on a refused or failed call). */
function show(value: unknown): void {
  console.log(JSON.stringify(value, null, 2))
}

if (legacy) {
  const client = new LegacyClient(info)
  await client.connect(new LegacyTransport(new URL(url!), { requestInit }))
  if (command === 'list') show((await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description })))
  else {
    const result = await client.callTool({ name: tool!, arguments: args }, CallToolResultSchema, {
      timeout: CALL_TIMEOUT_MS,
      resetTimeoutOnProgress: true,
      onprogress: (progress) => console.error(`(progress) ${progress.message ?? ''}`),
    })
    show({ content: result.content, isError: result.isError ?? false })
  }
  await client.close()
} else {
  const client = new Client(info, { versionNegotiation: { mode: { pin: '2026-07-28' } }, capabilities: { elicitation: { url: {} } }, inputRequired: { maxRounds: 30 } })
  // URL-mode elicitation: the person opens the page; the client says it was shown, then retries.
  let shown = ''
  client.setRequestHandler('elicitation/create', async (request) => {
    const params = request.params as { mode?: string; url?: string; message?: string }
    if (params.url && params.url !== shown) console.error(params.message?.includes(params.url) ? params.message : `${params.message ?? 'Open this page:'} ${params.url}`)
    shown = params.url ?? shown
    return { action: 'accept' }
  })
  await client.connect(new StreamableHTTPClientTransport(new URL(url!), { requestInit }))
  if (command === 'list') show((await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description })))
  else {
    const result = await client.callTool({ name: tool!, arguments: args }, { timeout: CALL_TIMEOUT_MS })
    show({ content: result.content, isError: result.isError ?? false })
  }
  await client.close()
}
