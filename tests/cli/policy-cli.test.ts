// `policy replay`: the operator command that replays an organization's logged decisions against
// draft policies from a file, run alone on a data directory and carried out by the running
// server that holds it (the file named relative to where the command was typed).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import t from 'tap'
import { runCli } from '../../cli/main.ts'
import { productOperations } from '../../server.ts'
import { createJsonLogger } from '../../log.ts'
import { openDatabase } from '../../database/connect.ts'
import { captured } from '../support/helpers.ts'
import { childEnv, startServerProcess } from '../support/process-support.ts'

t.setTimeout(600_000)
const dir = mkdtempSync(join(tmpdir(), 'steward-policy-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }

async function run(argv: string[], runEnv: Record<string, string | undefined> = env): Promise<{ code: number; out: string; err: string }> {
  return captured((io) => runCli(argv, runEnv, io, { operations: productOperations }))
}

const drafts = join(dir, 'drafts.json')
writeFileSync(drafts, JSON.stringify([{ name: 'Internal email allowed', effect: 'allow', actions: ['email.send'], condition: 'args.external == false' }]))

let orgId = ''
const logged = ['00000000-0000-4000-8000-000000000001', '00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000003']

t.before(async () => {
  const org = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { ...env, STEWARD_PASSWORD: 'correct horse battery' })
  if (org.code !== 0) throw new Error(org.err)
  orgId = org.out.trim()
  const handle = await openDatabase({ databaseUrl: null, dataDir: env.DATA_DIR, logger: createJsonLogger('silent') })
  const row = (id: string, at: string, external: boolean) => ({
    decision_id: id,
    organization_id: orgId,
    agent_id: '11111111-1111-4111-8111-111111111111',
    agent_handle: 'support-bot',
    action: 'email.send',
    resource: '',
    args: JSON.stringify({ external }),
    context: '{}',
    args_sha256: '0'.repeat(64),
    decision: 'deny' as const,
    policy_decision: 'deny' as const,
    reasons: JSON.stringify([{ rule: 'default_decision' }]),
    monitor: '{}',
    errors: '[]',
    approval_id: null,
    ruleset_revision: 0,
    requested_by: 'key:test',
    evaluated_at: new Date(at),
  })
  await handle.db
    .insertInto('decisions')
    .values([row(logged[0]!, '2026-11-01T00:00:00Z', false), row(logged[1]!, '2026-11-02T00:00:00Z', true), row(logged[2]!, '2026-11-03T00:00:00Z', false)])
    .execute()
  await handle.close()
})

const expected = () => ({
  evaluated: 3,
  changed: { 'deny→allow': 2 },
  sample: [logged[2], logged[0]].map((id, i) => ({
    decision_id: id,
    evaluated_at: i === 0 ? '2026-11-03T00:00:00.000Z' : '2026-11-01T00:00:00.000Z',
    agent: 'support-bot',
    action: 'email.send',
    resource: '',
    from: 'deny',
    to: 'allow',
    reasons: [{ policy_id: 'draft:0', version: 1, name: 'Internal email allowed', effect: 'allow', mode: 'enforce' }],
  })),
})

t.test('run alone: prints the answer as JSON on stdout, a summary on stderr', async (t) => {
  const result = await run(['policy', 'replay', '--org', orgId, '--file', drafts])
  t.equal(result.code, 0, result.err)
  t.same(JSON.parse(result.out), expected())
  t.equal(result.err, 'replayed 3 decisions; 2 would change\n')
  const windowed = await run(['policy', 'replay', '--org', orgId, '--file', drafts, '--from', '2026-11-02T00:00:00Z', '--limit', '1'])
  t.equal(windowed.code, 0, windowed.err)
  t.same(JSON.parse(windowed.out), { evaluated: 1, changed: { 'deny→allow': 1 }, sample: [expected().sample[0]] })
  // {"policies": [...]} is accepted too.
  const wrapped = join(dir, 'wrapped.json')
  writeFileSync(wrapped, JSON.stringify({ policies: [{ name: 'x', effect: 'deny', actions: ['*'] }] }))
  const deny = await run(['policy', 'replay', '--org', orgId, '--file', wrapped])
  t.same(JSON.parse(deny.out).changed, {})
})

t.test('mistakes: usage errors exit 2, failures exit 1 with one line', async (t) => {
  const help = await run(['policy', 'replay', '--help'])
  t.equal(help.code, 0)
  t.match(help.out, /--file FILE/)
  const cases: Array<[string[], number, RegExp]> = [
    [['policy', 'replay', '--org', orgId], 2, /^usage error: missing required option '--file'\n/],
    [['policy', 'replay', '--org', orgId, '--file', drafts, '--limit', '0'], 2, /^usage error: --limit must be a whole number from 1 to 100000\n/],
    [['policy', 'replay', '--org', orgId, '--file', drafts, '--from', 'yesterday'], 2, /^usage error: --from must be an RFC 3339 date-time/],
    [['policy', 'replay', '--org', orgId, '--file', drafts, '--dry'], 2, /^usage error: unknown option '--dry'\n/],
    [['policy', 'replay', '--org', 'nope', '--file', drafts], 2, /^usage error: --org must be a UUID\n/],
    [['policy', 'replay', '--org', crypto.randomUUID(), '--file', drafts], 2, /^usage error: no organization /],
    [['policy', 'replay', '--org', orgId, '--file', join(dir, 'missing.json')], 1, /^policy replay failed: cannot read .*missing\.json \(ENOENT\)\n$/],
  ]
  for (const [argv, code, message] of cases) {
    const result = await run(argv)
    t.equal(result.code, code, argv.join(' '))
    t.match(result.err, message)
    t.equal(result.out, '')
  }
  const bad = join(dir, 'bad.json')
  writeFileSync(bad, JSON.stringify([{ name: 'x', effect: 'deny', actions: ['a'], condition: 'args.x ==' }]))
  const refused = await run(['policy', 'replay', '--org', orgId, '--file', bad])
  t.equal(refused.code, 1)
  t.equal(refused.err, 'policy replay failed: Field condition does not compile (line 1, column 10): Unexpected token: EOF (at policies.0.condition)\n')
  writeFileSync(bad, '{"drafts": []}')
  const shape = await run(['policy', 'replay', '--org', orgId, '--file', bad])
  t.equal(shape.code, 1)
  t.match(shape.err, /must hold an array of draft policies/)
})

t.test('carried out by the running server, with the file named relative to here', async (t) => {
  const server = await startServerProcess(t, childEnv(env.DATA_DIR))
  const result = await run(['policy', 'replay', '--org', orgId, `--file=${relative(process.cwd(), drafts)}`], childEnv(env.DATA_DIR) as Record<string, string>)
  t.equal(result.code, 0, result.err)
  t.equal(result.err, `carried out by the running server (pid ${server.pid})\nreplayed 3 decisions; 2 would change\n`)
  t.same(JSON.parse(result.out), expected())
  server.child.kill('SIGTERM')
  await server.exited
})
