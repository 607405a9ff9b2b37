// Provisioning from zero through the operator commands, then a working request with the key.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { createJsonLogger } from '../../log.ts'
import { createHandler } from '../../server.ts'
import { openDatabase } from '../../database/connect.ts'
import { captured, testConfig } from '../support/helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }

async function run(argv: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  const saved = process.env.STEWARD_PASSWORD
  if (extraEnv.STEWARD_PASSWORD) process.env.STEWARD_PASSWORD = extraEnv.STEWARD_PASSWORD
  try {
    return await captured((io) => runCli(argv, { ...env, ...extraEnv }, io))
  } finally {
    if (saved === undefined) delete process.env.STEWARD_PASSWORD
    else process.env.STEWARD_PASSWORD = saved
  }
}

t.test('org create, key create, key list, user add, key rotate, key revoke', async (t) => {
  const org = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { STEWARD_PASSWORD: 'correct horse battery' })
  t.equal(org.code, 0, org.err)
  const orgId = org.out.trim()
  t.match(orgId, /^[0-9a-f-]{36}$/)

  const key = await run(['key', 'create', '--org', orgId, '--role', 'admin', '--name', 'bootstrap', '--expires-in-days', '30'])
  t.equal(key.code, 0, key.err)
  const secret = key.out.trim()
  t.match(secret, /^stw_key_[a-z2-7]{39}$/)
  t.notMatch(key.err, /stw_key_/, 'the secret goes to stdout only')

  const list = await run(['key', 'list', '--org', orgId, '--format', 'json'])
  const listed = JSON.parse(list.out) as Array<{ key_id: string; prefix: string; role: string; name: string; state: string }>
  t.match(listed, [{ prefix: secret.slice(0, 14), role: 'admin', name: 'bootstrap', state: 'active' }])
  t.notOk(list.out.includes(secret))

  const user = await run(['user', 'add', '--org', orgId, '--email', 'dev@acme.example', '--role', 'viewer'], { STEWARD_PASSWORD: 'another long password' })
  t.equal(user.code, 0, user.err)

  const short = await run(['org', 'create', '--name', 'X', '--owner-email', 'x@acme.example'], { STEWARD_PASSWORD: 'short' })
  t.equal(short.code, 2)
  t.match(short.err, /at least 12 characters/)

  const badRole = await run(['key', 'create', '--org', orgId, '--role', 'root'])
  t.equal(badRole.code, 2)

  // The key works against the API on the same database.
  const handle = await openDatabase({ databaseUrl: null, dataDir: env.DATA_DIR, logger: createJsonLogger('silent') })
  const app = createHandler(testConfig({ PASSWORD_HASH_COST: '10' }), { db: handle.db, clock: Date.now, logger: createJsonLogger('silent'), listenUrl: null })
  const res = await app.fetch(new Request(`http://localhost/policies?organization_id=${orgId}`, { headers: { authorization: `Bearer ${secret}` } }), { remoteAddress: '127.0.0.1' })
  t.equal(res.status, 200)
  t.same(await res.json(), { policies: [], next_cursor: null })
  const login = await app.fetch(
    new Request('http://localhost/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'dev@acme.example', password: 'another long password' }) }),
    { remoteAddress: '127.0.0.1' },
  )
  t.equal(login.status, 200)
  await login.body?.cancel()
  await app.close()
  await handle.close()

  const keyId = listed[0]!.key_id
  const rotated = await run(['key', 'rotate', '--key', keyId])
  t.equal(rotated.code, 0, rotated.err)
  t.match(rotated.out.trim(), /^stw_key_/)
  const revoked = await run(['key', 'revoke', '--key', keyId])
  t.equal(revoked.out, `${keyId} was already revoked\n`)
  const after = await run(['key', 'list', '--org', orgId])
  t.match(after.out, /  revoked\n/)
  t.match(after.out, /  active\n/)
})
