// The OpenAPI document cannot drift from the code: every route that takes a body reads it through
// the very BodyDoc its OperationDoc publishes (http/body.ts readInput). Checked here from the
// outside: for each such route, a body the published schema refuses gets exactly the 400 that
// schema gives, and a media type the doc does not list gets 415.
import t from 'tap'
import * as v from 'valibot'
import { validateInput } from '../../http/body.ts'
import { HttpError } from '../../http/errors.ts'
import type { BodyDoc } from '../../http/pipeline.ts'
import { createLeadSurface } from '../../routes/leads.ts'
import { createProductSurface } from '../../routes/product.ts'
import { jsonOf, productApp } from '../support/product-support.ts'

/**
 * Routes whose body is not read through their doc, and why: the token endpoint picks the member of
 * its published union by the fields sent (each member is validated by its own schema).
 */
const NOT_THROUGH_DOC = new Set(['POST /auth/login', 'POST /auth/refresh'])

/** The 400 message the published doc gives for `input`. */
function publishedMessage(doc: BodyDoc, input: Record<string, unknown>): string {
  try {
    validateInput(doc, input)
  } catch (error) {
    if (error instanceof HttpError) return error.message
    throw error
  }
  throw new Error('the published schema accepts the sample')
}

t.test('each route validates with the schema and media types it publishes', async (t) => {
  const app = await productApp(t)
  const token = app.vars.OWNER_KEY_A!
  const members = await jsonOf(await app.call('GET', '/members', { token }))
  const agent = await jsonOf(await app.call('POST', '/agents', { token, json: { handle: 'drift-check' } }))
  const ids: Record<string, string> = {
    key_id: app.vars.ADMIN_KEY_ID_A!,
    user_id: members.members[0].user_id,
    policy_id: app.vars.POLICY_A!,
    agent_id: agent.agent_id,
    invitation_id: crypto.randomUUID(),
    list: 'newsletter',
  }
  // The lead routes answer only the organization that holds the leads (the oldest): make it A.
  await app.db.updateTable('organizations').set({ created_at: new Date(app.clock.now + 1000) }).where('id', '=', app.vars.ORG_B!).execute()
  const surfaces = [createLeadSurface(app.config), createProductSurface(app.config, { db: app.db, clock: app.clock.read, logger: { log() {} } } as never)]
  let checked = 0
  for (const route of surfaces.flatMap((surface) => surface.routes)) {
    const body = route.doc.body
    const name = `${route.method} ${route.path}`
    if (!body || NOT_THROUGH_DOC.has(name)) continue
    const path = route.path.replace(/:(\w+)/g, (_, param: string) => ids[param]!)
    for (const sample of [{ zz_not_published: 1 }, { zz_not_published: null, role: 'nobody' }]) {
      const answer = await app.call(route.method, path, { token, json: sample })
      t.equal(answer.status, 400, `${name} ${JSON.stringify(sample)}: 400`)
      t.equal((await jsonOf(answer)).error, publishedMessage(body, sample), `${name}: the message the published schema gives`)
    }
    const wrongType = await app.call(route.method, path, { token, body: 'a,b', headers: { 'content-type': 'text/csv' } })
    t.equal(wrongType.status, 415, `${name}: a media type the doc does not list is refused`)
    await wrongType.arrayBuffer()
    checked++
  }
  t.ok(checked >= 8, `${checked} routes checked`)
  await Promise.all(surfaces.map((surface) => surface.close?.()))
})

t.test('the check can fail: a schema other than the published one gives another message', async (t) => {
  const app = await productApp(t)
  const product = createProductSurface(app.config, { db: app.db, clock: app.clock.read, logger: { log() {} } } as never)
  const rotate = product.routes.find((route) => route.path === '/keys/:key_id/rotate')!.doc.body!
  const create = product.routes.find((route) => route.method === 'POST' && route.path === '/keys')!.doc.body!
  const sample = { expires_in: 'soon' }
  t.not(publishedMessage(create, sample), publishedMessage(rotate, sample), 'two schemas tell the samples apart')
  const answer = await app.call('POST', `/keys/${app.vars.ADMIN_KEY_ID_A}/rotate`, { token: app.vars.OWNER_KEY_A!, json: sample })
  t.equal((await jsonOf(answer)).error, publishedMessage(rotate, sample))
})

/** The 400 message the published query schema gives for `values` (what parseQuery answers). */
function publishedQueryMessage(schema: v.GenericSchema, values: Record<string, string>): string {
  const result = v.safeParse(schema, values)
  if (result.success) throw new Error('the published query schema accepts the sample')
  const issue = result.issues[0]
  const path = issue.path?.map((item) => String(item.key)).join('.')
  return path && issue.input === undefined ? `${path} is required` : issue.message
}

/** Routes that read their query string through the schema their doc publishes (routes/input.ts parseQuery). */
const QUERY_THROUGH_DOC = ['GET /audit']

t.test('routes that read their query through their doc answer what the published query schema says', async (t) => {
  const app = await productApp(t)
  const product = createProductSurface(app.config, { db: app.db, clock: app.clock.read, logger: { log() {} } } as never)
  const samples: Record<string, string>[] = [{ limit: '0' }, { limit: '101' }, { from: 'yesterday' }, { to: '2026-02-30T00:00:00Z' }, { type: 'policy.exploded' }, { type: '' }]
  let checked = 0
  for (const name of QUERY_THROUGH_DOC) {
    const route = product.routes.find((candidate) => `${candidate.method} ${candidate.path}` === name)
    const schema = route?.doc.query as v.GenericSchema | undefined
    t.ok(schema, `${name} publishes a query schema`)
    if (!schema) continue
    for (const sample of samples) {
      if (!(Object.keys(sample)[0]! in (schema as unknown as { entries: Record<string, unknown> }).entries)) continue
      const answer = await app.call('GET', `${route!.path}?${new URLSearchParams(sample)}`, { token: app.vars.OWNER_KEY_A })
      t.equal(answer.status, 400, `${name} ${JSON.stringify(sample)}: 400`)
      t.equal((await jsonOf(answer)).error, publishedQueryMessage(schema, sample), `${name} ${JSON.stringify(sample)}: the published message`)
      checked++
    }
  }
  t.ok(checked >= 6, `${checked} query samples checked`)
  await product.close?.()
})
