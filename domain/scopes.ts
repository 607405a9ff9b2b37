// The product API's permissions (OAuth scopes), and which role holds which (docs/api.md, roles).
import type { Role } from './roles.ts'

export const SCOPES = [
  'policies:read',
  'policies:write',
  'keys:manage',
  'members:manage',
  'agents:read',
  'agents:write',
  'decisions:read',
  'decisions:check',
  // Reading the audit log: Admins and Owners only (every scope), never an agent key.
  'audit:read',
  'webhooks:manage',
  // Upstream MCP servers: Viewers and up read them, Admins and Owners (every scope) change them.
  'mcp:read',
  'mcp:manage',
] as const

export type Scope = (typeof SCOPES)[number]

const VIEWER: readonly Scope[] = ['policies:read', 'agents:read', 'decisions:read', 'mcp:read']
// Members may ask for decisions (a gateway's key), not change what decides them.
const MEMBER: readonly Scope[] = [...VIEWER, 'decisions:check']
const MANAGER: readonly Scope[] = ['policies:read', 'policies:write', 'agents:read', 'agents:write', 'decisions:read', 'decisions:check', 'mcp:read']

export const ROLE_SCOPES: Readonly<Record<Role, readonly Scope[]>> = Object.freeze({
  viewer: VIEWER,
  member: MEMBER,
  manager: MANAGER,
  admin: SCOPES,
  owner: SCOPES,
})
