// The five roles of an organization member or API key, highest first, and their order.

export const ROLES = ['owner', 'admin', 'manager', 'member', 'viewer'] as const

export type Role = (typeof ROLES)[number]

/** Higher outranks lower; a key's role never exceeds its creator's. */
export const ROLE_RANK: Readonly<Record<Role, number>> = Object.freeze({ viewer: 0, member: 1, manager: 2, admin: 3, owner: 4 })

/** The lower of two roles (`b` null: `a`): a key acts with at most its creating user's role. */
export function lowerRole(a: Role, b: Role | null): Role {
  return b !== null && ROLE_RANK[b] < ROLE_RANK[a] ? b : a
}

export function isRole(value: string): value is Role {
  return (ROLES as readonly string[]).includes(value)
}
