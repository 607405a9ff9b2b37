// The approval operator commands: approval list, approval approve|deny --as EMAIL (recorded as
// that member, under the same vote rules as the API).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { createJsonLogger } from '../../log.ts'
import { createHandler } from '../../server.ts'
import { openDatabase } from '../../database/connect.ts'
import { captured, testConfig } from '../support/helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-appr-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  return captured((io) => runCli(argv, { ...env, STEWARD_PASSWORD: 'correct horse battery' }, io))
}

async function withDb<T>(work: (db: any) => Promise<T>): Promise<T> {
  const handle = await openDatabase({ databaseUrl: null, dataDir: env.DATA_DIR, logger: createJsonLogger('silent') })
  try {
    return await work(handle.db)
  } finally {
    await handle.close()
  }
}

async function decideOnce(key: string, body: Record<string, unknown>): Promise<any> {
  return withDb(async (db) => {
    const app = createHandler(testConfig(), { db, clock: Date.now, logger: createJsonLogger('silent'), listenUrl: null })
    try {
      const res = await app.fetch(
        new Request('http://localhost/decisions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        { remoteAddress: '127.0.0.1' },
      )
      return await res.json()
    } finally {
      await app.close()
    }
  })
}

t.test('approval list, approve as a member, then the agent uses it once', async (t) => {
  const orgId = (await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'])).out.trim()
  const key = (await run(['key', 'create', '--org', orgId, '--role', 'member'])).out.trim()
  t.equal((await run(['agent', 'create', '--org', orgId, '--handle', 'payer'])).code, 0)
  await withDb((db) => sql`update organizations set default_decision = 'require_approval', ruleset_revision = ruleset_revision + 1 where id = ${orgId}`.execute(db))
  const ask = { agent: 'payer', action: 'payments.refund', args: { amount: 5 } }
  const first = await decideOnce(key, ask)
  t.equal(first.decision, 'require_approval', JSON.stringify(first))
  const id = first.approval.approval_id

  const listed = await run(['approval', 'list', '--org', orgId, '--format', 'json'])
  t.equal(listed.code, 0, listed.err)
  t.match(JSON.parse(listed.out), [{ approval_id: id, status: 'pending', agent: 'payer', action: 'payments.refund', args: { amount: 5 } }])
  const text = await run(['approval', 'list', '--org', orgId])
  t.match(text.out, /^created_at +approval_id +status +agent +action +resource +expires_at\n/)

  const stranger = await run(['approval', 'approve', '--org', orgId, '--id', id, '--as', 'nobody@acme.example'])
  t.equal(stranger.code, 2)
  const approved = await run(['approval', 'approve', '--org', orgId, '--id', id, '--as', 'ops@acme.example', '--note', 'fine'])
  t.same([approved.code, approved.out], [0, 'approved\n'], approved.err)
  const twice = await run(['approval', 'deny', '--org', orgId, '--id', id, '--as', 'ops@acme.example'])
  t.same([twice.code, twice.err], [1, 'approval deny failed: This approval is no longer pending: it is approved\n'])
  const vote = await withDb((db) => db.selectFrom('approval_votes').selectAll().where('approval_id', '=', id).executeTakeFirstOrThrow())
  t.match(vote, { vote: 'approve', note: 'fine' })

  const used = await decideOnce(key, { ...ask, approval_id: id })
  t.same([used.decision, used.reasons], ['allow', [{ rule: 'approval' }]])
  const again = await decideOnce(key, { ...ask, approval_id: id })
  t.same([again.decision, again.reasons], ['deny', [{ rule: 'approval_unusable' }]])
})
