// GET /health under concurrency: probes share one database check, and each answer comes from a
// check that started after its request arrived (never a cached result).
import t from 'tap'
import { Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, type DatabaseConnection, type Driver, type QueryResult } from 'kysely'
import { healthRoutes } from '../../routes/health.ts'
import type { RequestContext } from '../../services/deps.ts'

/** A database whose queries wait until the test settles them, counting how many were sent. */
function heldDatabase() {
  const pending: Array<(error?: Error) => void> = []
  const connection: DatabaseConnection = {
    executeQuery: <R>() =>
      new Promise<QueryResult<R>>((resolve, reject) => pending.push((error) => (error ? reject(error) : resolve({ rows: [] })))),
    streamQuery: () => {
      throw new Error('not used')
    },
  }
  const driver: Driver = {
    init: async () => {},
    acquireConnection: async () => connection,
    beginTransaction: async () => {},
    commitTransaction: async () => {},
    rollbackTransaction: async () => {},
    releaseConnection: async () => {},
    destroy: async () => {},
  }
  const db = new Kysely<any>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (kysely) => new PostgresIntrospector(kysely),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  })
  return { db, pending }
}

const settle = () => new Promise((resolve) => setImmediate(resolve))

t.test('concurrent probes share a check that started after they arrived', async (t) => {
  const { db, pending } = heldDatabase()
  const health = healthRoutes(db)[0]!.handler
  const ctx = { deps: { db }, now: Date.parse('2026-11-22T12:00:00Z') } as unknown as RequestContext
  const request = new Request('http://localhost/health') as never
  const answers: number[] = []
  const probe = (label: number) => Promise.resolve(health(request, ctx)).then((reply) => answers.push(label * 1000 + reply.status))

  const first = probe(1)
  await settle()
  t.equal(pending.length, 1, 'the first probe starts a check')
  const second = probe(2)
  const third = probe(3)
  await settle()
  t.equal(pending.length, 1, 'later probes do not take the check already under way')
  pending[0]!()
  await first
  await settle()
  t.same(answers, [1200], 'only the first probe is answered by the first check')
  t.equal(pending.length, 2, 'the waiting probes share one new check')
  pending[1]!(new Error('connection terminated'))
  await Promise.all([second, third])
  t.same(answers, [1200, 2503, 3503], 'both answer from the second check: 503 when it fails')
})
