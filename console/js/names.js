// Names for the ids the API answers with: policy names, member emails, key names and agent
// handles, read through the existing routes and kept for the session (per organization). An id
// not found is looked up again at most every 30 seconds, so a key or agent made meanwhile gets
// its name without a reload.
import { api, can, currentSession, qs } from './api.js'

const RETRY_MS = 30_000
const MAX_AGENT_PAGES = 20
let caches = null

function cache() {
  const org = currentSession()?.organizationId ?? ''
  if (caches?.org !== org) caches = { org, policies: new Map(), lists: new Map(), self: null }
  return caches
}

/** The first 8 characters of an id: enough to tell two apart on a screen. */
export function short(id) {
  return String(id ?? '').slice(0, 8)
}

/** A list route read once into a Map (id → name), again after RETRY_MS when asked for an unknown id. */
function list(name, load) {
  const c = cache()
  let entry = c.lists.get(name)
  if (!entry || (entry.stale && Date.now() - entry.at > RETRY_MS)) {
    entry = { at: Date.now(), stale: false, map: load().catch(() => new Map()) }
    c.lists.set(name, entry)
  }
  return entry
}

async function lookup(name, load, id) {
  const entry = list(name, load)
  const map = await entry.map
  if (!map.has(id)) entry.stale = true
  return map.get(id) ?? null
}

const loaders = {
  // Members and keys are Admin-only routes: other roles get no names from them (never a 403 on screen).
  members: async () => (can('admin') ? new Map((await api('GET', '/members')).members.map((m) => [m.user_id, m.email])) : new Map()),
  keys: async () => (can('admin') ? new Map((await api('GET', '/keys')).keys.map((k) => [k.key_id, k.name])) : new Map()),
  agents: async () => {
    const map = new Map()
    let cursor
    for (let page = 0; page < MAX_AGENT_PAGES; page += 1) {
      const data = await api('GET', `/agents${qs({ limit: 100, cursor })}`)
      for (const agent of data.agents ?? []) map.set(agent.agent_id, agent.handle)
      cursor = data.next_cursor
      if (!cursor) break
    }
    return map
  },
}

/** The signed-in person's own user id, learnt from the votes of an approval they just voted on. */
export function rememberSelf(userId) {
  cache().self = userId
}

/** A person's email (Admins and Owners read the members), "you", or null. */
export async function personName(userId) {
  if (!userId) return null
  const c = cache()
  if (c.self === userId) return `${currentSession()?.email ?? 'you'} (you)`
  return lookup('members', loaders.members, userId)
}

export function keyName(keyId) {
  return keyId ? lookup('keys', loaders.keys, keyId) : Promise.resolve(null)
}

export function agentHandle(agentId) {
  return agentId ? lookup('agents', loaders.agents, agentId) : Promise.resolve(null)
}

/** A policy's name (archived ones too), read once per id; null when it cannot be read. */
export function policyName(policyId) {
  if (!policyId) return Promise.resolve(null)
  const c = cache()
  if (!c.policies.has(policyId)) {
    const read = api('GET', `/policies/${encodeURIComponent(policyId)}${qs({ organization_id: c.org })}`)
      .then((p) => p.name)
      .catch(() => {
        c.policies.delete(policyId)
        return null
      })
    c.policies.set(policyId, read)
  }
  return c.policies.get(policyId)
}

/** "Refund review (version 2)", or the id shortened when the name cannot be read. */
export async function policyLabel(ref) {
  const name = (await policyName(ref.policy_id)) ?? `policy ${short(ref.policy_id)}`
  return ref.version ? `${name} (version ${ref.version})` : name
}

const KINDS = { user: 'person', key: 'key', agent: 'agent', policy: 'policy', invitation: 'invitation', approval: 'approval', decision: 'decision', webhook: 'webhook', mcp_server: 'MCP server', organization: 'organization', audit: 'audit log', lead: 'lead' }

/** Who or what an audit actor or target is, in words: an email, a key's or agent's name, a policy's name. */
export async function refLabel(ref) {
  const type = ref?.type ?? ''
  const id = ref?.id ?? null
  if (type === 'operator') return 'operator (command line)'
  if (type === 'system') return 'Steward (automatic)'
  if (type === 'organization') return 'this organization'
  if (!id) return KINDS[type] ?? (type || '—')
  const found =
    type === 'user' ? await personName(id)
    : type === 'key' ? await keyName(id).then((n) => (n ? `key “${n}”` : null))
    : type === 'agent' ? await agentHandle(id)
    : type === 'policy' ? await policyName(id).then((n) => (n ? `policy “${n}”` : null))
    : null
  return found ?? `${KINDS[type] ?? type} ${short(id)}`
}

/** The API's "user:<uuid>", "key:<uuid>" or "operator" (who made a policy version, a key…) in words. */
export function creatorLabel(creator) {
  const [type, id] = String(creator ?? '').split(':')
  return refLabel({ type, id: id ?? null })
}

/** A table cell showing who made something: the raw value at once, the name once it is known. */
export function creatorCell(creator) {
  const cell = document.createElement('span')
  cell.textContent = creator ?? '—'
  if (creator) {
    cell.title = creator
    void creatorLabel(creator).then((text) => {
      cell.textContent = text
    })
  }
  return cell
}
