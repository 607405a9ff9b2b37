// Who made something (a key, an invitation, a policy), as the API shows it:
// "user:<uuid>", "key:<uuid>" or "operator" (an operator command).

export type Creator = `user:${string}` | `key:${string}` | 'operator'

export function creatorString(userId: string | null, keyId: string | null): Creator {
  if (keyId) return `key:${keyId}`
  if (userId) return `user:${userId}`
  return 'operator'
}
