// Security tests of signing in: parallel guesses are counted before they are checked, one client
// cannot take the password hashing from everyone else, IPv6 clients are counted per network, and
// the organization is chosen only after the password is verified, with nothing about memberships
// told before that.
import { BY_OPERATOR } from '../../storage/audit.ts'
import t from 'tap'
import { createPasswordHasher, hashPassword, HashingBusyError, type HashOwner } from '../../auth/passwords.ts'
import { createUserUnlessExists, findUserByEmail, setMembership } from '../../storage/users.ts'
import { jsonOf, productApp, type ProductApp } from '../support/product-support.ts'

/** A client somewhere on the Internet, over TLS (plain HTTP is refused from non-loopback peers). */
function from(remoteAddress: string): { remoteAddress: string; tls: true } {
  return { remoteAddress, tls: true }
}

async function login(app: ProductApp, json: Record<string, unknown>, conn = from('203.0.113.1')): Promise<Response> {
  return app.call('POST', '/auth/login', { json, conn })
}

const BAD_LOGIN = { status: 'Bad Request', error: 'invalid_grant', error_description: 'Invalid email or password' }
const THROTTLED = { status: 'Too Many Requests', error: 'too_many_requests', error_description: 'Too many failed attempts; retry later' }
const OVER_SHARE = { status: 'Too Many Requests', error: 'too_many_requests', error_description: 'Too many sign-ins in progress from this client or for this account; retry shortly' }

// Default settings; each test below signs in from clients of its own.
const app = await productApp(t)
// Hashing shares wide enough that only the failure throttle (10 per 300 s) can refuse.
const wide = await productApp(t, { env: { PASSWORD_HASH_PER_CLIENT: '100', PASSWORD_HASH_PER_ACCOUNT: '100' } })

t.test('parallel guesses are counted before the password is checked', async (t) => {
  t.test('30 parallel wrong passwords for one account from one client: 10 are checked, 20 refused with 429', async (t) => {
    const app = wide
    const conn = from('198.51.100.20')
    const answers = await Promise.all(Array.from({ length: 30 }, () => login(app, { email: app.vars.USER_EMAIL_A, password: 'wrong guess' }, conn)))
    const statuses = answers.map((answer) => answer.status).sort()
    t.same(statuses, [...Array(10).fill(400), ...Array(20).fill(429)])
    for (const answer of answers) {
      const body = await jsonOf(answer)
      if (answer.status === 400) t.same(body, BAD_LOGIN)
      else {
        t.same(body, THROTTLED)
        t.equal(answer.headers.get('retry-after'), '300')
        t.equal(answer.headers.get('cache-control'), 'no-store')
      }
    }
    // The right password waits out the window too: the places were taken before checking.
    const right = await login(app, { email: app.vars.USER_EMAIL_A, password: app.vars.USER_PASSWORD_A }, conn)
    t.equal(right.status, 429)
    t.same(await jsonOf(right), THROTTLED)
    app.clock.advance(299_000)
    const stillRefused = await login(app, { email: app.vars.USER_EMAIL_A, password: app.vars.USER_PASSWORD_A }, conn)
    t.equal(stillRefused.status, 429)
    t.equal(stillRefused.headers.get('retry-after'), '1')
    await stillRefused.body?.cancel()
    app.clock.advance(1_000)
    const later = await login(app, { email: app.vars.USER_EMAIL_A, password: app.vars.USER_PASSWORD_A }, conn)
    t.equal(later.status, 200)
    t.equal((await jsonOf(later)).organization_id, app.vars.ORG_A)
  })

  t.test('with the default settings, at most 10 of 30 parallel guesses are checked', async (t) => {
    const answers = await Promise.all(Array.from({ length: 30 }, () => login(app, { email: app.vars.USER_EMAIL_A, password: 'wrong guess' }, from('198.51.100.30'))))
    const checked = answers.filter((answer) => answer.status === 400).length
    t.ok(checked >= 1 && checked <= 10, `${checked} checked`)
    for (const answer of answers) {
      t.ok(answer.status === 400 || answer.status === 429, String(answer.status))
      if (answer.status === 429) t.ok(answer.headers.get('retry-after'), 'Retry-After')
      await answer.body?.cancel()
    }
  })

  t.test('an unknown email is throttled exactly like a known one', async (t) => {
    const answers = await Promise.all(Array.from({ length: 30 }, () => login(wide, { email: 'nobody@example.com', password: 'wrong guess' }, from('198.51.100.21'))))
    t.same(answers.map((answer) => answer.status).sort(), [...Array(10).fill(400), ...Array(20).fill(429)])
    await Promise.all(answers.map((answer) => answer.body?.cancel()))
  })

  t.test('successful sign-ins give their place back: they never use up the budget', async (t) => {
    const conn = from('198.51.100.22')
    for (let i = 0; i < 5; i++) {
      const ok = await login(wide, { email: wide.vars.USER_EMAIL_B, password: wide.vars.USER_PASSWORD_B }, conn)
      t.equal(ok.status, 200)
      await ok.body?.cancel()
    }
    const statuses: number[] = []
    for (let i = 0; i < 11; i++) {
      const wrong = await login(wide, { email: wide.vars.USER_EMAIL_B, password: 'wrong' }, conn)
      statuses.push(wrong.status)
      await wrong.body?.cancel()
    }
    t.same(statuses, [...Array(10).fill(400), 429])
  })
})

t.test('one client cannot take the password hashing from the others', async (t) => {
  // The production cost (N = 2^17) and default hashing shares; the failure throttle is opened
  // wide so that only the hashing shares stand between a flood and everyone else.
  const password = 'a valid password at the default cost'
  const [app, stored] = await Promise.all([productApp(t, { env: { PASSWORD_HASH_COST: '17', LOGIN_RATE_LIMIT: '1000/60' } }), hashPassword(password, 17)])

  t.test('at the default scrypt cost, 80 concurrent failed sign-ins from one client leave room for another client', async (t) => {
    const { user } = await createUserUnlessExists(app.db, 'costly@example.com', stored, new Date(app.clock.now))
    await setMembership(app.db, user.id, app.vars.ORG_A!, 'viewer', new Date(app.clock.now), BY_OPERATOR)

    const flood = Array.from({ length: 80 }, (_, i) => login(app, { email: `flood-${i}@example.com`, password: 'wrong guess' }, from('198.51.100.66')))
    // Once the flood is being refused, the hashing is as busy as it gets.
    const refused = new Promise<void>((resolve) => {
      for (const answer of flood) void answer.then((response) => response.status !== 400 && resolve())
    })
    await Promise.race([refused, Promise.all(flood)])
    const valid = await login(app, { email: 'costly@example.com', password }, from('192.0.2.10'))
    t.equal(valid.status, 200)
    t.match(await jsonOf(valid), { organization_id: app.vars.ORG_A, role: 'viewer' })

    const answers = await Promise.all(flood)
    const statuses = new Set(answers.map((answer) => answer.status))
    t.same([...statuses].sort(), [400, 429], 'the flood gets wrong-password answers and 429s, never a 503')
    const over = answers.find((answer) => answer.status === 429)!
    t.equal(over.headers.get('retry-after'), '1')
    t.same(await jsonOf(over), OVER_SHARE)
    await Promise.all(answers.map((answer) => answer.bodyUsed || answer.body?.cancel()))
  })

  t.test('one account attacked from many clients uses only its own share', async (t) => {
    // An unknown email: its checks cost a hash at the default cost like any other, and it has the same share.
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) => login(app, { email: 'attacked@example.com', password: 'wrong guess' }, from(`198.51.100.${100 + i}`))),
    )
    t.same(answers.map((answer) => answer.status).sort(), [...Array(4).fill(400), ...Array(8).fill(429)], 'the account share is 4')
    for (const answer of answers) {
      if (answer.status === 429) t.same(await jsonOf(answer), OVER_SHARE)
      else {
        t.equal(answer.status, 400)
        await answer.body?.cancel()
      }
    }
  })

  t.test('a full queue takes a newcomer in place of the last job of the client holding the most', async (t) => {
    const hasher = createPasswordHasher(10, { concurrency: 1, queue: 3, perClient: 3, perAccount: 100 })
    const owner = (client: string): HashOwner => ({ client, account: null })
    const settle = (promise: Promise<unknown>): Promise<string> =>
      promise.then(
        () => 'done',
        (error: unknown) => (error instanceof HashingBusyError ? error.reason : 'error'),
      )
    // a: one running, two waiting, and no room for a fourth (its share is 3); b: one waiting.
    const a = [0, 1, 2, 3].map(() => settle(hasher.hash('x', owner('a'))))
    const b = settle(hasher.hash('x', owner('b')))
    // The queue (3) is full: c takes the place of a's last job, as a would still hold more than c.
    const c = settle(hasher.hash('x', owner('c')))
    // a, b and c each have one waiting: nobody holds more than the newcomer would.
    const d = settle(hasher.hash('x', owner('d')))
    t.same(await Promise.all([...a, b, c, d]), ['done', 'done', 'share', 'share', 'done', 'done', 'overload'])
  })

  t.test('an account has its share whichever clients ask', async (t) => {
    const hasher = createPasswordHasher(10, { concurrency: 1, queue: 10, perClient: 10, perAccount: 2 })
    const settle = (promise: Promise<unknown>): Promise<string> =>
      promise.then(
        () => 'done',
        (error: unknown) => (error instanceof HashingBusyError ? error.reason : 'error'),
      )
    const results = ['a', 'b', 'c'].map((client) => settle(hasher.verify('x', null, { client, account: 'victim@example.com' })))
    const other = settle(hasher.verify('x', null, { client: 'c', account: 'other@example.com' }))
    t.same(await Promise.all([...results, other]), ['done', 'done', 'share', 'done'])
  })

  t.test('an unknown account and an unusable stored hash cost a hash and never match', async (t) => {
    const hasher = createPasswordHasher(10, { concurrency: 1, queue: 3, perClient: 3, perAccount: 3 })
    const owner = { client: 'x', account: 'y' }
    t.equal(await hasher.verify('anything', null, owner), false)
    t.equal(await hasher.verify('', '', owner), false)
    t.equal(await hasher.verify('pw', 'not a hash', owner), false)
    const stored = await hasher.hash('pw', owner)
    t.equal(await hasher.verify('pw', stored, owner), true)
    t.equal(await hasher.verify('pW', stored, owner), false)
  })
})

t.test('IPv6 clients are counted per network', async (t) => {
  const app = await productApp(t, { env: { LOGIN_RATE_LIMIT: '3/60', LEAD_RATE_LIMIT: '2/60', TRUST_PROXY: '10.0.0.1' } })

  async function statusesOf(addresses: string[]): Promise<number[]> {
    const statuses: number[] = []
    for (const address of addresses) {
      const answer = await login(app, { email: app.vars.USER_EMAIL_A, password: 'wrong' }, from(address))
      statuses.push(answer.status)
      await answer.body?.cancel()
    }
    return statuses
  }

  t.test('addresses of one /64 share the sign-in throttle; another /64 has its own', async (t) => {
    t.same(await statusesOf(['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:DB8:1:2:0:0:0:3']), [400, 400, 400, 429])
    t.same(await statusesOf(['2001:db8:1:3::1']), [400])
  })

  t.test('an IPv4-mapped address is its IPv4 client', async (t) => {
    t.same(await statusesOf(['203.0.113.77', '::ffff:203.0.113.77', '::ffff:cb00:714d', '0:0:0:0:0:ffff:203.0.113.77']), [400, 400, 400, 429])
  })

  t.test('RATE_LIMIT_IPV6_PREFIX=128 counts each address alone', async (t) => {
    const exact = await productApp(t, { env: { LOGIN_RATE_LIMIT: '1/60', RATE_LIMIT_IPV6_PREFIX: '128' } })
    for (const address of ['2001:db8::1', '2001:db8::2']) {
      const answer = await login(exact, { email: exact.vars.USER_EMAIL_A, password: 'wrong' }, from(address))
      t.equal(answer.status, 400, address)
      await answer.body?.cancel()
    }
    const again = await login(exact, { email: exact.vars.USER_EMAIL_A, password: 'wrong' }, from('2001:0db8::0001'))
    t.equal(again.status, 429)
    await again.body?.cancel()
  })

  t.test('the lead forms count one /64 as one client, also behind a trusted proxy', async (t) => {
    const statuses: number[] = []
    for (const client of ['2001:db8:7:7::a', '2001:db8:7:7::b', '2001:db8:7:7::c']) {
      const answer = await app.request('/newsletter', {
        method: 'POST',
        json: {},
        headers: { 'x-forwarded-for': client, 'x-forwarded-proto': 'https' },
        conn: { remoteAddress: '10.0.0.1' },
      })
      statuses.push(answer.status)
      await answer.body?.cancel()
    }
    t.same(statuses, [400, 400, 429])
  })
})

t.test('an email over 254 characters or a password over 1,024 is refused as malformed, before any check', async (t) => {
  const TOO_LONG = { status: 'Bad Request', error: 'invalid_request', error_description: 'email or password is too long' }
  const conn = from('198.51.100.77')
  const email = (length: number) => `${'x'.repeat(length - 12)}@example.com`
  for (const [json, expected, label] of [
    [{ email: email(255), password: 'p' }, TOO_LONG, 'a 255-character email'],
    [{ email: email(254), password: 'p' }, BAD_LOGIN, 'a 254-character email is looked up'],
    [{ email: 'a@example.com', password: 'p'.repeat(1025) }, TOO_LONG, 'a 1,025-character password'],
    [{ email: 'a@example.com', password: 'p'.repeat(1024) }, BAD_LOGIN, 'a 1,024-character password is checked'],
  ] as const) {
    const answer = await login(app, json, conn)
    t.equal(answer.status, 400, label)
    t.same(await jsonOf(answer), expected, label)
  }
})

t.test('the organization is chosen after the password, and nothing is told before', async (t) => {
  const { vars } = app
  // A member of two organizations: B first (the fixture), then A. Set up directly in storage.
  const userB = (await findUserByEmail(app.db, vars.USER_EMAIL_B!))!
  app.clock.advance(1_000)
  await setMembership(app.db, userB.id, vars.ORG_A!, 'admin', new Date(app.clock.now), BY_OPERATOR)
  const email = vars.USER_EMAIL_B!
  const password = vars.USER_PASSWORD_B!

  t.test('without organization_id: the organization joined first, and the list of memberships', async (t) => {
    const answer = await login(app, { email, password })
    t.equal(answer.status, 200)
    const body = await jsonOf(answer)
    t.same(Object.keys(body), ['access_token', 'token_type', 'expires_in', 'refresh_token', 'organization_id', 'role', 'scope', 'organizations'])
    t.equal(body.organization_id, vars.ORG_B)
    t.equal(body.role, 'owner')
    t.same(body.organizations, [
      { organization_id: vars.ORG_B, name: 'Fixture org B', role: 'owner' },
      { organization_id: vars.ORG_A, name: 'Fixture org A', role: 'admin' },
    ])
    const use = await app.call('GET', `/policies/${vars.POLICY_B}`, { token: body.access_token })
    t.equal(use.status, 200)
    await use.body?.cancel()
  })

  t.test('with organization_id of a membership: that organization, with its role', async (t) => {
    const answer = await login(app, { email, password, organization_id: vars.ORG_A!.toUpperCase() })
    t.equal(answer.status, 200)
    const body = await jsonOf(answer)
    t.same(Object.keys(body), ['access_token', 'token_type', 'expires_in', 'refresh_token', 'organization_id', 'role', 'scope'])
    t.equal(body.organization_id, vars.ORG_A)
    t.equal(body.role, 'admin')
    const use = await app.call('GET', `/policies/${vars.POLICY_A}`, { token: body.access_token })
    t.equal(use.status, 200)
    await use.body?.cancel()
  })

  t.test('every failure answers byte for byte like a wrong password, organization_id or not', async (t) => {
    const stranger = '00000000-0000-4000-8000-000000000000'
    const cases: Array<[string, Record<string, unknown>]> = [
      ['wrong password', { email, password: 'wrong' }],
      ['wrong password, a membership named', { email, password: 'wrong', organization_id: vars.ORG_A }],
      ['wrong password, another organization named', { email, password: 'wrong', organization_id: stranger }],
      ['unknown email', { email: 'nobody@example.com', password }],
      ['unknown email, an organization named', { email: 'nobody@example.com', password, organization_id: vars.ORG_A }],
      ['right password, an organization the user is not in', { email, password, organization_id: stranger }],
      ['right password of a one-organization user, another organization named', { email: vars.USER_EMAIL_A, password: vars.USER_PASSWORD_A, organization_id: vars.ORG_B }],
    ]
    for (const [name, json] of cases) {
      // Each from its own client, so the throttle never answers instead.
      const answer = await login(app, json, from(`198.51.100.${cases.findIndex(([n]) => n === name) + 1}`))
      t.equal(answer.status, 400, name)
      t.equal(await answer.text(), JSON.stringify(BAD_LOGIN), name)
      t.equal(answer.headers.get('cache-control'), 'no-store', name)
    }
  })

  t.test('a user left with no organization cannot sign in, and is told only that the credentials are wrong', async (t) => {
    const { user } = await createUserUnlessExists(app.db, 'orphan@example.com', await hashPassword('orphan password', 10), new Date(app.clock.now))
    t.ok(user.id)
    const answer = await login(app, { email: 'orphan@example.com', password: 'orphan password' }, from('198.51.100.50'))
    t.equal(answer.status, 400)
    t.equal(await answer.text(), JSON.stringify(BAD_LOGIN))
  })
})
