// The operator command line, run in-process with captured output: strict options and help for
// every command, the password's sources, the one-Owner rule, the key listing, and exports that
// fail cleanly. PGlite in a temp DATA_DIR, or a scratch database on TEST_DATABASE_URL.
import { BY_OPERATOR } from '../../storage/audit.ts'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { createScratchDatabase } from '../../bench/lib.ts'
import type { Io } from '../../cli/command.ts'
import { commands, runCli } from '../../cli/main.ts'
import { silentLogger } from '../../log.ts'
import { openDatabase } from '../../database/connect.ts'
import { createApiKey, recordKeyUses } from '../../storage/keys.ts'
import { findUserByEmail } from '../../storage/users.ts'
import { captured, pgliteTemplate, TEST_DATABASE_URL } from '../support/helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const scratch = TEST_DATABASE_URL ? await createScratchDatabase(TEST_DATABASE_URL, 'steward_cli') : null
if (scratch) t.teardown(() => scratch.drop())
const database: Record<string, string> = scratch ? { DATABASE_URL: scratch.url } : { DATA_DIR: join(dir, 'data') }
const env = { ...database, PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn' }
if (database.DATA_DIR) {
  // Start from the migrated template, as the other test files do: a fresh initdb costs seconds.
  const { PGlite } = await import('@electric-sql/pglite')
  await (await PGlite.create({ dataDir: database.DATA_DIR, loadDataDir: await pgliteTemplate() })).close()
}
/** A database nobody listens on: a command that touches it fails with exit 1, not 0 or 2. */
const UNREACHABLE = { DATABASE_URL: 'postgres://steward@127.0.0.1:1/none', PASSWORD_HASH_COST: '10' }
const PASSWORD = 'correct horse battery'

interface Result {
  code: number
  out: string
  err: string
}

async function run(argv: string[], options: { env?: Record<string, string>; stdin?: Io['stdin'] } = {}): Promise<Result> {
  return captured((io) => runCli(argv, options.env ?? env, { ...io, ...(options.stdin ? { stdin: options.stdin } : {}) }))
}

async function withDb<T>(work: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>): Promise<T> {
  const handle = await openDatabase({ databaseUrl: database.DATABASE_URL ?? null, dataDir: database.DATA_DIR ?? "", logger: silentLogger })
  try {
    return await work(handle.db)
  } finally {
    await handle.close()
  }
}

t.test('help and strict options (nothing opens the database)', async (t) => {
  t.test('a command group alone lists its commands and exits 2; with --help it exits 0', async (t) => {
    const alone = await run(['key'], { env: UNREACHABLE })
    t.equal(alone.code, 2)
    t.equal(alone.out, '')
    t.match(alone.err, /^usage: steward key <command> \[options\]\n/)
    for (const name of ['key create', 'key rotate', 'key revoke', 'key list']) t.match(alone.err, `\n  ${name}  `)
    const help = await run(['key', '--help'], { env: UNREACHABLE })
    t.equal(help.code, 0)
    t.equal(help.err, '')
    t.equal(help.out, alone.err)
  })

  t.test('key create --help prints its usage and every option, without configuration or database', async (t) => {
    const result = await run(['key', 'create', '--help'], { env: { ...UNREACHABLE, PORT: 'not a port' } })
    t.equal(result.code, 0)
    t.equal(result.err, '')
    t.equal(
      result.out,
      [
        'usage: steward key create --org ID --role ROLE [--name NAME] [--expires-in-days DAYS]',
        '',
        'Create an API key; prints the secret once (stdout).',
        '',
        'options:',
        "  --org ID                the organization's id, as org create prints it (required)",
        '  --role ROLE             the role granted (required; one of owner, admin, manager, member, viewer)',
        '  --name NAME             a label shown in listings (default: API key)',
        '  --expires-in-days DAYS  stop the key after DAYS days (1 to 3650; default: never)',
        '  -h, --help              show this help and exit',
        '',
      ].join('\n'),
    )
  })

  t.test('every command answers --help and -h with exit 0, describing each of its options', async (t) => {
    for (const command of commands) {
      for (const flag of ['--help', '-h']) {
        const result = await run([...command.name.split(' '), flag], { env: UNREACHABLE })
        t.equal(result.code, 0, `${command.name} ${flag}`)
        t.match(result.out, new RegExp(`^usage: steward ${command.name}`))
        for (const name of Object.keys(command.options)) t.match(result.out, new RegExp(`\\n  --${name}\\b.* [a-z]`), `${command.name} describes --${name}`)
      }
    }
    const viaHelp = await run(['help', 'leads', 'export'], { env: UNREACHABLE })
    t.equal(viaHelp.code, 0)
    t.match(viaHelp.out, /^usage: steward leads export \[--list LIST\] \[--format FORMAT\] \[--output FILE\]\n/)
  })

  t.test('an unknown option is refused with exit 2 and the usage, before any work', async (t) => {
    const result = await run(['leads', 'export', '--lst', 'demo'], { env: UNREACHABLE })
    t.equal(result.code, 2)
    t.equal(result.out, '')
    t.equal(
      result.err,
      "usage error: unknown option '--lst'\nusage: steward leads export [--list LIST] [--format FORMAT] [--output FILE]\nRun 'steward leads export --help' for the options.\n",
    )
  })

  t.test('a missing required option, a missing value, a stray argument and a bad choice are usage errors', async (t) => {
    const cases: Array<[string[], string]> = [
      [['key', 'create', '--role', 'admin'], "usage error: missing required option '--org'\n"],
      [['key', 'create', '--org=', '--role', 'admin'], "usage error: missing required option '--org'\n"],
      [['key', 'list', '--org'], "usage error: option '--org' needs a value (write --org=VALUE for one that starts with a dash)\n"],
      [['key', 'revoke', '--key', '--help2'], "usage error: option '--key' needs a value (write --key=VALUE for one that starts with a dash)\n"],
      [['key', 'revoke', 'abc'], "usage error: unexpected argument 'abc'\n"],
      [['leads', 'export', '--list', 'vip'], 'usage error: --list must be demo, newsletter or all\n'],
      [['key', 'create', '--org', 'x', '--role', 'root'], 'usage error: --role must be owner, admin, manager, member or viewer\n'],
      [['migrate', '--dry-run'], "usage error: unknown option '--dry-run'\n"],
    ]
    for (const [argv, first] of cases) {
      const result = await run(argv, { env: UNREACHABLE })
      t.equal(result.code, 2, argv.join(' '))
      t.equal(result.err.slice(0, result.err.indexOf('\n') + 1), first, argv.join(' '))
      t.match(result.err, /\nusage: steward /)
    }
  })

  t.test('unknown commands exit 2 with the list of commands', async (t) => {
    const unknown = await run(['keys'], { env: UNREACHABLE })
    t.equal(unknown.code, 2)
    t.match(unknown.err, /^usage error: unknown command 'keys'\nusage: steward <command> \[options\]\n/)
    const sub = await run(['key', 'delete'], { env: UNREACHABLE })
    t.equal(sub.code, 2)
    t.match(sub.err, /^usage error: unknown command 'key delete'\nusage: steward key <command> \[options\]\n/)
    const none = await run([], { env: UNREACHABLE })
    t.equal(none.code, 2)
    t.match(none.err, /^usage: steward <command> \[options\]\n/)
    const help = await run(['--help'], { env: UNREACHABLE })
    t.equal(help.code, 0)
    t.equal(help.out, none.err)
  })
})

const NO_PASSWORD = 'usage error: no password was given: set STEWARD_PASSWORD, or write the password on standard input (a terminal prompts for it)\n'

t.test('passwords: a clear error when none is given, stdin when piped, never argv by default', async (t) => {
  const noInput = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { env: UNREACHABLE })
  t.equal(noInput.code, 2)
  t.equal(noInput.err.slice(0, noInput.err.indexOf('\n') + 1), NO_PASSWORD)

  const emptyPipe = new PassThrough()
  emptyPipe.end()
  const empty = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { env: UNREACHABLE, stdin: emptyPipe })
  t.equal(empty.code, 2)
  t.equal(empty.err.slice(0, empty.err.indexOf('\n') + 1), NO_PASSWORD)

  const org = await run(['org', 'create', '--name', 'Acme', '--owner-email', 'ops@acme.example'], { env: { ...env, STEWARD_PASSWORD: PASSWORD } })
  t.equal(org.code, 0, org.err)
  const orgId = org.out.trim()

  const newUser = await run(['user', 'add', '--org', orgId, '--email', 'dev@acme.example', '--role', 'viewer'])
  t.equal(newUser.code, 2)
  t.equal(newUser.err.slice(0, newUser.err.indexOf('\n') + 1), NO_PASSWORD)
  t.equal(await withDb((db) => findUserByEmail(db, 'dev@acme.example')), null, 'no account was created')

  const piped = new PassThrough()
  piped.end('a piped password\n')
  const added = await run(['user', 'add', '--org', orgId, '--email', 'dev@acme.example', '--role', 'viewer'], { stdin: piped })
  t.equal(added.code, 0, added.err)
  t.equal(added.out, `dev@acme.example is viewer of ${orgId}\n`)
  t.equal(added.err, '', 'no prompt on a pipe')
})

t.test('user add keeps the rule that an organization always has an Owner', async (t) => {
  const org = await run(['org', 'create', '--name', 'Solo', '--owner-email', 'solo@acme.example'], { env: { ...env, STEWARD_PASSWORD: PASSWORD } })
  t.equal(org.code, 0, org.err)
  const orgId = org.out.trim()
  const demote = await run(['user', 'add', '--org', orgId, '--email', 'solo@acme.example', '--role', 'admin'])
  t.equal(demote.code, 1)
  t.equal(demote.out, '')
  t.equal(demote.err, `user add failed: solo@acme.example is the only Owner of ${orgId}; make another member Owner first (user add --role owner)\n`)

  const second = await run(['user', 'add', '--org', orgId, '--email', 'second@acme.example', '--role', 'owner'], { env: { ...env, STEWARD_PASSWORD: PASSWORD } })
  t.equal(second.code, 0, second.err)
  const now = await run(['user', 'add', '--org', orgId, '--email', 'solo@acme.example', '--role', 'admin'])
  t.equal(now.code, 0, 'with a second Owner, the first may step down')
  t.equal(now.out, `solo@acme.example is admin of ${orgId}\n`)
  const last = await run(['user', 'add', '--org', orgId, '--email', 'second@acme.example', '--role', 'member'])
  t.equal(last.code, 1)
  t.match(last.err, /^user add failed: second@acme\.example is the only Owner of /)
})

t.test('key list shows creator, expiry, last use and a rotating key with its end; --format json', async (t) => {
  const org = await run(['org', 'create', '--name', 'Keys', '--owner-email', 'keys@acme.example'], { env: { ...env, STEWARD_PASSWORD: PASSWORD } })
  const orgId = org.out.trim()
  const created = await run(['key', 'create', '--org', orgId, '--role', 'admin', '--name', 'deploy', '--expires-in-days', '30'])
  t.equal(created.code, 0, created.err)
  const secret = created.out.trim()
  const usedAt = Date.parse('2026-01-02T03:04:05Z')
  const userKey = await withDb(async (db) => {
    const owner = (await findUserByEmail(db, 'keys@acme.example'))!
    const { key } = await createApiKey(db, { organizationId: orgId, name: 'by a person', role: 'viewer', createdByUserId: owner.id, createdByKeyId: null, expiresAt: null }, new Date(), BY_OPERATOR)
    await recordKeyUses(db, new Map([[key.id, usedAt]]))
    return key
  })

  const json = await run(['key', 'list', '--org', orgId, '--format', 'json'])
  t.equal(json.code, 0, json.err)
  const rows = JSON.parse(json.out) as Array<Record<string, unknown>>
  t.equal(rows.length, 2)
  const deploy = rows.find((row) => row.name === 'deploy')!
  t.match(deploy, { prefix: secret.slice(0, 14), role: 'admin', creator: 'operator', last_used_at: null, state: 'active', stops_at: null, replaced_by: null })
  t.ok(Math.abs(Date.parse(String(deploy.expires_at)) - (Date.now() + 30 * 86_400_000)) < 600_000, 'expires in 30 days')
  t.same(rows.find((row) => row.key_id === userKey.id), {
    key_id: userKey.id,
    prefix: userKey.display_prefix,
    role: 'viewer',
    name: 'by a person',
    creator: 'keys@acme.example',
    created_at: userKey.created_at.toISOString(),
    expires_at: null,
    last_used_at: '2026-01-02T03:04:05.000Z',
    state: 'active',
    stops_at: null,
    replaced_by: null,
  })
  t.notOk(json.out.includes(secret), 'never the secret')

  const rotated = await run(['key', 'rotate', '--key', String(deploy.key_id), '--grace-seconds', '3600'])
  t.equal(rotated.code, 0, rotated.err)
  const table = await run(['key', 'list', '--org', orgId])
  t.equal(table.code, 0, table.err)
  const lines = table.out.trimEnd().split('\n')
  t.equal(lines.length, 4)
  t.same(lines[0]!.split(/ +/), ['key_id', 'prefix', 'role', 'name', 'creator', 'expires', 'last_used', 'state'])
  const oldLine = lines.find((line) => line.startsWith(String(deploy.key_id)))!
  const [, expires, stops] = /  (\S+)  +never  +rotating \(stops (\S+)\)$/.exec(oldLine) ?? []
  t.equal(stops, expires, `the grace shortened the expiry, and the state says when it stops: ${oldLine}`)
  t.ok(Math.abs(Date.parse(String(stops)) - (Date.now() + 3_600_000)) < 600_000, 'it stops after the grace')
  t.match(String(stops), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
  const personLine = lines.find((line) => line.startsWith(userKey.id))!
  t.match(personLine, /  viewer  by a person  keys@acme\.example  never  +2026-01-02T03:04:05Z  active$/)
  for (const column of ['prefix', 'role', 'name', 'creator', 'expires', 'last_used', 'state']) {
    const at = lines[0]!.indexOf(column)
    for (const line of lines.slice(1)) t.equal(line[at - 1], ' ', `${column} starts at the same place on every line`)
    for (const line of lines.slice(1)) t.not(line[at], ' ')
  }
})

t.test('leads export: a clear one-line error for a bad path, and no file unless the export completed', async (t) => {
  const missing = join(dir, 'no-such-dir', 'x.csv')
  const bad = await run(['leads', 'export', '--output', missing])
  t.equal(bad.code, 1)
  t.equal(bad.out, '')
  t.equal(bad.err, `leads export failed: cannot write ${missing}: its directory does not exist (ENOENT)\n`)

  const asDir = await run(['leads', 'export', '--output', dir])
  t.equal(asDir.code, 1)
  t.equal(asDir.err, `leads export failed: cannot write ${dir}: it is a directory\n`)

  const outDir = join(dir, 'exports')
  mkdirSync(outDir)
  const target = join(outDir, 'leads.csv')
  writeFileSync(target, 'yesterday\n')
  const failed = await run(['leads', 'export', '--output', target], { env: UNREACHABLE })
  t.equal(failed.code, 1)
  t.match(failed.err, /^leads export failed: .*\n$/)
  t.equal(readFileSync(target, 'utf8'), 'yesterday\n', 'a failed export leaves the previous file as it was')
  t.same(readdirSync(outDir), ['leads.csv'], 'and no partial file beside it')

  const done = await run(['leads', 'export', '--output', target])
  t.equal(done.code, 0, done.err)
  t.equal(done.err, `wrote 0 leads to ${target}\n`)
  t.equal(readFileSync(target, 'utf8'), 'list,id,email,first_name,last_name,company,linkedin,phone,source,analytics_distinct_id,via,received_at,status,unsubscribe_url\r\n')
  t.equal(statSync(target).mode & 0o777, 0o600, 'leads are personal data: readable by the owner only')
  t.same(readdirSync(outDir), ['leads.csv'])
})
