// The product API client and the session. Tokens live in this module's memory only: never in
// localStorage, sessionStorage, cookies or URLs. A reload signs out (by design: nothing a script
// injected later could read survives), and the access token is refreshed silently before it
// expires while the page stays open.

// The server fills this in: a full URL when the API lives on another origin, else a path on ours.
const BASE = document.querySelector('meta[name="steward-api"]')?.content ?? ''
const API = (/^https?:\/\//.test(BASE) ? BASE : location.origin + BASE).replace(/\/$/, '')

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message)
    this.status = status
    this.body = body
  }
}

const ROLE_RANK = { viewer: 0, member: 1, manager: 2, admin: 3, owner: 4 }

let session = null
let refreshTimer = null
let refreshing = null
const listeners = new Set()

export function onSessionChange(listener) {
  listeners.add(listener)
}

function changed() {
  for (const listener of listeners) listener(session)
}

export function currentSession() {
  return session
}

/** At least this role in the signed-in organization. */
export function can(role) {
  return session !== null && ROLE_RANK[session.role] >= ROLE_RANK[role]
}

export function roleRank(role) {
  return ROLE_RANK[role] ?? -1
}

function adopt(grant, email) {
  session = {
    email: email ?? session?.email ?? '',
    accessToken: grant.access_token,
    refreshToken: grant.refresh_token ?? null,
    organizationId: grant.organization_id,
    role: grant.role,
    organizations: grant.organizations ?? [],
  }
  clearTimeout(refreshTimer)
  // Refresh a minute before expiry (at least 10 s from now).
  const seconds = Math.max(10, Number(grant.expires_in ?? 900) - 60)
  if (session.refreshToken) refreshTimer = setTimeout(() => void refresh().catch(() => signOut('Your session ended; sign in again.')), seconds * 1000)
  changed()
}

/** fetch, with a network failure (or a refused CORS check) as an ApiError of status 0. */
async function send(url, init) {
  try {
    return await fetch(url, init)
  } catch (error) {
    if (error?.name === 'AbortError') throw error
    throw new ApiError(0, `Could not reach the API at ${API}`)
  }
}

async function post(path, body) {
  const response = await send(API + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
  })
  const data = await readJson(response)
  if (!response.ok) throw new ApiError(response.status, messageOf(data, response), data)
  return data
}

export async function signIn(email, password, organizationId) {
  const body = { email, password }
  if (organizationId) body.organization_id = organizationId
  const grant = await post('/auth/login', body)
  adopt(grant, email)
  return grant
}

async function refresh() {
  if (!session?.refreshToken) throw new ApiError(401, 'No session')
  refreshing ??= post('/auth/refresh', { refresh_token: session.refreshToken })
    .then((grant) => adopt(grant))
    .finally(() => {
      refreshing = null
    })
  return refreshing
}

export function signOut(reason) {
  const old = session
  if (!old) return
  session = null
  // Read (once) by the sign-in page that changed() is about to show.
  signOut.reason = reason ?? null
  clearTimeout(refreshTimer)
  // Best effort: servers that offer RFC 7009 revocation end the session at once; elsewhere the
  // refresh token dies with this page's memory.
  if (old?.refreshToken) {
    void fetch(API + '/auth/revoke', {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: old.refreshToken, token_type_hint: 'refresh_token' }),
      credentials: 'omit',
    }).catch(() => {})
  }
  changed()
}

async function readJson(response) {
  if (response.status === 204) return null
  const text = await response.text()
  if (!text) return null
  try {
    return JSON.parse(text)
  } catch {
    return { error: text.slice(0, 200) }
  }
}

function messageOf(data, response) {
  if (data && typeof data === 'object') return data.error_description || data.error || data.message || response.statusText
  return response.statusText || `HTTP ${response.status}`
}

/**
 * Calls the product API with the session's bearer token. A 401 refreshes the session once and
 * retries; a second 401 signs out.
 */
export async function api(method, path, body, { signal, retried } = {}) {
  if (!session) throw new ApiError(401, 'Not signed in')
  const headers = { Authorization: `Bearer ${session.accessToken}`, Accept: 'application/json' }
  if (body !== undefined) headers['Content-Type'] = 'application/json'
  const response = await send(API + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'omit',
    cache: 'no-store',
    signal,
  })
  if (response.status === 401 && !retried && session?.refreshToken) {
    try {
      await refresh()
    } catch {
      signOut('Your session ended; sign in again.')
      throw new ApiError(401, 'Your session ended; sign in again.')
    }
    return api(method, path, body, { signal, retried: true })
  }
  const data = await readJson(response)
  if (response.status === 401) signOut('Your session ended; sign in again.')
  if (!response.ok) throw new ApiError(response.status, messageOf(data, response), data)
  return data
}

/** A query string from the non-empty entries of an object. */
export function qs(params) {
  const search = new URLSearchParams()
  for (const [name, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value))
  const text = search.toString()
  return text ? `?${text}` : ''
}
