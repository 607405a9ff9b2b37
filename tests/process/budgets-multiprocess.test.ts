// Budgets across two real server processes on one PostgreSQL database (docs/budgets.md): the
// counters are locked inside each decision's transaction, so decisions racing through A and B
// at once never pass a limit together; and with the database connections cut mid-load, every
// answered allow was counted and logged, and nothing else was. Runs only with TEST_DATABASE_URL.
import t from 'tap'
import { createScratchDatabase, seedWorld, startServer, type ServerProcess } from '../../bench/lib.ts'
import { openDatabase } from '../../database/connect.ts'
import { silentLogger } from '../../log.ts'
import { sql } from 'kysely'

const url = process.env.TEST_DATABASE_URL
if (!url) {
  t.test('budgets across two processes on one PostgreSQL', { skip: 'needs PostgreSQL: set TEST_DATABASE_URL (PGlite is one process per data directory)' }, async () => {})
} else {
  const scratch = await createScratchDatabase(url, 'steward_bmp')
  t.teardown(() => scratch.drop())
  const env = { DATABASE_URL: scratch.url, API_RATE_LIMIT: '1000000/60', API_ORG_RATE_LIMIT: '1000000/60' }
  const a: ServerProcess = await startServer('node', env)
  t.teardown(() => a.stop())
  const b: ServerProcess = await startServer('node', env)
  t.teardown(() => b.stop())
  const world = await seedWorld(scratch.url, 0)
  if (!world) throw new Error('could not seed an organization and key')
  const handle = await openDatabase({ databaseUrl: scratch.url, dataDir: '', logger: silentLogger })
  t.teardown(() => handle.close())
  const db = handle.db

  const call = async (server: ServerProcess, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${world.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, body: (await res.json()) as Record<string, any> }
  }
  const ask = (server: ServerProcess, action: string, args: Record<string, unknown> = {}) => call(server, 'POST', '/decisions', { agent: 'mp-budget', action, resource: 'r', args })
  const used = async (policyId: string) => Number((await db.selectFrom('budget_counters').select('used').where('policy_id', '=', policyId).executeTakeFirst())?.used ?? 0)
  const allows = async (action: string) =>
    Number((await db.selectFrom('decisions').select((eb) => eb.fn.countAll<string>().as('n')).where('action', '=', action).where('decision', '=', 'allow').executeTakeFirstOrThrow()).n)
  const policy = async (name: string, action: string, limit: Record<string, unknown>) => {
    const res = await call(a, 'POST', `/policies?organization_id=${world.organizationId}`, { name, effect: 'allow', actions: [action], limits: [limit] })
    if (res.status !== 201) throw new Error(`policy ${name}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body
  }

  t.test('setup through A', async (t) => {
    t.equal((await call(a, 'POST', '/agents', { handle: 'mp-budget' })).status, 201)
  })

  t.test('200 concurrent decisions through A and B against a count limit of 37: exactly 37 allows', async (t) => {
    const p = await policy('Count race', 'budget.count', { name: 'thirty-seven', kind: 'count', max: 37, window: { type: 'day', tz: 'Europe/Paris' } })
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => ask(i % 2 ? a : b, 'budget.count')))
    t.same([...new Set(answers.map((x) => x.status))], [200])
    t.equal(answers.filter((x) => x.body.decision === 'allow').length, 37, 'exactly 37 allows')
    // Which process won how many depends on scheduling: said, not asserted.
    t.comment(`allows through A: ${answers.filter((x, i) => i % 2 === 1 && x.body.decision === 'allow').length}, through B: ${answers.filter((x, i) => i % 2 === 0 && x.body.decision === 'allow').length}`)
    t.equal(await used(p.policy_id), 37, 'the counter holds 37')
    t.equal(await allows('budget.count'), 37, 'the log holds 37 allows')
  })

  t.test('a spend limit with random amounts through A and B: never over, no allow refused while room remains', async (t) => {
    const MAX = 100_000
    const p = await policy('Spend race', 'budget.spend', { name: 'spend', kind: 'spend', max: MAX, amount: 'int(args.cents)', currency: 'EUR', window: { type: 'all_time' } })
    const amounts = Array.from({ length: 200 }, () => 1 + Math.floor(Math.random() * 2000))
    const answers = await Promise.all(amounts.map((cents, i) => ask(i % 2 ? a : b, 'budget.spend', { cents })))
    t.same([...new Set(answers.map((x) => x.status))], [200])
    const sum = amounts.filter((_, i) => answers[i]!.body.decision === 'allow').reduce((x, y) => x + y, 0)
    t.ok(sum <= MAX, `allowed ${sum} ≤ ${MAX}`)
    t.same(amounts.filter((cents, i) => answers[i]!.body.decision === 'deny' && cents <= MAX - sum), [], 'every refused amount was larger than what remains')
    t.equal(await used(p.policy_id), sum, 'the counter holds the allowed sum')
  })

  t.test('connections cut mid-load: 503s, no allow without its reservation, counters consistent after recovery', async (t) => {
    const p = await policy('Outage', 'budget.outage', { name: 'outage', kind: 'count', max: 100_000, window: { type: 'all_time' } })
    let cutting = true
    const cutter = (async () => {
      let cuts = 0
      while (cutting) {
        await new Promise((resolve) => setTimeout(resolve, 15))
        await sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${scratch.name} and pid <> pg_backend_pid()`.execute(db).catch(() => {})
        cuts++
      }
      return cuts
    })()
    const answers = await Promise.all(Array.from({ length: 400 }, (_, i) => ask(i % 2 ? a : b, 'budget.outage').catch(() => ({ status: 0, body: {} as Record<string, any> }))))
    cutting = false
    const cuts = await cutter
    const statuses = [...new Set(answers.map((x) => x.status))].sort()
    t.ok(statuses.every((s) => s === 200 || s === 503), `only 200 and 503 (${statuses.join(', ')}) over ${cuts} cuts`)
    t.comment(`${answers.filter((x) => x.status === 503).length} of 400 answered 503`)
    const answered = answers.filter((x) => x.status === 200 && x.body.decision === 'allow').length
    t.equal(await used(p.policy_id), await allows('budget.outage'), 'the counter equals the allows logged')
    t.ok((await allows('budget.outage')) >= answered, 'every allow answered was logged')
    // After recovery: the pools reconnect and decisions count again.
    let after = await ask(a, 'budget.outage')
    for (let i = 0; i < 20 && after.status !== 200; i++) after = await ask(a, 'budget.outage')
    t.equal(after.body.decision, 'allow')
    t.equal(await used(p.policy_id), await allows('budget.outage'), 'and stays equal')
  })
}
