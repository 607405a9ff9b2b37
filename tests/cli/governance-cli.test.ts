// The agent and decision operator commands: agent create, list, suspend (and resume), decision list.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { createJsonLogger } from '../../log.ts'
import { createHandler } from '../../server.ts'
import { openDatabase } from '../../database/connect.ts'
import { captured, testConfig } from '../support/helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-gov-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  return captured((io) => runCli(argv, { ...env, STEWARD_PASSWORD: 'correct horse battery' }, io))
}

async function decideOnce(key: string, agent: string): Promise<any> {
  const handle = await openDatabase({ databaseUrl: null, dataDir: env.DATA_DIR, logger: createJsonLogger('silent') })
  const app = createHandler(testConfig(), { db: handle.db, clock: Date.now, logger: createJsonLogger('silent'), listenUrl: null })
  try {
    const res = await app.fetch(
      new Request('http://localhost/decisions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ agent, action: 'tickets.read' }) }),
      { remoteAddress: '127.0.0.1' },
    )
    const body = await res.json()
    return { status: res.status, body }
  } finally {
    await app.close()
    await handle.close()
  }
}

t.test('agent create, list, suspend, resume; decision list', async (t) => {
  const orgId = (await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'])).out.trim()
  const made = await run(['key', 'create', '--org', orgId, '--role', 'member'])
  t.equal(made.code, 0, made.err)
  const key = made.out.trim()

  const created = await run(['agent', 'create', '--org', orgId, '--handle', 'support-bot', '--name', 'Support'])
  t.equal(created.code, 0, created.err)
  t.match(created.out.trim(), /^[0-9a-f-]{36}$/)
  t.equal(created.err, 'created agent support-bot\n')
  const again = await run(['agent', 'create', '--org', orgId, '--handle', 'support-bot'])
  t.same([again.code, again.err], [1, 'agent create failed: An agent with handle support-bot already exists\n'])
  const bad = await run(['agent', 'create', '--org', orgId, '--handle', 'Bad Handle'])
  t.equal(bad.code, 2)
  t.match(bad.err, /--handle must be 1 to 64 characters/)
  const unknownFlag = await run(['agent', 'list', '--org', orgId, '--statuss', 'active'])
  t.equal(unknownFlag.code, 2)

  const listed = await run(['agent', 'list', '--org', orgId, '--format', 'json'])
  t.equal(listed.code, 0, listed.err)
  t.match(JSON.parse(listed.out), [{ agent_id: created.out.trim(), handle: 'support-bot', display_name: 'Support', status: 'active', last_seen_at: null }])

  const suspended = await run(['agent', 'suspend', '--org', orgId, '--handle', 'support-bot'])
  t.same([suspended.code, suspended.out], [0, 'support-bot is suspended\n'])
  const denied = await decideOnce(key, 'support-bot')
  t.same([denied.status, denied.body.decision, denied.body.reasons], [200, 'deny', [{ rule: 'agent_suspended' }]])
  t.same((await run(['agent', 'list', '--org', orgId, '--status', 'suspended', '--format', 'json'])).out.includes('support-bot'), true)

  const resumed = await run(['agent', 'suspend', '--org', orgId, '--handle', 'support-bot', '--resume'])
  t.same([resumed.code, resumed.out], [0, 'support-bot is active\n'])
  const defaulted = await decideOnce(key, 'support-bot')
  t.same(defaulted.body.reasons, [{ rule: 'default_decision' }])

  const log = await run(['decision', 'list', '--org', orgId, '--format', 'json'])
  t.equal(log.code, 0, log.err)
  const rows = JSON.parse(log.out)
  t.same(rows.map((row: any) => [row.decision_id, row.reasons]), [
    [defaulted.body.decision_id, [{ rule: 'default_decision' }]],
    [denied.body.decision_id, [{ rule: 'agent_suspended' }]],
  ])
  const text = await run(['decision', 'list', '--org', orgId, '--agent', 'support-bot', '--limit', '1'])
  t.match(text.out, /^evaluated_at +decision_id +agent +action +resource +decision +why\n/)
  t.match(text.out, /support-bot +tickets\.read +deny +default_decision\n$/)
  const badLimit = await run(['decision', 'list', '--org', orgId, '--limit', '0'])
  t.equal(badLimit.code, 2)
  const help = await run(['decision', 'list', '--help'])
  t.equal(help.code, 0)
  t.match(help.out, /--agent HANDLE/)
})
