// The product API's permissions (OAuth scopes), and which role holds which (docs/api.md, roles).
import type { Role } from './roles.ts'

export const SCOPES = ['policies:read', 'policies:write', 'keys:manage', 'members:manage'] as const

export type Scope = (typeof SCOPES)[number]

export const ROLE_SCOPES: Readonly<Record<Role, readonly Scope[]>> = Object.freeze({
  viewer: ['policies:read'],
  member: ['policies:read'],
  manager: ['policies:read', 'policies:write'],
  admin: SCOPES,
  owner: SCOPES,
})
