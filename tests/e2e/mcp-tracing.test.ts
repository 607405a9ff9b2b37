// Traces through the MCP gateway, against a local OTLP/HTTP receiver: a tools/call carrying a
// traceparent gets a server span with its decision's attributes, and the call the gateway makes
// upstream is a client span of that same trace, a child of the request's span (the upstream is
// told the trace as params._meta.traceparent, OpenTelemetry's convention for MCP).
import t from 'tap'
import { otlpReceiver } from '../support/otlp-receiver.ts'
import { eventually, mcpWorld } from '../support/mcp-support.ts'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT_ID = '00f067aa0ba902b7'

t.test('an MCP tool call continues the incoming trace, upstream included', async (t) => {
  const receiver = await otlpReceiver(t)
  const { app, keys, upstream, agentIds } = await mcpWorld(t, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url })
  const envelope = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'traced-client', version: '1.0.0' } }
  const answer = await app.call('POST', '/mcp', {
    token: keys.bot,
    headers: { accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'demo__echo', traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` },
    json: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'demo__echo', arguments: { text: 'traced' }, _meta: envelope } },
  })
  t.equal(answer.status, 200)
  t.match(await answer.text(), '"text":"traced"')
  t.equal(upstream.calls.byTool.echo, 1)
  const traced = await eventually(async () => {
    const spans = receiver.spans.filter((span) => span.traceId === TRACE_ID)
    return spans.length >= 2 ? spans : null
  })
  const server = traced.find((span) => span.kind === 2)!
  const client = traced.find((span) => span.kind === 3)!
  t.equal(server.name, 'POST /mcp')
  t.equal(server.parentSpanId, PARENT_ID, 'the request span continues the caller trace')
  t.same(
    [server.attributes['steward.decision.outcome'], server.attributes['steward.agent_id'], server.attributes['steward.action']],
    ['allow', agentIds.bot, 'mcp.demo.echo'],
    "the decision's outcome, the key's agent and the action",
  )
  t.equal(client.name, 'mcp.upstream')
  t.equal(client.parentSpanId, server.spanId, 'the upstream call is a child of the request span')
  t.equal(traced.length, 2, 'nothing else joined the trace')
})
