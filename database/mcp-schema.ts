// The MCP gateway's tables, as database/schema.ts composes them into the Database type.
import type { Timestamp } from './column-types.ts'

/** How a decision came: null for POST /decisions, the MCP gateway, or ToolHive's authorizer route. */
export type DecisionVia = 'mcp' | 'toolhive'

/** An upstream MCP server of one organization: its tools are offered through the gateway. */
export interface McpServerTable {
  id: string
  organization_id: string
  /** Unique per organization, ^[a-z][a-z0-9-]{0,31}$: the tool namespace. */
  name: string
  /** The upstream's Streamable HTTP endpoint. */
  url: string
  /** The headers sent upstream: a JSON object of name → value, sealed (auth/secret-box.ts); null: none. */
  headers_sealed: string | null
  /** The names of those headers, lower-cased and sorted; never their values. */
  header_names: string[]
  /** The tool argument whose value becomes the decision's resource; null: the server's name. */
  resource_argument: string | null
  enabled: boolean
  /** "user:<uuid>" or "key:<uuid>". */
  created_by: string
  created_at: Timestamp
  updated_at: Timestamp
}
