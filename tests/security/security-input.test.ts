// Security: input that looks valid must never reach the database unchecked. Timestamps are RFC
// 3339 (Z or ±hh:mm) within years 0001–9999, page cursors are validated part by part, and no
// string, number, id or cursor a client can send yields a 500: every answer is a JSON error in
// the surface's own format. Runs on PGlite and on PostgreSQL (TEST_DATABASE_URL).
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { REASON } from '../../http/errors.ts'
import { CURSOR_INVALID, EARLIEST_TIMESTAMP, encodeCursor, LATEST_TIMESTAMP, readTimestamp } from '../../routes/input.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

// The properties create many keys: a cap reached half-way would hide what they probe.
const app = await productApp(t, { env: { MAX_KEYS_PER_ORG: '100000' } })
const { vars } = app
const OWNER = vars.OWNER_KEY_A!

const FORMAT = 'Field expires_at must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z'
const CALENDAR = 'Field expires_at names a date or time that does not exist'
const RANGE = 'Field expires_at must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z'

const productError = (status: number, error: string) => ({ status: REASON[status], error })

async function createKey(expiresAt: unknown): Promise<{ status: number; body: any }> {
  const res = await app.call('POST', '/keys', { token: OWNER, json: { role: 'viewer', expires_at: expiresAt } })
  return { status: res.status, body: await jsonOf(res) }
}

function listPolicies(query: string): Promise<Response> {
  return app.call('GET', `/policies?organization_id=${vars.ORG_A}&${query}`, { token: OWNER })
}

function base64url(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64url')
}

t.test('expires_at on POST /keys', async (t) => {
  t.test('an offset without minutes or without its colon is not RFC 3339: 400, not 500', async (t) => {
    for (const value of ['2030-01-01T00:00:00+05', '2030-01-01T00:00:00-0330', '2030-01-01T00:00:00+0500', '2030-01-01 00:00:00Z', '2030-01-01T00:00:00', '+012030-01-01T00:00:00Z']) {
      const { status, body } = await createKey(value)
      t.equal(status, 400, value)
      t.same(body, productError(400, FORMAT), value)
    }
  })

  t.test('a ±hh:mm offset is honoured and the instant is stored in UTC', async (t) => {
    for (const [value, stored] of [
      ['2030-01-01T00:00:00+05:00', '2029-12-31T19:00:00.000Z'],
      ['2030-01-01T00:00:00-03:30', '2030-01-01T03:30:00.000Z'],
      ['2030-01-01t00:00:00.123456z', '2030-01-01T00:00:00.123Z'],
      ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
    ] as const) {
      const { status, body } = await createKey(value)
      t.equal(status, 201, value)
      t.equal(body.expires_at, stored, value)
      const again = await jsonOf(await app.call('GET', `/keys/${body.key_id}`, { token: OWNER }))
      t.equal(again.expires_at, stored, `${value} reads back the same`)
    }
  })

  t.test('a day or time that does not exist is refused, never rolled over', async (t) => {
    for (const value of ['2030-02-30T00:00:00Z', '2031-02-29T00:00:00Z', '2030-04-31T00:00:00Z', '2030-13-01T00:00:00Z', '2030-01-01T23:59:60Z', '2030-01-01T00:00:00+24:00', '2030-01-01T00:00:00+05:60']) {
      const { status, body } = await createKey(value)
      t.equal(status, 400, value)
      t.same(body, productError(400, CALENDAR), value)
    }
  })

  t.test('an instant outside years 0001 to 9999 (in UTC) is refused', async (t) => {
    for (const value of ['9999-12-31T23:59:59-00:01', '9999-12-31T23:30:00-05:00']) {
      const { status, body } = await createKey(value)
      t.equal(status, 400, value)
      t.same(body, productError(400, RANGE), value)
    }
    // Early but representable instants reach the "in the future" rule, not the database.
    for (const value of ['0001-01-01T00:00:00Z', '0000-12-31T23:00:00-02:00']) {
      const { status, body } = await createKey(value)
      t.equal(status, 400, value)
      t.same(body, productError(400, 'Field expires_at must be in the future'), value)
    }
    const { status, body } = await createKey('0000-12-31T23:00:00Z')
    t.equal(status, 400)
    t.same(body, productError(400, RANGE))
  })

  t.test('a value that is not a string is refused with the same message', async (t) => {
    for (const value of [20300101, null, true, ['2030-01-01T00:00:00Z'], { at: '2030-01-01T00:00:00Z' }, 'x'.repeat(65)]) {
      const { status, body } = await createKey(value)
      t.equal(status, 400, JSON.stringify(value).slice(0, 30))
      t.same(body, productError(400, FORMAT))
    }
  })
})

t.test('policy cursors', async (t) => {
  const cursors: Array<[string, string]> = [
    ['before the first year PostgreSQL stores', encodeCursor(['-004713-01-01T00:00:00.000Z', vars.POLICY_A!])],
    ['past the last year Date holds', encodeCursor(['+275760-09-13T00:00:00.000Z', vars.POLICY_A!])],
    ['year 0000', encodeCursor(['0000-01-01T00:00:00.000Z', vars.POLICY_A!])],
    ['the earliest Date', encodeCursor(['-271821-04-20T00:00:00.000Z', vars.POLICY_A!])],
    ['a five-digit year', encodeCursor(['+010000-01-01T00:00:00.000Z', vars.POLICY_A!])],
    ['a bare number Date reads as a year', encodeCursor(['12', vars.POLICY_A!])],
    ['a day that does not exist', encodeCursor(['2026-02-30T00:00:00.000Z', vars.POLICY_A!])],
    ['an offset without minutes', encodeCursor(['2026-01-01T00:00:00+05', vars.POLICY_A!])],
    ['a malformed uuid', encodeCursor(['2026-01-01T00:00:00.000Z', `${vars.POLICY_A!}0`])],
    ['a uuid with a NUL', encodeCursor(['2026-01-01T00:00:00.000Z', `${vars.POLICY_A!.slice(0, 35)}\u0000`])],
    ['a third part', encodeCursor(['2026-01-01T00:00:00.000Z', vars.POLICY_A!, 'x'])],
    ['one part', encodeCursor(['2026-01-01T00:00:00.000Z'])],
    // oxlint-disable-next-line no-loss-of-precision -- 1e400 is meant to overflow to Infinity
    ['numbers', base64url(new TextEncoder().encode(JSON.stringify([1e400, 2 ** 63])))],
    ['an object', base64url(new TextEncoder().encode('{"0":"2026-01-01T00:00:00.000Z","1":"x"}'))],
    ['invalid UTF-8', base64url(new Uint8Array([0x5b, 0x22, 0xc0, 0x80, 0x22, 0x5d]))],
    ['not base64url', 'eyJ+/==='],
    ['too long', 'A'.repeat(513)],
  ]
  for (const [label, cursor] of cursors) {
    const res = await listPolicies(`cursor=${encodeURIComponent(cursor)}`)
    t.equal(res.status, 400, label)
    t.same(await jsonOf(res), productError(400, CURSOR_INVALID), label)
  }

  t.test('cursors at both ends of the window reach the database and answer 200', async (t) => {
    const first = await jsonOf(await listPolicies(`cursor=${encodeCursor(['0001-01-01T00:00:00.000Z', '00000000-0000-0000-0000-000000000000'])}`))
    t.same(first.policies.map((p: { policy_id: string }) => p.policy_id), [vars.POLICY_A])
    const last = await jsonOf(await listPolicies(`cursor=${encodeCursor(['9999-12-31T23:59:59.999Z', 'FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF'])}`))
    t.same(last, { policies: [], next_cursor: null })
  })

  t.test('next_cursor still pages through every policy once', async (t) => {
    for (const name of ['page two', 'page three']) {
      app.clock.advance(1000)
      const res = await app.call('POST', `/policies?organization_id=${vars.ORG_A}`, { token: OWNER, json: { name, effect: 'deny', actions: ['x.*'] } })
      t.equal(res.status, 201)
    }
    const seen: string[] = []
    let cursor: string | null = null
    for (let page = 0; page < 5; page++) {
      const body: any = await jsonOf(await listPolicies(`limit=1${cursor ? `&cursor=${cursor}` : ''}`))
      seen.push(...body.policies.map((p: { name: string }) => p.name))
      cursor = body.next_cursor
      if (cursor === null) break
    }
    t.same(seen.slice(1), ['page two', 'page three'])
    t.equal(seen.length, 3)
  })
})

t.test('page sizes', async (t) => {
  for (const limit of ['0', '101', '-1', '1e2', '10.0', '99999', '18446744073709551616', '%00', '', ' 5']) {
    const res = await listPolicies(`limit=${limit}`)
    t.equal(res.status, 400, limit)
    t.same(await jsonOf(res), productError(400, 'limit must be a whole number from 1 to 100'), limit)
  }
  const ok = await listPolicies('limit=0100')
  t.equal(ok.status, 200, 'leading zeros read as the number')
})

t.test('property: every instant of the window, written with any offset, reads back to the millisecond', async (t) => {
  const instant = fc.integer({ min: EARLIEST_TIMESTAMP, max: LATEST_TIMESTAMP })
  const offset = fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 })
  fc.assert(
    fc.property(instant, offset, fc.integer({ min: 0, max: 999_999 }), (ms, minutes, extra) => {
      // The wall-clock time at that offset, written by hand as RFC 3339 with a ±hh:mm offset and
      // a six-digit fraction (digits past the millisecond are dropped, not rounded).
      const local = new Date(ms + minutes * 60_000).toISOString()
      if (!/^\d{4}-/.test(local)) return // the wall-clock date leaves years 0000–9999 at the very edges
      const sign = minutes < 0 ? '-' : '+'
      const hhmm = `${String(Math.floor(Math.abs(minutes) / 60)).padStart(2, '0')}:${String(Math.abs(minutes) % 60).padStart(2, '0')}`
      const text = `${local.slice(0, 23)}${String(extra % 1000).padStart(3, '0')}${sign}${hhmm}`
      const read = readTimestamp(text)
      if (!(read instanceof Date) || read.getTime() !== ms) throw new Error(`${text} read as ${read instanceof Date ? read.toISOString() : read}, expected ${new Date(ms).toISOString()}`)
    }),
    { numRuns: 2000 },
  )
  t.equal(readTimestamp(new Date(EARLIEST_TIMESTAMP - 1).toISOString()), 'range')
  t.equal(readTimestamp('+010000-01-01T00:00:00.000Z'), 'format')
  t.equal(readTimestamp('9999-12-31T23:59:59.999Z')?.valueOf(), LATEST_TIMESTAMP)
})

// ---- Property: no input a client can send gets a 500, on any route that takes such values ----

const CODE_UNIT = fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code))
/** Any UTF-16 text: NUL, controls, lone surrogates included. */
const anyText = fc.string({ unit: CODE_UNIT, maxLength: 24 })
const nastyText = fc.oneof(
  anyText,
  fc.string({ maxLength: 24 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\udfff\ud800', '', ' ', '\u0085', '\ufeff', '%00', '\\u0000', 'ok'),
)

const pad = (n: number, width: number) => (n < 0 ? '-' : '') + String(Math.abs(n)).padStart(width, '0')
/** Mostly a fitting value, sometimes one just out of range: one wrong field at a time is what finds bugs. */
const mostly = <T>(fitting: fc.Arbitrary<T>, wild: fc.Arbitrary<T>) => fc.oneof({ arbitrary: fitting, weight: 9 }, { arbitrary: wild, weight: 1 })
/** RFC 3339 look-alikes: every field in and just out of range, offsets right and wrong. */
const dateTimeLike = fc
  .record({
    year: mostly(fc.integer({ min: 2027, max: 2100 }), fc.oneof(fc.constantFrom(-1, 0, 1, 1969, 9999, 10_000), fc.integer({ min: -1, max: 10_001 }))),
    month: mostly(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 0, max: 13 })),
    day: mostly(fc.integer({ min: 1, max: 28 }), fc.integer({ min: 0, max: 32 })),
    hour: mostly(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 25 })),
    minute: mostly(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 61 })),
    second: mostly(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 61 })),
    fraction: fc.option(fc.stringMatching(/^\d{1,12}$/), { nil: '' }),
    separator: mostly(fc.constant('T'), fc.constantFrom('t', ' ', '')),
    offset: fc.oneof(
      fc.constantFrom('Z', 'z', '', '+0500', '+05:00', '-00:00', '+24:00', '-23:59', '+23:60', 'UTC'),
      // An offset without minutes: plausible, not RFC 3339, and unreadable by Date.
      fc.tuple(fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 23 })).map(([s, h]) => `${s}${pad(h, 2)}`),
      fc.tuple(fc.constantFrom('+', '-'), mostly(fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 99 })), mostly(fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 99 }))).map(([s, h, m]) => `${s}${pad(h, 2)}:${pad(m, 2)}`),
    ),
  })
  .map((d) => `${pad(d.year, 4)}-${pad(d.month, 2)}-${pad(d.day, 2)}${d.separator}${pad(d.hour, 2)}:${pad(d.minute, 2)}:${pad(d.second, 2)}${d.fraction ? `.${d.fraction}` : ''}${d.offset}`)

/** Instants of any year a Date holds, written by toISOString (±YYYYYY outside 0000–9999). */
const anyYear = fc.date({ noInvalidDate: true }).map((date) => date.toISOString())
const timestampText = fc.oneof({ arbitrary: dateTimeLike, weight: 3 }, { arbitrary: anyYear, weight: 1 }, { arbitrary: nastyText, weight: 1 })

/** JSON number tokens, written raw: beyond int4, int8 and double, negative zero, fractions. */
const rawNumber = fc.oneof(
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map(String),
  fc.constantFrom('1e400', '-1e400', '1e-400', '2147483648', '-2147483649', '9223372036854775808', '-0', '0.5', '1E3', '604800', '604801', '0', '1'),
)
const jsonToken = fc.oneof(
  nastyText.map((text) => JSON.stringify(text)),
  timestampText.map((text) => JSON.stringify(text)),
  rawNumber,
  fc.constantFrom('null', 'true', 'false', '[]', '{}', '[1e400]', '{"a":"\\u0000"}'),
  fc.jsonValue({ maxDepth: 2 }).map((value) => JSON.stringify(value) ?? 'null'),
)

/** A JSON object body whose fields each hold either a fitting value or any JSON token. */
function body(fields: Record<string, fc.Arbitrary<string>>): fc.Arbitrary<string> {
  const entries = Object.entries(fields).map(([name, fitting]) => fc.option(fc.oneof(fitting, jsonToken), { nil: undefined }).map((token) => [name, token] as const))
  return fc.tuple(...entries).map((pairs) => `{${pairs.filter(([, token]) => token !== undefined).map(([name, token]) => `${JSON.stringify(name)}:${token}`).join(',')}}`)
}

const json = (arb: fc.Arbitrary<unknown>) => arb.map((value) => JSON.stringify(value))
const roles = fc.constantFrom('owner', 'admin', 'manager', 'member', 'viewer')

/** Percent-encodes a string's UTF-8 bytes (lone surrogates become U+FFFD), or injects raw escapes. */
function percent(text: string): string {
  return [...new TextEncoder().encode(text)].map((byte) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).padStart(2, '0').toUpperCase()}`)).join('')
}
const rawEscapes = fc.constantFrom('%', '%zz', '%00', '%ED%A0%80', '%C0%80', '%FF', '%2F', '%25')
const urlText = (arb: fc.Arbitrary<string>) => fc.oneof(arb.map(percent), rawEscapes, fc.tuple(arb.map(percent), rawEscapes).map(([a, b]) => a + b))
/**
 * A path segment holding an id. An empty, "." or ".." segment is not an id but another path
 * (the URL parser removes it), answered by the unknown-path fallback: keep a character there.
 */
const pathId = (arb: fc.Arbitrary<string>) => urlText(arb).map((segment) => (/^(\.|%2e){0,2}$/i.test(segment) ? `${segment}x` : segment))

/** Ids: random and foreign UUIDs in either case, the nil and max UUIDs, near misses and junk. */
const idText = fc.oneof(
  fc.uuid(),
  fc.uuid().map((id) => id.toUpperCase()),
  fc.constantFrom(vars.POLICY_B!, vars.VIEWER_KEY_ID_B!, vars.ORG_B!, '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff'),
  fc.uuid().map((id) => `{${id}}`),
  fc.uuid().map((id) => `urn:uuid:${id}`),
  fc.uuid().map((id) => id.replace(/-/g, '')),
  fc.uuid().map((id) => `${id.slice(0, 35)}g`),
  nastyText,
)

/** Cursors: random base64url and bytes, and well-formed ones holding odd instants or ids. */
const cursorText = fc.oneof(
  { arbitrary: fc.tuple(timestampText, fc.oneof(fc.uuid(), idText)).map((parts) => encodeCursor(parts)), weight: 4 },
  fc.base64String({ maxLength: 80 }).map((text) => text.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')),
  fc.jsonValue({ maxDepth: 2 }).map((value) => base64url(new TextEncoder().encode(JSON.stringify(value) ?? 'null'))),
  fc.uint8Array({ maxLength: 48 }).map(base64url),
  nastyText,
)

interface Probe {
  readonly method: string
  readonly path: string
  readonly body?: string
  readonly contentType?: string
}

/** product: bearer-protected routes; public: unauthenticated routes answering in the product format. */
type ErrorFormat = 'product' | 'public' | 'token' | 'leads'

/** The answer is ours: not a 5xx, JSON, and an error body exactly in the surface's format. */
async function checkAnswer(probe: Probe, format: ErrorFormat): Promise<void> {
  const headers: Record<string, string> = {}
  if (probe.body !== undefined) headers['content-type'] = probe.contentType ?? 'application/json'
  const res = await app.call(probe.method, probe.path, { token: format === 'product' ? OWNER : undefined, body: probe.body, headers })
  const text = await res.text()
  const where = `${probe.method} ${probe.path} ${probe.body ?? ''} → ${res.status} ${text.slice(0, 200)}`
  if (res.status >= 500) throw new Error(`server error: ${where}`)
  if (res.status === 204) return
  if (!res.headers.get('content-type')?.startsWith('application/json')) throw new Error(`not JSON: ${where}`)
  const answer = JSON.parse(text) as Record<string, unknown>
  if (res.status < 400) return
  const keys = Object.keys(answer).sort().join(',')
  const expected = { product: 'error,status', public: 'error,status', token: 'error,error_description,status', leads: 'error' }[format]
  if (keys !== expected) throw new Error(`error body not in the ${format} format: ${where}`)
  if (typeof answer.error !== 'string' || answer.error === '') throw new Error(`empty error: ${where}`)
  if (format !== 'leads' && answer.status !== REASON[res.status]) throw new Error(`status is not the reason phrase: ${where}`)
}

// Bounded so the file runs in seconds; SECURITY_INPUT_RUNS=300 searches deeper locally.
const RUNS = Number(process.env.SECURITY_INPUT_RUNS ?? 30)

async function holds(t: Test, name: string, format: ErrorFormat, probes: fc.Arbitrary<Probe>, numRuns = RUNS): Promise<void> {
  await fc.assert(
    fc.asyncProperty(probes, (probe) => checkAnswer(probe, format)),
    { numRuns },
  )
  t.pass(name)
}

t.test('property: no route answers 500 to dates, numbers, ids, cursors or hostile text', async (t) => {
  const keyBody = body({ name: json(nastyText), role: json(roles), expires_at: json(timestampText) })
  const policyFields = {
    name: json(nastyText),
    description: json(nastyText),
    effect: json(fc.constantFrom('allow', 'deny', 'require_approval')),
    agents: json(fc.array(nastyText, { maxLength: 3 })),
    actions: json(fc.array(nastyText, { minLength: 1, maxLength: 3 })),
    resources: json(fc.array(nastyText, { maxLength: 3 })),
    condition: json(fc.oneof(fc.constant(null), nastyText, fc.constantFrom('args.amount > 100', 'a.b.c(', '[1,2].all(x, [3].all(y, x < y))', 'resource.matches("a+")'))),
    approval: fc.oneof(
      json(fc.oneof(fc.constant(null), fc.dictionary(nastyText, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }))),
      fc.tuple(rawNumber, rawNumber, rawNumber).map(([a, b, c]) => `{"approvers_required":${a},"timeout_seconds":${b},"use_within_seconds":${c}}`),
    ),
    mode: json(fc.constantFrom('enforce', 'monitor')),
    enabled: json(fc.boolean()),
  }
  const org = fc.oneof(fc.constant(vars.ORG_A!), fc.constant(vars.ORG_A!.toUpperCase()), idText)

  await holds(t, 'GET /policies with any cursor', 'product', cursorText.map((cursor) => ({ method: 'GET', path: `/policies?organization_id=${vars.ORG_A}&cursor=${percent(cursor)}` })), 2 * RUNS)
  await holds(t, 'GET /policies with any organization_id, limit and cursor', 'product', fc
    .record({ org: urlText(org), limit: fc.option(urlText(fc.oneof(rawNumber, nastyText)), { nil: undefined }), cursor: fc.option(urlText(cursorText), { nil: undefined }) })
    .map(({ org, limit, cursor }) => ({ method: 'GET', path: `/policies?organization_id=${org}${limit === undefined ? '' : `&limit=${limit}`}${cursor === undefined ? '' : `&cursor=${cursor}`}` })))
  await holds(t, 'POST /policies with any field', 'product', fc
    .record({ org: urlText(org), body: body({ organization_id: json(org), ...policyFields }) })
    .map(({ org, body }) => ({ method: 'POST', path: `/policies?organization_id=${org}`, body })))
  await holds(t, 'GET, PATCH, DELETE /policies/{policy_id} with any id and field', 'product', fc
    .record({ method: fc.constantFrom('GET', 'PATCH', 'DELETE'), id: pathId(idText), body: body(policyFields) })
    .map(({ method, id, body }) => ({ method, path: `/policies/${id}`, body: method === 'PATCH' ? body : undefined })))
  const policyId = fc.oneof(fc.constant(vars.POLICY_A!), fc.constant(vars.POLICY_B!), idText)
  await holds(t, 'GET /policies/{policy_id}/versions with any id, limit and cursor, and /versions/{n} with any n', 'product', fc
    .record({ id: pathId(policyId), n: pathId(fc.oneof(rawNumber, nastyText)), limit: urlText(fc.oneof(rawNumber, nastyText)), cursor: urlText(cursorText), one: fc.boolean() })
    .map(({ id, n, limit, cursor, one }) => ({ method: 'GET', path: one ? `/policies/${id}/versions/${n}` : `/policies/${id}/versions?limit=${limit}&cursor=${cursor}` })))
  await holds(t, 'POST /policies/{policy_id}/rollback with any id and version', 'product', fc
    .record({ id: pathId(policyId), body: body({ version: rawNumber }) })
    .map(({ id, body }) => ({ method: 'POST', path: `/policies/${id}/rollback`, body })))
  const drafts = fc.array(body({ policy_id: json(policyId), ...policyFields }), { maxLength: 3 }).map((items) => `[${items.join(',')}]`)
  await holds(t, 'POST /policies/replay with any window, limit and drafts', 'product', body({ from: json(timestampText), to: json(timestampText), limit: rawNumber, policies: drafts }).map((body) => ({ method: 'POST', path: '/policies/replay', body })))
  await holds(t, 'PATCH /organization with any setting', 'product', body({ name: json(nastyText), default_decision: json(fc.constantFrom('deny', 'allow', 'require_approval')), unknown_agents: json(fc.constantFrom('deny', 'evaluate')), decision_retention_days: rawNumber }).map((body) => ({ method: 'PATCH', path: '/organization', body })))
  await holds(t, 'POST /keys with any expires_at', 'product', json(timestampText).map((at) => ({ method: 'POST', path: '/keys', body: `{"role":"viewer","expires_at":${at}}` })), 2 * RUNS)
  await holds(t, 'POST /keys with any name, role and expires_at', 'product', keyBody.map((body) => ({ method: 'POST', path: '/keys', body })))
  await holds(t, 'GET, DELETE /keys/{key_id} and POST /keys/{key_id}/rotate with any id and expires_in', 'product', fc
    .record({ method: fc.constantFrom('GET', 'DELETE', 'ROTATE'), id: pathId(idText), body: body({ expires_in: rawNumber }) })
    .map(({ method, id, body }) => (method === 'ROTATE' ? { method: 'POST', path: `/keys/${id}/rotate`, body } : { method, path: `/keys/${id}` })))
  await fc.assert(
    fc.asyncProperty(body({ expires_in: rawNumber }), async (body) => {
      // A fresh key each time: only a live key gets as far as reading expires_in.
      const { key_id } = await jsonOf(await app.call('POST', '/keys', { token: OWNER, json: { role: 'viewer' } }))
      await checkAnswer({ method: 'POST', path: `/keys/${key_id}/rotate`, body }, 'product')
    }),
    { numRuns: RUNS },
  )
  t.pass('POST /keys/{key_id}/rotate of a live key with any expires_in')
  await holds(t, 'POST /invitations with any email and role', 'product', body({ email: json(nastyText), role: json(roles) }).map((body) => ({ method: 'POST', path: '/invitations', body })))
  await holds(t, 'DELETE /invitations/{invitation_id} with any id', 'product', pathId(idText).map((id) => ({ method: 'DELETE', path: `/invitations/${id}` })))
  await holds(t, 'POST /invitations/accept with any token and password', 'public', body({ token: json(nastyText), password: json(nastyText) }).map((body) => ({ method: 'POST', path: '/invitations/accept', body })))
  await holds(t, 'PATCH, DELETE /members/{user_id} with any id and role', 'product', fc
    .record({ method: fc.constantFrom('PATCH', 'DELETE'), id: pathId(idText), body: body({ role: json(roles) }) })
    .map(({ method, id, body }) => ({ method, path: `/members/${id}`, body: method === 'PATCH' ? body : undefined })))
  await holds(t, 'POST /auth/login with any email, password, organization_id, api_key or grant', 'token', fc
    .oneof(
      body({ email: json(fc.constant(vars.USER_EMAIL_A!)), password: json(nastyText), organization_id: json(idText) }),
      body({ api_key: json(nastyText) }),
      body({ grant_type: json(fc.constantFrom('client_credentials', 'refresh_token', 'password')), client_secret: json(nastyText), refresh_token: json(nastyText) }),
    )
    .map((body) => ({ method: 'POST', path: '/auth/login', body })))
  await holds(t, 'POST /auth/login and /auth/refresh as forms with any value', 'token', fc
    .record({ path: fc.constantFrom('/auth/login', '/auth/refresh'), grant: urlText(fc.constantFrom('client_credentials', 'refresh_token')), secret: urlText(nastyText) })
    .map(({ path, grant, secret }) => ({ method: 'POST', path, body: `grant_type=${grant}&client_secret=${secret}&refresh_token=${secret}`, contentType: 'application/x-www-form-urlencoded' })))
  await holds(t, 'POST /auth/refresh with any refresh_token', 'token', body({ refresh_token: json(nastyText), grant_type: json(fc.constant('refresh_token')) }).map((body) => ({ method: 'POST', path: '/auth/refresh', body })))
  const text = json(nastyText)
  await holds(t, 'POST /demo-request with any field', 'leads', body({ first_name: text, last_name: text, email: text, company: text, linkedin: text, phone: text, source: text, analytics_distinct_id: text }).map((body) => ({ method: 'POST', path: '/demo-request', body })))
  await holds(t, 'POST /newsletter and /waitlist with any field', 'leads', fc
    .record({ path: fc.constantFrom('/newsletter', '/waitlist'), body: body({ email: text, source: text, analytics_distinct_id: text }) })
    .map(({ path, body }) => ({ method: 'POST', path, body })))
})

t.test("field names Object.prototype also has are unknown fields like any other, never a 500", async (t) => {
  // A lookup of the field name in a plain object once found Object.prototype.valueOf (a fuzzing run's counterexample).
  const headers = { 'content-type': 'application/json' }
  for (const name of ['valueOf', 'constructor', 'toString', 'hasOwnProperty', 'isPrototypeOf', '__proto__']) {
    // __proto__ never reaches a schema: the body reader refuses it at any depth.
    const forbidden = name === '__proto__' ? 'Request body contains the forbidden key "__proto__"' : null
    const replay = await app.call('POST', '/policies/replay', { token: OWNER, body: JSON.stringify({ policies: [{ [name]: false }] }), headers })
    t.equal(replay.status, 400, `replay draft with ${name}`)
    t.same(await replay.json(), productError(400, forbidden ?? `Unknown field: ${name} (at policies.0.${name})`))
    const create = await app.call('POST', '/policies', { token: OWNER, body: JSON.stringify({ [name]: false }), headers })
    t.equal(create.status, 400, `policy create with ${name}`)
    t.same(await create.json(), productError(400, forbidden ?? `Unknown field: ${name}`))
  }
})

t.test('no request in this file was logged as a server error', async (t) => {
  t.same(app.logs.filter((line) => line.level === 'error'), [])
})
