// The structure of docs/architecture.md, checked: every import of every source file (tests/ and
// bench/ aside) runs in an allowed direction, and no file reaches itself through its imports.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const SKIPPED = new Set(['node_modules', 'tests', 'bench', '.git', '.runtimes', 'data'])

/** A module's layer: its top folder, or the top-level file's name without .ts. */
function layerOf(file: string): string {
  const slash = file.indexOf('/')
  return slash < 0 ? file.replace(/\.ts$/, '') : file.slice(0, slash)
}

/**
 * Which layers each layer may import (its own always). Anything absent may import nothing else.
 * The floors, top to bottom: server (composition root) → routes (HTTP) and jobs (timers) →
 * services (use cases, caches, hubs) → storage (repositories) → database (connection, dialects,
 * migrations, schema). engine, domain, auth, http, config and log are rooms beside them.
 */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  domain: [],
  engine: [],
  log: [],
  auth: ['domain'],
  config: ['domain'],
  http: ['domain', 'log'],
  database: ['domain', 'log'],
  storage: ['database', 'engine', 'domain', 'log', 'auth'],
  // Services answer with HttpError where a refusal is the answer (see SERVICE_HTTP below).
  services: ['storage', 'database', 'engine', 'domain', 'log', 'config', 'auth', 'http'],
  jobs: ['services', 'storage', 'database', 'engine', 'domain', 'log', 'config'],
  wellknown: ['http', 'domain', 'config'],
  routes: ['services', 'storage', 'database', 'engine', 'domain', 'http', 'log', 'config', 'wellknown', 'auth'],
  cli: ['http', 'services', 'jobs', 'storage', 'database', 'auth', 'engine', 'domain', 'log', 'config'],
  fixtures: ['cli', 'storage', 'database', 'auth', 'domain', 'log', 'config'],
  // The composition root builds everything; nothing imports it back.
  server: ['cli', 'config', 'domain', 'engine', 'http', 'log', 'routes', 'services', 'jobs', 'storage', 'database', 'auth', 'wellknown'],
}

/** The only http/ files a service may use: the refusal type and the request context's type. */
const SERVICE_HTTP = new Set(['http/errors.ts', 'http/context.ts'])

export type Graph = ReadonlyMap<string, readonly string[]>

/** Every import that breaks the layer rules: "from → to (why)". */
export function wrongWay(graph: Graph): string[] {
  const out: string[] = []
  for (const [from, targets] of graph) {
    const layer = layerOf(from)
    for (const to of targets) {
      const target = layerOf(to)
      if (to === 'server.ts') out.push(`${from} → ${to} (nothing imports the composition root)`)
      else if (target !== layer && !(ALLOWED[layer] ?? []).includes(target)) out.push(`${from} → ${to} (${layer} may not import ${target})`)
      else if (layer === 'services' && target === 'http' && !SERVICE_HTTP.has(to)) out.push(`${from} → ${to} (services may use only ${[...SERVICE_HTTP].join(' and ')} of http)`)
    }
  }
  return out
}

/** Every import cycle, each as the files around it (first file repeated at the end). */
export function cycles(graph: Graph): string[][] {
  const found: string[][] = []
  const state = new Map<string, 'open' | 'done'>()
  const path: string[] = []
  const visit = (file: string): void => {
    state.set(file, 'open')
    path.push(file)
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push([...path.slice(path.indexOf(next)), next])
      else if (!state.has(next)) visit(next)
    }
    path.pop()
    state.set(file, 'done')
  }
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file)
  return found
}

function sourceFiles(dir = ''): string[] {
  const out: string[] = []
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = dir ? `${dir}/${entry.name}` : entry.name
    if (entry.isDirectory()) {
      if (!SKIPPED.has(entry.name) && !entry.name.startsWith('.')) out.push(...sourceFiles(path))
    } else if (entry.name.endsWith('.ts')) out.push(path)
  }
  return out
}

// Static imports and re-exports (type-only ones too: they are dependencies of meaning), and
// dynamic import() of a literal path.
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g

/** The repository's import graph: file → the repository files it imports (relative paths only). */
export function importGraph(files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), 'utf8')
    const targets = new Set<string>()
    for (const match of text.matchAll(IMPORT)) {
      const spec = match[1] ?? match[2]!
      if (!spec.startsWith('.')) continue
      targets.add(relative(ROOT, normalize(join(ROOT, dirname(file), spec))))
    }
    graph.set(file, [...targets])
  }
  return graph
}

const graph = importGraph(sourceFiles())

t.test('the graph covers every layer, so the rules below check something', async (t) => {
  const layers = new Set([...graph.keys()].map(layerOf))
  for (const layer of ['domain', 'http', 'routes', 'services', 'jobs', 'storage', 'database', 'auth', 'engine', 'cli', 'wellknown', 'server', 'config', 'log']) t.ok(layers.has(layer), `${layer} has files`)
  t.ok([...graph.values()].flat().length > 100, 'and imports')
  t.same([...graph.values()].flat().filter((to) => !graph.has(to)), [], 'every relative import names a file that exists')
})

t.test('every import runs the allowed way', async (t) => {
  t.same(wrongWay(graph), [])
})

t.test('no import cycle', async (t) => {
  t.same(cycles(graph), [])
})

t.test('no source file uses node:async_hooks (on Node 20 one AsyncLocalStorage.run slows every later request)', async (t) => {
  // Its first run() turns on a hook for every promise and async resource of the process, for
  // good: a server that had carried out one operator command that way spent about 15 % more CPU
  // on each request until it restarted (docs/architecture.md). State goes down as arguments.
  const users = [...graph.keys()].filter((file) => /['"](?:node:)?async_hooks['"]/.test(readFileSync(join(ROOT, file), 'utf8')))
  t.same(users, [])
})

t.test('only the composition root imports routes/ and starts jobs/; nothing imports server.ts', async (t) => {
  const into = (prefix: string) => [...graph].flatMap(([from, to]) => to.filter((x) => x.startsWith(prefix)).map((x) => `${from} → ${x}`))
  t.same(into('routes/').filter((line) => !line.startsWith('routes/') && !line.startsWith('server.ts')), [])
  t.same(into('jobs/').filter((line) => !/^(jobs\/|server\.ts|cli\/)/.test(line)), [])
  t.same(into('server.ts'), [])
})

t.test('the checks catch a bad graph', async (t) => {
  const bad: Graph = new Map([
    ['storage/a.ts', ['routes/b.ts', 'log.ts']],
    ['routes/b.ts', ['storage/a.ts', 'http/c.ts']],
    ['http/c.ts', ['config.ts']],
    ['cli/d.ts', ['server.ts']],
    ['domain/e.ts', ['domain/f.ts']],
    ['domain/f.ts', ['domain/e.ts']],
    ['engine/g.ts', ['domain/e.ts']],
    ['services/h.ts', ['http/pipeline.ts', 'http/errors.ts', 'routes/b.ts']],
    ['storage/i.ts', ['services/h.ts', 'database/j.ts']],
  ])
  t.same(wrongWay(bad).sort(), [
    'cli/d.ts → server.ts (nothing imports the composition root)',
    'engine/g.ts → domain/e.ts (engine may not import domain)',
    'http/c.ts → config.ts (http may not import config)',
    'services/h.ts → http/pipeline.ts (services may use only http/errors.ts and http/context.ts of http)',
    'services/h.ts → routes/b.ts (services may not import routes)',
    'storage/a.ts → routes/b.ts (storage may not import routes)',
    'storage/i.ts → services/h.ts (storage may not import services)',
  ])
  t.same(cycles(bad), [
    ['domain/e.ts', 'domain/f.ts', 'domain/e.ts'],
    ['routes/b.ts', 'storage/a.ts', 'routes/b.ts'],
  ])
  t.same(wrongWay(new Map([['routes/x.ts', ['storage/y.ts', 'engine/z.ts', 'http/w.ts']]])), [], 'allowed imports pass')
})

t.test('the router is split by first path segment: a route that starts with a parameter or wildcard is refused when the handler is built', async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const { json } = await import('../../http/reply.ts')
  const deps = { clock: Date.now, logger: { log() {} } }
  const surface = (path: string) => ({
    name: 'x',
    routes: [{ method: 'GET' as const, path, handler: () => json(200, {}), doc: { operationId: 'x', summary: 'x', tags: [], scopes: null, responses: {} } }],
    errorBody: () => ({}),
  })
  for (const path of ['/:id', '/*', '/:id/things']) {
    const one = surface(path)
    t.throws(() => createFetch([one as never], { config: testConfig(), deps, fallback: one as never }), { message: `route ${path}: the first path segment must be literal` }, path)
  }
  const fine = surface('/things/:id')
  const handler = createFetch([fine as never], { config: testConfig(), deps, fallback: fine as never })
  t.equal((await handler.fetch(new Request('http://127.0.0.1/things/1'))).status, 200)
  t.equal((await handler.fetch(new Request('http://127.0.0.1/other/1'))).status, 404)
})

t.test('a refusal returned by a handler is answered exactly as the same refusal thrown', async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { HttpError } = await import('../../http/errors.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const deps = { clock: Date.now, logger: { log() {} } }
  const refusal = () => new HttpError(429, 'Too many', { headers: { 'Retry-After': '7' } })
  const doc = { operationId: 'x', summary: 'x', tags: [], scopes: null, responses: {} }
  const surface = {
    name: 'x',
    headers: { 'Cache-Control': 'no-store' },
    routes: [
      { method: 'GET' as const, path: '/thrown', handler: async () => { throw refusal() }, doc },
      { method: 'GET' as const, path: '/returned', handler: async () => refusal(), doc },
      { method: 'GET' as const, path: '/returned-sync', handler: () => refusal(), doc },
    ],
    errorBody: (status: number, error: InstanceType<typeof HttpError>) => ({ status, error: error.message }),
  }
  const handler = createFetch([surface as never], { config: testConfig(), deps, fallback: surface as never })
  const answer = async (path: string) => {
    const res = await handler.fetch(new Request(`http://127.0.0.1${path}`, { headers: { 'x-request-id': 'same-id' } }))
    return { status: res.status, headers: [...res.headers].sort(), body: await res.text() }
  }
  const thrown = await answer('/thrown')
  t.same(thrown.status, 429)
  t.same(thrown.body, '{"status":429,"error":"Too many"}')
  t.ok(thrown.headers.some(([name, value]) => name === 'retry-after' && value === '7'), 'the error\'s own header')
  t.ok(thrown.headers.some(([name, value]) => name === 'cache-control' && value === 'no-store'), 'the surface header')
  t.same(await answer('/returned'), thrown)
  t.same(await answer('/returned-sync'), thrown)
})

t.test('a fixed refusal is answered in the format of each surface that gives it, the same every time, and cannot be changed', async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { fixedError, HttpError } = await import('../../http/errors.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const deps = { clock: Date.now, logger: { log() {} } }
  const shared = fixedError(401, 'Nope', { headers: { 'WWW-Example': 'yes' } })
  t.ok(shared instanceof HttpError)
  t.equal(shared.fixed, true)
  t.equal(new HttpError(401, 'Nope').fixed, false, 'an ordinary refusal is not fixed')
  t.ok(Object.isFrozen(shared), 'frozen')
  t.throws(() => {
    ;(shared as { message: string }).message = 'changed'
  }, TypeError)
  const doc = { operationId: 'x', summary: 'x', tags: [], scopes: null, responses: {} }
  const product = {
    name: 'product',
    routes: [{ method: 'GET' as const, path: '/p', handler: () => shared, doc }],
    errorBody: (status: number, error: InstanceType<typeof HttpError>) => ({ status, error: error.message }),
  }
  const leads = {
    name: 'leads',
    routes: [{ method: 'GET' as const, path: '/l', handler: () => { throw shared }, doc }],
    errorBody: (_status: number, error: InstanceType<typeof HttpError>) => ({ error: error.message }),
  }
  const handler = createFetch([product, leads] as never, { config: testConfig(), deps, fallback: leads as never })
  for (let round = 1; round <= 2; round++) {
    for (const [path, body] of [['/p', '{"status":401,"error":"Nope"}'], ['/l', '{"error":"Nope"}']] as const) {
      const res = await handler.fetch(new Request(`http://127.0.0.1${path}`))
      t.equal(res.status, 401, `${path}, round ${round}`)
      t.equal(await res.text(), body, `${path}, round ${round}: the surface's own body`)
      t.equal(res.headers.get('www-example'), 'yes', `${path}, round ${round}: the error's own header`)
      t.equal(res.headers.get('content-type'), 'application/json; charset=utf-8')
    }
  }
})

t.test("a surface's own headers are on every answer it gives: a route's, a refusal, a 405, a 404 on its segment and a refusal before routing", async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { HttpError } = await import('../../http/errors.ts')
  const { json } = await import('../../http/reply.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const deps = { clock: Date.now, logger: { log() {} } }
  const doc = { operationId: 'x', summary: 'x', tags: [], scopes: null, responses: {} }
  const errorBody = (status: number, error: InstanceType<typeof HttpError>) => ({ status, error: error.message })
  const owned = {
    name: 'owned',
    headers: { 'Cache-Control': 'no-store', 'X-Surface': 'owned' },
    routes: [
      { method: 'GET' as const, path: '/p', handler: () => json(200, {}), doc },
      { method: 'GET' as const, path: '/p/refused', handler: () => new HttpError(409, 'No'), doc },
    ],
    errorBody,
  }
  const plain = { name: 'plain', routes: [{ method: 'GET' as const, path: '/q', handler: () => json(200, {}), doc }], errorBody }
  const handler = createFetch([owned, plain] as never, { config: testConfig(), deps, fallback: plain as never })
  for (const [method, path, status] of [['GET', '/p', 200], ['GET', '/p/refused', 409], ['POST', '/p', 405], ['GET', '/p/nothing/here', 404]] as const) {
    const res = await handler.fetch(new Request(`http://127.0.0.1${path}`, { method }))
    t.equal(res.status, status, `${method} ${path}`)
    t.equal(res.headers.get('cache-control'), 'no-store', `${method} ${path}`)
    t.equal(res.headers.get('x-surface'), 'owned', `${method} ${path}`)
  }
  for (const [method, path, status] of [['GET', '/q', 200], ['POST', '/q', 405], ['GET', '/elsewhere', 404]] as const) {
    const res = await handler.fetch(new Request(`http://127.0.0.1${path}`, { method }))
    t.equal(res.status, status, `${method} ${path}`)
    t.equal(res.headers.get('cache-control'), null, `${method} ${path}: none from the other surface`)
  }
  const refusedFirst = createFetch([owned] as never, { config: testConfig(), deps, fallback: owned as never }).refuse(new HttpError(400, 'Malformed HTTP request'))
  t.equal(refusedFirst.headers['cache-control'], 'no-store', 'a refusal before routing, in the fallback surface')
  t.same(Object.keys(refusedFirst.headers).filter((name) => name.toLowerCase() === 'cache-control'), ['cache-control'], 'one header, its name lower-cased')
})

t.test('an HttpError is an Error without a stack trace, its headers frozen', async (t) => {
  const { HttpError } = await import('../../http/errors.ts')
  const limit = Error.stackTraceLimit
  const plain = new HttpError(404, 'No resource at /x')
  t.ok(plain instanceof Error, 'instanceof Error')
  t.ok(plain instanceof HttpError)
  t.equal(String(plain), 'HttpError: No resource at /x')
  t.same([plain.name, plain.message, plain.status, plain.code, plain.fixed], ['HttpError', 'No resource at /x', 404, null, false])
  t.equal(plain.stack, 'HttpError: No resource at /x', 'its first line only: no frames captured')
  t.equal(Error.stackTraceLimit, limit, 'the limit is restored')
  t.match(new Error('x').stack, /\n\s+at /, 'other errors keep theirs')
  t.same(plain.headers, {})
  t.ok(Object.isFrozen(plain.headers), 'no headers: frozen')
  const given = { 'Retry-After': '5' }
  const withHeaders = new HttpError(503, 'Down', { headers: given, code: 'x' })
  given['Retry-After'] = '9'
  t.same(withHeaders.headers, { 'Retry-After': '5' }, 'a copy of the headers given')
  t.ok(Object.isFrozen(withHeaders.headers), 'frozen')
  t.equal(withHeaders.code, 'x')
  const rejected = await Promise.reject(plain).catch((error: unknown) => error)
  t.equal(rejected, plain, 'thrown and caught as any value')
})

t.test("a refusal before routing carries a fresh request id, never the request's own", async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { HttpError } = await import('../../http/errors.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const surface = { name: 'x', routes: [], errorBody: (status: number, error: InstanceType<typeof HttpError>) => ({ status, error: error.message }) }
  const handler = createFetch([surface as never], { config: testConfig(), deps: { clock: Date.now, logger: { log() {} } }, fallback: surface as never })
  const reply = handler.refuse(new HttpError(400, 'Malformed HTTP request'), new Headers({ 'x-request-id': 'client-chosen', origin: 'https://x.example' }))
  t.equal(reply.status, 400)
  t.not(reply.headers['x-request-id'], 'client-chosen')
  t.match(reply.headers['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
  const routed = await handler.fetch(new Request('http://127.0.0.1/nothing', { headers: { 'x-request-id': 'client-chosen' } }))
  t.equal(routed.headers.get('x-request-id'), 'client-chosen', 'a routed request keeps its own')
})

t.test('an answer that needs no waiting is a Response, not a promise of one, and reads as one that waited does', async (t) => {
  const { createFetch } = await import('../../http/pipeline.ts')
  const { HttpError } = await import('../../http/errors.ts')
  const { json } = await import('../../http/reply.ts')
  const { testConfig } = await import('../support/helpers.ts')
  const lines: { message: string; fields: Record<string, unknown> }[] = []
  const deps = { clock: Date.now, logger: { log: (_level: string, message: string, fields: Record<string, unknown> = {}) => void lines.push({ message, fields }) } }
  const surface = {
    name: 'x',
    headers: { 'Cache-Control': 'no-store' },
    routes: [
      { method: 'GET' as const, path: '/things/:id', handler: async () => json(200, { ok: true }), doc: { operationId: 'x', summary: 'x', tags: [], scopes: null, responses: {} } },
      // A handler that needs no waiting: its reply, its returned refusal and its thrown one.
      { method: 'GET' as const, path: '/now/:id', handler: (request: { params: { id: string } }) => (request.params.id === 'refused' ? new HttpError(409, 'refused') : json(200, { id: request.params.id })), doc: { operationId: 'y', summary: 'y', tags: [], scopes: null, responses: {} } },
      { method: 'GET' as const, path: '/throws', handler: () => { throw new HttpError(409, 'refused') }, doc: { operationId: 'z', summary: 'z', tags: [], scopes: null, responses: {} } },
      { method: 'GET' as const, path: '/rejects', handler: async () => { throw new HttpError(409, 'refused') }, doc: { operationId: 'w', summary: 'w', tags: [], scopes: null, responses: {} } },
    ],
    errorBody: (status: number, error: InstanceType<typeof HttpError>) => ({ status, error: error.message }),
  }
  const handler = createFetch([surface as never], { config: testConfig({ LOG_LEVEL: 'info' }), deps, fallback: surface as never })
  const isPromise = (value: unknown) => typeof (value as { then?: unknown }).then === 'function'
  const send = (path: string, init: RequestInit = {}) => handler.fetch(new Request(`http://127.0.0.1${path}`, { ...init, headers: { 'x-request-id': 'same-id', ...init.headers } }))
  const shape = async (res: Response) => ({ status: res.status, headers: [...res.headers].sort(), body: await res.text() })

  const unknown = send('/other/1')
  t.notOk(isPromise(unknown), 'an unknown first segment: a Response')
  t.ok(unknown instanceof Response)
  const head = send('/other/1', { method: 'HEAD' })
  t.notOk(isPromise(head), 'HEAD of it: a Response')
  t.same([(head as Response).status, await (head as Response).text()], [404, ''], 'without a body')
  const preflight = send('/other/1', { method: 'OPTIONS', headers: { origin: 'https://x.example', 'access-control-request-method': 'POST' } })
  t.notOk(isPromise(preflight), 'a preflight for it: a Response')
  t.equal((preflight as Response).status, 204)
  const routed = send('/things/1')
  t.ok(isPromise(routed), 'a route that waits: a promise')
  t.equal((await routed).status, 200)
  const now = send('/now/7')
  t.notOk(isPromise(now), 'a route that needs no waiting: a Response')
  t.same([(now as Response).status, (now as Response).headers.get('cache-control'), await (now as Response).text()], [200, 'no-store', '{"id":"7"}'], "with the surface's headers")
  const notAllowed = send('/now/7', { method: 'DELETE' })
  t.notOk(isPromise(notAllowed), 'a 405: a Response')
  t.same([(notAllowed as Response).status, (notAllowed as Response).headers.get('allow')], [405, 'GET, HEAD, OPTIONS'])
  // A refusal returned, thrown, or rejected: the same answer, at once for the first two.
  const returned = send('/now/refused')
  const thrown = send('/throws')
  t.notOk(isPromise(returned), 'a refusal returned at once: a Response')
  t.notOk(isPromise(thrown), 'a refusal thrown at once: a Response')
  const rejected = send('/rejects')
  t.ok(isPromise(rejected), 'a refusal after waiting: a promise')
  for (const [what, res] of [['returned', returned], ['thrown', thrown], ['rejected', await rejected]] as const) {
    t.same([(res as Response).status, await (res as Response).text()], [409, '{"status":409,"error":"refused"}'], what)
  }

  // The 404 of a segment no route has and of a path its segment's routes do not match: the same
  // answer, both at once.
  const atOnce = await shape(unknown as Response)
  const unmatched = send('/things/1/more')
  t.notOk(isPromise(unmatched), "a path no route of its segment matches: a Response")
  const afterRouter = await shape(await unmatched)
  t.same(atOnce, {
    status: 404,
    headers: [
      ['access-control-allow-origin', '*'],
      ['access-control-expose-headers', 'Retry-After, Deprecation, Sunset, Link, Location, RateLimit, RateLimit-Policy, X-Request-Id'],
      ['cache-control', 'no-store'],
      ['content-security-policy', "default-src 'none'; frame-ancestors 'none'"],
      ['content-type', 'application/json; charset=utf-8'],
      ['x-content-type-options', 'nosniff'],
      ['x-request-id', 'same-id'],
    ],
    body: '{"status":404,"error":"No resource at /other/1"}',
  })
  t.same(afterRouter, { ...atOnce, body: '{"status":404,"error":"No resource at /things/1/more"}' })
  t.same(
    lines.filter((line) => line.message === 'request').map((line) => [line.fields.method, line.fields.path, line.fields.status]),
    [
      ['GET', '/other/1', 404], ['HEAD', '/other/1', 404], ['OPTIONS', '/other/1', 204], ['GET', '/things/1', 200], ['GET', '/now/7', 200], ['DELETE', '/now/7', 405],
      ['GET', '/now/refused', 409], ['GET', '/throws', 409], ['GET', '/rejects', 409], ['GET', '/things/1/more', 404],
    ],
    'every answer, at once or not, is in the access log',
  )
})
