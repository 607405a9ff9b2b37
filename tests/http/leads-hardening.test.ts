// Input, fault and header rules (docs/security.md) and the error shapes (docs/api.md) for the lead surface:
// hostile bodies, wrong methods, a database that is down or broken. Never a throw, never a 500
// for anything a client can send.
import { createServer, connect, type Server, type Socket } from 'node:net'
import fc from 'fast-check'
import { Kysely, PostgresDialect, sql } from 'kysely'
import t from 'tap'
import { createHandler } from '../../server.ts'
import { createPostgresPool } from '../../database/connect.ts'
import type { Database } from '../../database/schema.ts'
import { createTestApp, FakeClock, memoryLogger, TEST_DATABASE_URL, testConfig } from '../support/helpers.ts'
import { nextEmail } from '../support/helpers.ts'

const app = await createTestApp(t, { env: { LOG_LEVEL: 'info' } })

const uniqueEmail = (prefix = 'hard'): string => nextEmail(prefix)

function demo(email: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { first_name: 'Ada', last_name: 'Lovelace', email, company: 'Analytical Engines', linkedin: 'https://www.linkedin.com/in/ada', ...extra }
}

/** Posts a raw body as application/json (unless headers say otherwise). */
async function raw(path: string, body: BodyInit | null, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: Headers }> {
  const response = await app.request(path, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } })
  return { status: response.status, text: await response.text(), headers: response.headers }
}

const error = (message: string) => JSON.stringify({ error: message })

t.test('malformed bodies', async (t) => {
  t.test('malformed JSON answers 400 "Request body is not valid JSON"', async (t) => {
    for (const body of ['{', '{"email":', "{'email':'a@example.com'}", '{"email":"a@example.com",}', 'nul', '{"a":1}{"b":2}']) {
      const response = await raw('/newsletter', body)
      t.equal(response.status, 400, body)
      t.equal(response.text, error('Request body is not valid JSON'), body)
      t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
    }
  })

  t.test('a JSON value that is not an object answers 400 "Request body must be a JSON object"', async (t) => {
    for (const body of ['[]', '[{"email":"a@example.com"}]', '"a@example.com"', '42', 'null', 'true']) {
      for (const path of ['/newsletter', '/demo-request']) {
        const response = await raw(path, body)
        t.equal(response.status, 400, `${path} ${body}`)
        t.equal(response.text, error('Request body must be a JSON object'), `${path} ${body}`)
      }
    }
  })

  t.test('an empty or blank body answers 400 "Request body is empty; send a JSON object"', async (t) => {
    for (const body of [null, '', '   \n']) {
      const response = await raw('/newsletter', body)
      t.equal(response.status, 400, JSON.stringify(body))
      t.equal(response.text, error('Request body is empty; send a JSON object'))
    }
  })

  t.test('8 000 levels of nesting within 16 KiB answer 400 without a stack overflow', async (t) => {
    const deep = '['.repeat(8000) + ']'.repeat(8000)
    t.ok(deep.length <= 16 * 1024)
    const inArray = await raw('/newsletter', deep)
    t.equal(inArray.status, 400)
    t.equal(inArray.text, error('Request body must be a JSON object'))
    const inObject = `{"email":"${uniqueEmail()}","x":${'['.repeat(7990)}${']'.repeat(7990)}}`
    const response = await raw('/newsletter', inObject)
    t.equal(response.status, 400)
    t.equal(response.text, error('Request body is nested more than 32 levels deep'))
    const objects = `{"email":"${uniqueEmail()}","x":${'{"a":'.repeat(2500)}1${'}'.repeat(2500)}}`
    t.equal((await raw('/newsletter', objects)).text, error('Request body is nested more than 32 levels deep'))
  })

  t.test('nesting up to 32 levels in an unknown field is accepted', async (t) => {
    const body = `{"email":"${uniqueEmail()}","x":${'['.repeat(31)}${']'.repeat(31)}}`
    t.equal((await raw('/newsletter', body)).status, 200)
  })

  t.test('a NUL character in a value or in a key answers 400 and stores nothing', async (t) => {
    const email = uniqueEmail('nul')
    for (const body of [
      `{"email":"${email}","source":"a\\u0000b"}`,
      `{"email":"nul\\u0000${email}"}`,
      `{"email":"${email}","so\\u0000urce":"x"}`,
      `{"email":"${email}","deep":[{"k":"\\u0000"}]}`,
    ]) {
      const response = await raw('/newsletter', body)
      t.equal(response.status, 400, body)
      t.equal(response.text, error('Request body contains a NUL character'), body)
    }
    const demoResponse = await raw('/demo-request', JSON.stringify(demo(email, { company: 'Acme\u0000' })))
    t.equal(demoResponse.text, error('Request body contains a NUL character'))
    t.equal((await app.db.selectFrom('newsletter_subscriptions').select('id').where('email_normalized', '=', email).execute()).length, 0)
  })

  t.test('a lone surrogate answers 400 and is never stored as U+FFFD', async (t) => {
    const email = uniqueEmail('surrogate')
    for (const body of [
      `{"email":"${email}","source":"\\ud800"}`,
      `{"email":"${email}","source":"x\\udc00y"}`,
      `{"email":"${email}","\\udbff":"x"}`,
    ]) {
      const response = await raw('/newsletter', body)
      t.equal(response.status, 400, body)
      t.equal(response.text, error('Request body contains an unpaired UTF-16 surrogate'), body)
    }
    // A proper pair (an emoji) is fine.
    const ok = await raw('/newsletter', `{"email":"${email}","source":"\\ud83d\\ude00"}`)
    t.equal(ok.status, 200)
    const [row] = await app.db.selectFrom('newsletter_subscriptions').select('source').where('email_normalized', '=', email).execute()
    t.equal(row?.source, '😀')
  })

  t.test('invalid UTF-8 answers 400 "Request body is not valid UTF-8"', async (t) => {
    for (const bytes of [[0x7b, 0xff, 0x7d], [0x7b, 0x22, 0xc3, 0x22, 0x7d], [0xed, 0xa0, 0x80]]) {
      const response = await raw('/newsletter', new Uint8Array(bytes))
      t.equal(response.status, 400)
      t.equal(response.text, error('Request body is not valid UTF-8'))
    }
  })

  t.test('a __proto__ key answers 400, at the top level or nested', async (t) => {
    for (const body of [
      `{"email":"${uniqueEmail()}","__proto__":{"admin":true}}`,
      `{"__proto__":{"email":"x@example.com"}}`,
      `{"email":"${uniqueEmail()}","x":{"__proto__":null}}`,
    ]) {
      const response = await raw('/newsletter', body)
      t.equal(response.status, 400, body)
      t.equal(response.text, error('Request body contains the forbidden key "__proto__"'))
    }
    const demoResponse = await raw('/demo-request', `{"__proto__":{"first_name":"x"},"email":"${uniqueEmail()}"}`)
    t.equal(demoResponse.text, error('Request body contains the forbidden key "__proto__"'))
  })

  t.test('constructor and prototype keys are ordinary unknown fields', async (t) => {
    const response = await raw('/newsletter', `{"email":"${uniqueEmail()}","constructor":{"prototype":{"x":1}}}`)
    t.equal(response.status, 200)
  })
})

t.test('field types and lengths', async (t) => {
  t.test('a string field holding a number, an object, an array or a boolean answers 400 naming it', async (t) => {
    for (const value of [42, { a: 'b' }, ['Ada'], true]) {
      for (const field of ['first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id']) {
        const response = await raw('/demo-request', JSON.stringify(demo(uniqueEmail(), { [field]: value })))
        t.equal(response.status, 400, `${field} = ${JSON.stringify(value)}`)
        t.equal(response.text, error(`Field ${field} must be a string`), `${field} = ${JSON.stringify(value)}`)
      }
      for (const field of ['source', 'analytics_distinct_id']) {
        const response = await raw('/newsletter', JSON.stringify({ email: uniqueEmail(), [field]: value }))
        t.equal(response.text, error(`Field ${field} must be a string`))
      }
    }
  })

  const limits = { first_name: 200, last_name: 200, company: 200, linkedin: 2048, phone: 64, source: 200, analytics_distinct_id: 200 }

  t.test('every field accepts its longest value and answers 400 one character over', async (t) => {
    for (const [field, limit] of Object.entries(limits)) {
      const atLimit = await raw('/demo-request', JSON.stringify(demo(uniqueEmail(), { [field]: 'x'.repeat(limit) })))
      t.equal(atLimit.status, 200, `${field} of ${limit}`)
      // Surrounding spaces are trimmed before the length is counted.
      const padded = await raw('/demo-request', JSON.stringify(demo(uniqueEmail(), { [field]: `  ${'x'.repeat(limit)}  ` })))
      t.equal(padded.status, 200, `${field} of ${limit} with spaces around`)
      const over = await raw('/demo-request', JSON.stringify(demo(uniqueEmail(), { [field]: 'x'.repeat(limit + 1) })))
      t.equal(over.status, 400, `${field} of ${limit + 1}`)
      t.equal(over.text, error(`Field ${field} is longer than ${limit} characters`))
    }
    const news = await raw('/newsletter', JSON.stringify({ email: uniqueEmail(), source: 's'.repeat(201) }))
    t.equal(news.text, error('Field source is longer than 200 characters'))
  })

  t.test('a very long email answers 400 "Invalid email"', async (t) => {
    const response = await raw('/newsletter', JSON.stringify({ email: `${'a'.repeat(5000)}@example.com` }))
    t.equal(response.status, 400)
    t.equal(response.text, error('Invalid email'))
  })

  t.test('a long value is refused, never truncated into the database', async (t) => {
    const email = uniqueEmail('long')
    await raw('/demo-request', JSON.stringify(demo(email, { company: 'c'.repeat(201) })))
    t.equal((await app.db.selectFrom('demo_requests').select('id').where('email_normalized', '=', email).execute()).length, 0)
  })
})

t.test('body size', async (t) => {
  t.test('a body over 16 KiB with Content-Length answers 413 before it is read', async (t) => {
    const body = JSON.stringify({ email: uniqueEmail(), pad: 'x'.repeat(16 * 1024) })
    const response = await raw('/newsletter', body, { 'content-length': String(Buffer.byteLength(body)) })
    t.equal(response.status, 413)
    t.equal(response.text, error('Request body is larger than 16384 bytes'))
    t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
  })

  t.test('a body of exactly 16 KiB is accepted', async (t) => {
    const email = uniqueEmail()
    const base = JSON.stringify({ email, pad: '' })
    const body = JSON.stringify({ email, pad: 'x'.repeat(16 * 1024 - base.length) })
    t.equal(Buffer.byteLength(body), 16 * 1024)
    t.equal((await raw('/newsletter', body)).status, 200)
  })

  t.test('a body over 16 KiB that lies about its Content-Length still answers 413', async (t) => {
    const body = JSON.stringify({ email: uniqueEmail(), pad: 'x'.repeat(20 * 1024) })
    const response = await raw('/newsletter', body, { 'content-length': '10' })
    t.equal(response.status, 413)
  })

  t.test('a chunked body without Content-Length is cut off as soon as it passes 16 KiB', async (t) => {
    let pulled = 0
    let cancelled = false
    const chunk = new TextEncoder().encode(' '.repeat(1024))
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"email":"endless@example.com","pad":"'))
      },
      pull(controller) {
        pulled++
        // An endless body: only the limit stops it.
        controller.enqueue(chunk)
      },
      cancel() {
        cancelled = true
      },
    })
    const request = new Request('http://localhost/newsletter', {
      method: 'POST',
      body: stream,
      headers: { 'content-type': 'application/json' },
      duplex: 'half',
    } as RequestInit)
    t.equal(request.headers.get('content-length'), null)
    const response = await app.app.fetch(request, { remoteAddress: '127.0.0.1' })
    t.equal(response.status, 413)
    t.equal(await response.text(), error('Request body is larger than 16384 bytes'))
    t.ok(pulled <= 20, `stopped after ${pulled} KiB`)
    t.ok(cancelled, 'the stream was cancelled')
  })

  t.test('a body of 16 KiB on the demo form with a multi-byte text is measured in bytes', async (t) => {
    // 6 000 × "é" is 12 000 bytes; 9 000 is 18 000 bytes: over the limit though under 16 384 characters.
    const body = JSON.stringify(demo(uniqueEmail(), { notes: 'é'.repeat(9000) }))
    t.ok(body.length < 16 * 1024)
    const response = await raw('/demo-request', new TextEncoder().encode(body))
    t.equal(response.status, 413)
  })
})

t.test('methods, paths and headers', async (t) => {
  t.test('a wrong method answers 405 with Allow: POST, OPTIONS and a JSON error', async (t) => {
    for (const path of ['/newsletter', '/demo-request', '/waitlist']) {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
        const response = await app.request(path, { method })
        t.equal(response.status, 405, `${method} ${path}`)
        t.equal(response.headers.get('allow'), 'POST, OPTIONS')
        t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
        t.equal(await response.text(), error(`Method ${method} is not allowed on ${path}; use POST`))
      }
    }
  })

  t.test('HEAD on a lead path answers 405 with Allow and no body', async (t) => {
    const response = await app.request('/newsletter', { method: 'HEAD' })
    t.equal(response.status, 405)
    t.equal(response.headers.get('allow'), 'POST, OPTIONS')
    t.equal(await response.text(), '')
  })

  t.test('TRACE answers 405', async (t) => {
    // undici refuses to build a TRACE request; the Node adapter passes one through the same way.
    const request = new Request('http://localhost/newsletter', { method: 'GET' })
    Object.defineProperty(request, 'method', { get: () => 'TRACE' })
    const response = await app.app.fetch(request, { remoteAddress: '127.0.0.1' })
    t.equal(response.status, 405)
    t.equal(response.headers.get('allow'), 'POST, OPTIONS')
    const unknown = new Request('http://localhost/', { method: 'GET' })
    Object.defineProperty(unknown, 'method', { get: () => 'TRACE' })
    const other = await app.app.fetch(unknown, { remoteAddress: '127.0.0.1' })
    t.not(other.status, 200)
    t.not(other.status, 500)
  })

  t.test('an unknown path answers 404 with a JSON error', async (t) => {
    for (const [method, path] of [['GET', '/nope'], ['POST', '/newsletters'], ['POST', '/demo-request/extra'], ['GET', '/']]) {
      const response = await app.request(path!, { method, ...(method === 'POST' ? { json: { email: 'a@example.com' } } : {}) })
      t.equal(response.status, 404, `${method} ${path}`)
      t.equal(response.headers.get('content-type'), 'application/json; charset=utf-8')
      t.equal(await response.text(), error(`No resource at ${path}`))
    }
  })

  t.test('every response has nosniff, a request id and no X-Powered-By', async (t) => {
    const responses = [
      await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() } }),
      await app.request('/newsletter', { method: 'POST', json: { email: 'bad' } }),
      await app.request('/newsletter', { method: 'GET' }),
      await app.request('/nope'),
      await app.request('/newsletter', { method: 'POST', body: 'x', headers: { 'content-type': 'text/csv' } }),
    ]
    for (const response of responses) {
      t.equal(response.headers.get('x-content-type-options'), 'nosniff', String(response.status))
      t.equal(response.headers.get('x-powered-by'), null)
      t.match(response.headers.get('x-request-id'), /^[0-9a-f-]{36}$/)
    }
  })

  t.test('a client-sent X-Request-Id is echoed, stripped to safe characters', async (t) => {
    const response = await app.request('/nope', { headers: { 'x-request-id': 'abc-123_x.y<script>' } })
    t.equal(response.headers.get('x-request-id'), 'abc-123_x.yscript')
  })
})

t.test('the handler never throws and never answers 500 for random bodies', async (t) => {
  const allowed = new Set([200, 400, 409, 413, 415])
  const bodies = fc.oneof(
    fc.jsonValue().map((value) => JSON.stringify(value)),
    fc.dictionary(fc.constantFrom('email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', '__proto__', 'x'), fc.jsonValue()).map((value) => JSON.stringify(value)),
    fc.record({ email: fc.emailAddress(), source: fc.option(fc.string({ unit: 'binary' })) }).map((value) => JSON.stringify(value)),
    fc.string({ unit: 'binary', maxLength: 300 }),
  )
  const types = fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', '')
  await fc.assert(
    fc.asyncProperty(fc.constantFrom('/newsletter', '/demo-request', '/waitlist'), bodies, types, async (path, body, type) => {
      const response = await app.request(path, { method: 'POST', body, headers: type ? { 'content-type': type } : {} })
      const text = await response.text()
      if (!allowed.has(response.status)) throw new Error(`${path} answered ${response.status}: ${text}`)
      const parsed = JSON.parse(text) as Record<string, unknown>
      if (typeof parsed.message !== 'string' && typeof parsed.error !== 'string') throw new Error(`unexpected body ${text}`)
    }),
    { numRuns: 300 },
  )
  t.pass('300 random bodies answered within {200, 400, 409, 413, 415}')
})

t.test('logs', async (t) => {
  t.test('no log line contains a submitted email or a body value', async (t) => {
    const email = `Secret.Person-${process.pid}@example.com`
    await app.request('/newsletter', { method: 'POST', json: { email, source: 'secret-source' } })
    await app.request('/newsletter', { method: 'POST', json: { email, source: 'secret-source' } })
    await app.request('/demo-request', { method: 'POST', json: demo(email, { phone: '+1 555 0100', company: 'SecretCo' }) })
    await app.request('/demo-request', { method: 'POST', json: { email, company: 'SecretCo' } })
    t.ok(app.logs.length >= 4, 'request lines were logged')
    const all = JSON.stringify(app.logs).toLowerCase()
    for (const secret of [email.toLowerCase(), 'secret.person', 'secret-source', 'secretco', '555 0100']) {
      t.notOk(all.includes(secret.toLowerCase()), `logs do not contain ${secret}`)
    }
  })

  t.test('a request line carries the path without its query string', async (t) => {
    await app.request('/nope?access_token=secret-token', {})
    const line = app.logs.findLast((l) => l.message === 'request')
    t.equal(line?.fields.path, '/nope')
    t.notOk(JSON.stringify(app.logs).includes('secret-token'))
  })
})

t.test('database faults', async (t) => {
  t.test('a database that cannot be reached answers 503 with Retry-After and no internals', async (t) => {
    const logger = memoryLogger()
    const pool = await createPostgresPool('postgres://postgres@127.0.0.1:1/test', logger, 2)
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
    t.teardown(() => db.destroy())
    const handler = createHandler(testConfig(), { db, clock: new FakeClock().read, logger })
    t.teardown(() => handler.close())
    for (const [path, body] of [['/newsletter', { email: uniqueEmail() }], ['/demo-request', demo(uniqueEmail())], ['/waitlist', { email: uniqueEmail() }]] as const) {
      const response = await handler.fetch(
        new Request(`http://localhost${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
        { remoteAddress: '127.0.0.1' },
      )
      t.equal(response.status, 503, path)
      t.equal(response.headers.get('retry-after'), '5')
      t.equal(response.headers.get('access-control-allow-origin'), '*')
      const text = await response.text()
      t.equal(text, error('Service temporarily unavailable; try again shortly'))
      t.notMatch(text, /ECONNREFUSED|127\.0\.0\.1|postgres/)
    }
    const warning = logger.lines.find((line) => line.message === 'database unavailable')
    t.equal(warning?.level, 'warn')
    t.equal(warning?.fields.code, 'ECONNREFUSED')
    t.type(warning?.fields.requestId, 'string')
  })

  t.test('an unknown database error answers 500 "Internal server error", logged with the request id, no SQL in the body', async (t) => {
    await sql`alter table newsletter_subscriptions rename to newsletter_subscriptions_away`.execute(app.db)
    let response: Response
    try {
      response = await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() }, headers: { 'x-request-id': 'req-dropped-table' } })
    } finally {
      await sql`alter table newsletter_subscriptions_away rename to newsletter_subscriptions`.execute(app.db)
    }
    t.equal(response.status, 500)
    const text = await response.text()
    t.equal(text, error('Internal server error'))
    t.equal(response.headers.get('x-request-id'), 'req-dropped-table')
    const logged = app.logs.find((line) => line.message === 'unhandled error' && line.fields.requestId === 'req-dropped-table')
    t.equal(logged?.level, 'error')
    t.equal(logged?.fields.code, '42P01')
    // And the service is back once the table is.
    t.equal((await app.request('/newsletter', { method: 'POST', json: { email: uniqueEmail() } })).status, 200)
  })

  t.test('the service recovers without a restart when PostgreSQL comes back', { skip: TEST_DATABASE_URL ? false : 'needs TEST_DATABASE_URL' }, async (t) => {
    const target = new URL(TEST_DATABASE_URL!)
    const proxy = new TcpProxy(target.hostname, Number(target.port || 5432))
    const port = await proxy.start(0)
    t.teardown(() => proxy.stop())
    // The same schema as this file's test database, reached through the proxy.
    const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(app.db)).rows[0]!.s
    const url = new URL(TEST_DATABASE_URL!)
    url.host = `127.0.0.1:${port}`
    url.searchParams.set('options', `-c search_path=${schema}`)
    const logger = memoryLogger()
    const pool = await createPostgresPool(url.toString(), logger, 4)
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
    t.teardown(() => db.destroy())
    const handler = createHandler(testConfig(), { db, clock: new FakeClock().read, logger })
    t.teardown(() => handler.close())
    const send = (email: string) =>
      handler.fetch(new Request('http://localhost/newsletter', { method: 'POST', body: JSON.stringify({ email }), headers: { 'content-type': 'application/json' } }), {
        remoteAddress: '127.0.0.1',
      })

    t.equal((await send(uniqueEmail('proxy'))).status, 200, 'up')
    await proxy.stop()
    const down = await send(uniqueEmail('proxy'))
    t.equal(down.status, 503, 'down')
    t.equal(down.headers.get('retry-after'), '5')
    const downAgain = await send(uniqueEmail('proxy'))
    t.equal(downAgain.status, 503, 'still down')
    await proxy.start(port)
    const back = await send(uniqueEmail('proxy'))
    t.equal(back.status, 200, 'back without a restart')

    // Lost in the middle of a statement: the query never gets its answer, then the link drops.
    proxy.frozen = true
    const pending = send(uniqueEmail('proxy'))
    await new Promise((resolve) => setTimeout(resolve, 100))
    await proxy.stop()
    const midQuery = await pending
    t.equal(midQuery.status, 503, 'a connection lost mid-query answers 503')
    proxy.frozen = false
    await proxy.start(port)
    t.equal((await send(uniqueEmail('proxy'))).status, 200, 'and recovers again')
  })
})

/** A TCP proxy that can be stopped (cutting live connections) and started again on the same port. */
class TcpProxy {
  #server: Server | null = null
  readonly #sockets = new Set<Socket>()
  frozen = false
  constructor(
    readonly host: string,
    readonly port: number,
  ) {}

  start(port: number): Promise<number> {
    const server = createServer((client) => {
      const upstream = connect(this.port, this.host)
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket)
        socket.on('close', () => this.#sockets.delete(socket))
        socket.on('error', () => {
          client.destroy()
          upstream.destroy()
        })
      }
      // While frozen, what the client sends never reaches the server (a statement left hanging).
      client.on('data', (chunk) => {
        if (!this.frozen) upstream.write(chunk)
      })
      upstream.pipe(client)
    })
    this.#server = server
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port))
    })
  }

  async stop(): Promise<void> {
    const server = this.#server
    this.#server = null
    for (const socket of this.#sockets) socket.destroy()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}
