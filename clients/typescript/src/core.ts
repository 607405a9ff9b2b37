// The HTTP core: configuration, one request with its retries, sign-in sessions, pagination.
// fetch only, so it runs unchanged on Node (18+), Bun, Deno and browsers.
//
// Retries as openai-node does them: `maxRetries` (2 by default) more attempts on 408, 429, 5xx
// and on connection errors, exponential backoff with jitter (0.5 s doubling up to 8 s, minus up to
// 25 %), a Retry-After of up to `maxRetryAfter` seconds honoured as it is (a longer one is not
// waited for: the error is thrown with retryAfter set). A request that is not a GET is retried
// only when it is safe to repeat: it carries an idempotency key that stays the same on every
// attempt (decisions), or it writes nothing (simulate, replay, plan).
import { APIConnectionError, APIStatusError, APITimeoutError, AuthenticationError, StewardError, statusError } from './errors.ts'
import { OPERATIONS, type Operations, type TokenResponse } from './types.gen.ts'

export const VERSION = '0.1.0'
export const DEFAULT_BASE_URL = 'http://127.0.0.1:8080'
const INITIAL_RETRY_DELAY_MS = 500
const MAX_RETRY_DELAY_MS = 8000
const RETRYABLE = new Set([408, 429])

export interface ClientOptions {
  /** An API key (stw_key_…); default: the STEWARD_API_KEY environment variable. */
  apiKey?: string
  /** Default: STEWARD_BASE_URL, else http://127.0.0.1:8080. */
  baseUrl?: string
  /** Per attempt, in milliseconds (default 60000). */
  timeoutMs?: number
  /** More attempts after the first (default 2). */
  maxRetries?: number
  /** The longest Retry-After honoured, in seconds (default 60). */
  maxRetryAfter?: number
  /** Another fetch (a test double, a fetch with a proxy agent…). */
  fetch?: typeof fetch
  defaultHeaders?: Record<string, string>
}

/** An environment variable on Node, Bun or Deno; undefined in a browser. */
function env(name: string): string | undefined {
  const g = globalThis as { process?: { env?: Record<string, string | undefined> }; Deno?: { env?: { get(name: string): string | undefined } } }
  try {
    return g.process?.env?.[name] ?? g.Deno?.env?.get(name) ?? undefined
  } catch {
    // Deno without --allow-env throws: no variable then.
    return undefined
  }
}

/** A raw answer: status, headers and the decoded JSON body (or null). */
export interface RawResponse<T = unknown> {
  status: number
  headers: Headers
  body: T
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | null | undefined>
  body?: unknown
  /** false: no Authorization header (sign-in). */
  auth?: boolean
  /** Whether a non-GET may be sent again (GET always may). */
  safeToRetry?: boolean
  timeoutMs?: number
  maxRetries?: number
  signal?: AbortSignal
}

/** One page of a list: its items, the cursor of the next one (null on the last) and the raw answer. */
export interface Page<T> {
  items: T[]
  nextCursor: string | null
  raw: Record<string, unknown>
}

/**
 * What a list method returns: `for await (const item of list)` yields every item across pages,
 * each page fetched when the previous one is used up (following next_cursor); `firstPage()` and
 * `pages()` give pages. Nothing is requested before you iterate.
 */
export class Paginator<T> implements AsyncIterable<T> {
  readonly #fetchPage: (cursor: string | null) => Promise<Page<T>>
  constructor(fetchPage: (cursor: string | null) => Promise<Page<T>>) {
    this.#fetchPage = fetchPage
  }
  firstPage(cursor: string | null = null): Promise<Page<T>> {
    return this.#fetchPage(cursor)
  }
  async *pages(): AsyncGenerator<Page<T>> {
    let cursor: string | null = null
    do {
      const page: Page<T> = await this.#fetchPage(cursor)
      yield page
      cursor = page.nextCursor
    } while (cursor)
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for await (const page of this.pages()) yield* page.items
  }
  /** Every item, in order (mind large lists). */
  async toArray(): Promise<T[]> {
    const all: T[] = []
    for await (const item of this) all.push(item)
    return all
  }
}

interface Session {
  accessToken: string
  refreshToken: string | null
  /** When to refresh (epoch ms): a little before the token expires. */
  refreshAt: number
}

function sessionOf(answer: TokenResponse, now: number): Session {
  const seconds = answer.expires_in
  // Refresh at 90 % of the lifetime, at most 60 s early, so a token is never sent expired.
  const early = Math.min(60, seconds * 0.1)
  return { accessToken: answer.access_token, refreshToken: answer.refresh_token ?? null, refreshAt: now + (seconds - early) * 1000 }
}

function retryAfterSeconds(value: string | null): number | null {
  if (!value) return null
  const seconds = Number(value)
  if (Number.isFinite(seconds)) return Math.max(0, seconds)
  const date = Date.parse(value)
  return Number.isNaN(date) ? null : Math.max(0, (date - Date.now()) / 1000)
}

/** One path segment, escaped so an id can never add a segment or a query. */
export function segment(value: string | number): string {
  const text = String(value)
  if (text === '' || text === '.' || text === '..') throw new TypeError("A path parameter must not be empty, '.' or '..'")
  return encodeURIComponent(text)
}

type OperationId = keyof Operations
type Input<K extends OperationId> = { params?: Operations[K]['params']; query?: Partial<Record<keyof Operations[K]['query'], string | number | boolean | null | undefined>>; body?: Operations[K]['body'] }

/** The configuration and the request loop the resources share. */
export class Core {
  readonly baseUrl: string
  readonly timeoutMs: number
  readonly maxRetries: number
  readonly maxRetryAfter: number
  readonly #apiKey: string | null
  readonly #fetch: typeof fetch
  readonly #headers: Record<string, string>
  #session: Session | null = null
  #refreshing: Promise<void> | null = null
  #organizationId: string | null = null
  /** Replaceable in tests; waits between attempts. */
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
  now: () => number = () => Date.now()

  constructor(options: ClientOptions = {}) {
    this.#apiKey = options.apiKey ?? env('STEWARD_API_KEY') ?? null
    const url = new URL(options.baseUrl ?? env('STEWARD_BASE_URL') ?? DEFAULT_BASE_URL)
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError('baseUrl must be an http:// or https:// URL')
    // A credential or a query in the base URL would end up in every request line and log.
    if (url.username || url.password || url.search) throw new TypeError('baseUrl must not hold a user, a password or a query: pass the key as apiKey')
    this.baseUrl = url.href.replace(/\/+$/, '')
    this.timeoutMs = options.timeoutMs ?? 60_000
    this.maxRetries = options.maxRetries ?? 2
    this.maxRetryAfter = options.maxRetryAfter ?? 60
    this.#fetch = options.fetch ?? ((...args) => fetch(...args))
    this.#headers = { ...options.defaultHeaders }
  }

  /** The key's display prefix (as GET /keys lists it), never the secret. */
  get apiKeyPrefix(): string | null {
    return this.#apiKey ? this.#apiKey.slice(0, 14) : null
  }

  toJSON(): Record<string, unknown> {
    return { baseUrl: this.baseUrl, auth: this.#session ? 'session' : this.#apiKey ? 'apiKey=***' : 'none' }
  }

  async #bearer(): Promise<string> {
    const session = this.#session
    if (session) {
      if (this.now() >= session.refreshAt) await this.#refresh(session.accessToken)
      return this.#session!.accessToken
    }
    if (!this.#apiKey) throw new StewardError('No credential: set STEWARD_API_KEY, pass apiKey, or call signIn()')
    return this.#apiKey
  }

  /**
   * Signs a person in (POST /auth/login); from then on requests use the session's access token,
   * refreshed (POST /auth/refresh) before it expires, transparently. Approving needs a session.
   * Returns the answer without its tokens.
   */
  async signIn(email: string, password: string, organizationId?: string): Promise<Omit<TokenResponse, 'access_token' | 'refresh_token'>> {
    const body: Record<string, string> = { email, password }
    if (organizationId !== undefined) body.organization_id = organizationId
    const answer = (await this.request<TokenResponse>('POST', '/auth/login', { body, auth: false })).body
    this.#session = sessionOf(answer, this.now())
    this.#organizationId = answer.organization_id
    const { access_token: _a, refresh_token: _r, ...rest } = answer
    return rest
  }

  /** Forgets the session (the client goes back to its API key, if any). */
  signOut(): void {
    this.#session = null
    this.#organizationId = null
  }

  /** One refresh at a time: concurrent requests wait for the same one. */
  #refresh(staleToken: string): Promise<void> {
    this.#refreshing ??= (async () => {
      try {
        const session = this.#session
        if (!session || session.accessToken !== staleToken) return
        if (!session.refreshToken) throw new AuthenticationError(401, 'The session expired and has no refresh token: sign in again')
        const answer = (await this.request<TokenResponse>('POST', '/auth/refresh', { body: { refresh_token: session.refreshToken }, auth: false, safeToRetry: true })).body
        this.#session = sessionOf(answer, this.now())
      } finally {
        this.#refreshing = null
      }
    })()
    return this.#refreshing
  }

  #backoff(attempt: number, retryAfter: number | null): number | null {
    if (retryAfter !== null) return retryAfter <= this.maxRetryAfter ? retryAfter * 1000 : null
    const delay = Math.min(INITIAL_RETRY_DELAY_MS * 2 ** attempt, MAX_RETRY_DELAY_MS)
    return delay * (1 - 0.25 * Math.random())
  }

  /** Sends one request (with its retries); answers the decoded response or throws. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<RawResponse<T>> {
    const url = new URL(this.baseUrl + path)
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value === undefined || value === null) continue
      url.searchParams.set(name, typeof value === 'boolean' ? (value ? 'true' : 'false') : String(value))
    }
    const data = options.body === undefined ? undefined : JSON.stringify(options.body)
    let retries = options.maxRetries ?? this.maxRetries
    if (method !== 'GET' && !options.safeToRetry) retries = 0
    const auth = options.auth ?? true
    let attempt = 0
    let refreshed = false
    for (;;) {
      const headers: Record<string, string> = { Accept: 'application/json', ...this.#headers }
      if (data !== undefined) headers['Content-Type'] = 'application/json'
      if (auth) headers.Authorization = `Bearer ${await this.#bearer()}`
      if (attempt > 0) headers['X-Steward-Retry-Count'] = String(attempt)
      let response: Response
      try {
        response = await this.#send(url, method, headers, data, options)
      } catch (error) {
        if (!(error instanceof APIConnectionError) || attempt >= retries) throw error
        await this.sleep(this.#backoff(attempt, null) ?? 0)
        attempt++
        continue
      }
      const body = await decode(response)
      if (response.status < 400) return { status: response.status, headers: response.headers, body: body as T }
      const session = this.#session
      if (response.status === 401 && auth && session?.refreshToken && !refreshed) {
        // The token died early (revoked, or clock skew): refresh once and try again.
        refreshed = true
        await this.#refresh(session.accessToken)
        continue
      }
      const retryAfter = retryAfterSeconds(response.headers.get('retry-after'))
      const error = statusError(response.status, body, response.headers.get('x-request-id'), retryAfter)
      if (attempt < retries && (RETRYABLE.has(response.status) || response.status >= 500)) {
        const delay = this.#backoff(attempt, retryAfter)
        if (delay !== null) {
          await this.sleep(delay)
          attempt++
          continue
        }
      }
      throw error
    }
  }

  async #send(url: URL, method: string, headers: Record<string, string>, body: string | undefined, options: RequestOptions): Promise<Response> {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs)
    const signal = options.signal ? anySignal([options.signal, timeout]) : timeout
    try {
      // Never follow a redirect: it would carry the Authorization header to wherever it points.
      return await this.#fetch(url, { method, headers, body, signal, redirect: 'manual' })
    } catch (error) {
      if (options.signal?.aborted) throw error
      if (timeout.aborted) throw new APITimeoutError()
      // Never chained: a cause could carry the request (and its headers) into a log.
      throw new APIConnectionError(`Could not reach the Steward server: ${error instanceof Error ? error.message.slice(0, 200) : 'fetch failed'}`)
    }
  }

  /** Calls an operation of the generated table by its operationId. */
  async call<K extends OperationId>(id: K, input: Input<K> = {}, options: Omit<RequestOptions, 'query' | 'body'> = {}): Promise<Operations[K]['response']> {
    const operation = OPERATIONS[id] as { method: string; path: string }
    const params = (input.params ?? {}) as Record<string, string | number>
    const path = operation.path.replace(/\{([^}]+)\}/g, (_, name: string) => {
      const value = params[name]
      if (value === undefined) throw new TypeError(`${String(id)} needs ${name}`)
      return segment(value)
    })
    const answer = await this.request<Operations[K]['response']>(operation.method, path, { ...options, query: input.query as RequestOptions['query'], body: input.body })
    return answer.body
  }

  /** A lazy paginator over a list operation whose items are the answer's `key`. */
  paginate<T>(fetchPage: (cursor: string | null) => Promise<Record<string, unknown>>, key: string): Paginator<T> {
    return new Paginator<T>(async (cursor) => {
      const raw = await fetchPage(cursor)
      return { items: (raw[key] as T[] | undefined) ?? [], nextCursor: (raw.next_cursor as string | null | undefined) ?? null, raw }
    })
  }

  /** The credential's organization (some routes name it in the query), read once. */
  async organizationId(): Promise<string> {
    this.#organizationId ??= (await this.call('getOrganization')).organization_id
    return this.#organizationId
  }
}

function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as unknown as { any?: (s: AbortSignal[]) => AbortSignal }).any
  if (any) return any(signals)
  const controller = new AbortController()
  for (const signal of signals) signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true })
  return controller.signal
}

async function decode(response: Response): Promise<unknown> {
  const text = await response.text()
  if (text === '') return null
  try {
    return JSON.parse(text)
  } catch {
    return response.status >= 400 ? { error: text.slice(0, 500) } : text
  }
}

export { APIStatusError }
