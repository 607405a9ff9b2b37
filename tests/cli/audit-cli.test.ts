// The audit operator commands: operator commands are recorded with actor operator; audit export
// (NDJSON and CSV, exact contents, paged, recorded) and audit prune (refuses without an export,
// deletes whole sealed ranges after one). Runs on the test database (PGlite or PostgreSQL): the
// commands are handed it (runCli's `database`), as they are inside a running server.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'kysely'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { csvCell, exportAuditEvents } from '../../cli/audit.ts'
import { runCli } from '../../cli/main.ts'
import { BY_OPERATOR, recordEvent } from '../../storage/audit.ts'
import { captured, openTestDatabase } from '../support/helpers.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-audit-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const database = await openTestDatabase(t)
const { db } = database
const env = { DATA_DIR: join(dir, 'data'), PASSWORD_HASH_COST: '10', LOG_LEVEL: 'warn', STEWARD_PASSWORD: 'correct horse battery' }

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  return captured((io) => runCli(argv, env, io, { database }))
}

async function rows(orgId: string): Promise<any[]> {
  const found = await db.selectFrom('audit_events').selectAll().where('organization_id', '=', orgId).orderBy('event_id').execute()
  return found.map((row) => ({ ...row, event_id: Number(row.event_id), data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data }))
}

const org = await run(['org', 'create', '--name', 'Audited', '--owner-email', 'ops@audited.example'])
const orgId = org.out.trim()
const other = (await run(['org', 'create', '--name', 'Other', '--owner-email', 'ops@other.example'])).out.trim()

t.test('operator commands are recorded with actor operator', async (t) => {
  t.equal(org.code, 0, org.err)
  const key = await run(['key', 'create', '--org', orgId, '--role', 'admin', '--name', '=cmd|calc'])
  t.equal(key.code, 0, key.err)
  t.equal((await run(['agent', 'create', '--org', orgId, '--handle', 'bot'])).code, 0)
  t.equal((await run(['agent', 'suspend', '--org', orgId, '--handle', 'bot'])).code, 0)
  const events = await rows(orgId)
  t.same(events.map((e) => e.type), ['member.added', 'key.created', 'agent.created', 'agent.suspended'])
  for (const event of events) {
    t.equal(event.actor_type, 'operator', event.type)
    t.equal(event.actor_id, null)
    t.equal(event.request_id, null)
  }
  t.notOk(JSON.stringify(events).includes(key.out.trim()), 'the key secret is in no event')
  t.match(events[1].data, { name: '=cmd|calc', role: 'admin' })
})

t.test('audit export: NDJSON with the exact events, oldest first, recorded', async (t) => {
  const file = join(dir, 'events.ndjson')
  const before = await rows(orgId)
  const result = await run(['audit', 'export', '--org', orgId, '--format', 'ndjson', '--output', file])
  t.equal(result.code, 0, result.err)
  t.equal(result.err, `wrote ${before.length} events to ${file}\n`, 'no progress when stderr is not a terminal')
  const lines = readFileSync(file, 'utf8').split('\n')
  t.equal(lines.pop(), '', 'ends with a newline')
  t.same(
    lines.map((line) => JSON.parse(line)),
    before.map((e) => ({
      event_id: e.event_id,
      organization_id: orgId,
      occurred_at: new Date(e.occurred_at).toISOString(),
      actor: { type: e.actor_type, id: e.actor_id },
      type: e.type,
      target: { type: e.target_type, id: e.target_id },
      data: e.data,
      request_id: e.request_id,
    })),
  )
  t.same(Object.keys(JSON.parse(lines[0]!)), ['event_id', 'organization_id', 'occurred_at', 'actor', 'type', 'target', 'data', 'request_id'])
  const exports = await db.selectFrom('audit_exports').selectAll().where('organization_id', '=', orgId).execute()
  t.equal(exports.length, 1)
  t.equal(Number(exports[0]!.through_event_id), before[before.length - 1].event_id)
  t.equal(exports[0]!.format, 'ndjson')
  const after = await rows(orgId)
  t.equal(after.length, before.length + 1)
  t.match(after[after.length - 1], { type: 'audit.exported', actor_type: 'operator', actor_id: null, data: { through_event_id: before[before.length - 1].event_id, events: before.length, format: 'ndjson', complete: true } })
  t.same((await rows(other)).map((e) => e.type), ['member.added'], "the other organization's events are untouched and not exported")
})

t.test('audit export: CSV with a header, RFC 4180 quoting, data as JSON, formulas neutralised', async (t) => {
  await recordEvent(db, { organizationId: orgId, actor: BY_OPERATOR.actor, type: 'settings.changed', target: { type: 'organization', id: orgId }, data: { changes: { name: '+SUM(A1), "quoted"\nline' } }, occurredAt: new Date('2026-11-01T00:00:00Z') })
  const events = await rows(orgId)
  const result = await run(['audit', 'export', '--org', orgId, '--format', 'csv'])
  t.equal(result.code, 0, result.err)
  const expected =
    'event_id,organization_id,occurred_at,actor_type,actor_id,type,target_type,target_id,data,request_id\r\n' +
    events
      .map((e) =>
        [e.event_id, e.organization_id, new Date(e.occurred_at).toISOString(), e.actor_type, e.actor_id, e.type, e.target_type, e.target_id, JSON.stringify(e.data), e.request_id]
          .map((cell) => csvCell(cell))
          .join(',') + '\r\n',
      )
      .join('')
  t.equal(result.out, expected)
  const last = result.out.split('\r\n').filter(Boolean).at(-1)!
  t.ok(last.includes('"{""changes"":{""name"":""+SUM(A1), \\""quoted\\""\\nline""}}"'), 'data is one quoted JSON cell')
  // The formula rule, cell by cell.
  t.equal(csvCell('=cmd|calc'), "'=cmd|calc")
  t.equal(csvCell('+1'), "'+1")
  t.equal(csvCell('-1'), "'-1")
  t.equal(csvCell('@SUM(A1)'), "'@SUM(A1)")
  t.equal(csvCell('a,b'), '"a,b"')
  t.equal(csvCell('say "hi"'), '"say ""hi"""')
  t.equal(csvCell(null), '')
  t.equal(csvCell(42), '42')
})

t.test('audit export pages by event_id and honours --from/--to (a partial export)', async (t) => {
  const out = new PassThrough()
  let text = ''
  out.on('data', (chunk) => (text += chunk))
  const result = await exportAuditEvents(db, { organizationId: orgId, format: 'ndjson', from: null, to: null, out, progress: null, pageSize: 2 })
  const all = await rows(orgId)
  t.equal(result.events, all.length)
  t.equal(result.pages, Math.ceil(all.length / 2), 'pages of 2')
  t.same(text.trim().split('\n').map((line) => JSON.parse(line).event_id), all.map((e) => e.event_id))
  const partial = await run(['audit', 'export', '--org', orgId, '--from', '2026-10-01T00:00:00Z', '--to', '2026-11-02T00:00:00Z'])
  t.equal(partial.code, 0, partial.err)
  t.same(partial.out.trim().split('\n').map((line) => JSON.parse(line).type), ['settings.changed'])
  t.match((await rows(orgId)).at(-1), { type: 'audit.exported', data: { complete: false, events: 1 } })
  for (const [argv, message] of [
    [['--from', 'yesterday'], '--from must be an RFC 3339 date-time'],
    [['--from', '2026-02-01T00:00:00Z', '--to', '2026-01-01T00:00:00Z'], '--from must be before --to'],
    [['--format', 'xml'], '--format'],
  ] as const) {
    const bad = await run(['audit', 'export', '--org', orgId, ...argv])
    t.equal(bad.code, 2)
    t.match(bad.err, message)
  }
  const missing = await run(['audit', 'export', '--org', crypto.randomUUID()])
  t.equal(missing.code, 2)
  t.match(missing.err, /no organization/)
})

t.test('audit prune: nothing without seals; refuses without an export; deletes whole sealed ranges after one', async (t) => {
  const noSeal = await run(['audit', 'prune', '--org', orgId])
  t.equal(noSeal.code, 0)
  t.equal(noSeal.out, 'nothing pruned: the audit log has no seal yet, and only sealed ranges are deleted\n')
  // Age everything so far past a 1-day retention, then seal it: a seal closes every transaction below xid_to.
  await sql`update organizations set audit_retention_days = 1 where id = ${orgId}`.execute(db)
  await sql`update audit_events set occurred_at = occurred_at - interval '30 days' where organization_id = ${orgId}`.execute(db)
  await recordEvent(db, { organizationId: orgId, actor: BY_OPERATOR.actor, type: 'key.revoked', target: { type: 'key', id: null }, data: { late: true }, occurredAt: new Date(Date.now() - 40 * 86_400_000) })
  const hash = 'a'.repeat(64)
  await sql`insert into audit_seals (organization_id, seal_id, xid_from, xid_to, events, decisions, events_sha256, decisions_sha256, prev_sha256, sha256, sealed_at)
    values (${orgId}, 1, 0, pg_current_xact_id()::text::bigint, 0, 0, ${hash}, ${hash}, ${hash}, ${hash}, now())`.execute(db)
  const sealed = await rows(orgId)
  // The newest complete export was before the late event: it is not covered.
  const refused = await run(['audit', 'prune', '--org', orgId])
  t.equal(refused.code, 1)
  t.equal(refused.err, `audit prune failed: 3 event(s) older than the retention (1 days) have not been exported: export first (steward audit export --org ${orgId} --output FILE), then prune again; nothing was deleted\n`)
  t.equal((await rows(orgId)).length, sealed.length, 'nothing deleted')
  const exported = await run(['audit', 'export', '--org', orgId, '--output', join(dir, 'before-prune.ndjson')])
  t.equal(exported.code, 0, exported.err)
  const pruned = await run(['audit', 'prune', '--org', orgId])
  t.equal(pruned.code, 0, pruned.err)
  t.equal(pruned.out, `pruned ${sealed.length} event(s) through seal 1 (older than 1 days)\n`)
  const left = await rows(orgId)
  t.same(left.map((e) => e.type), ['audit.exported', 'audit.pruned'], 'the sealed range is gone; the export after the seal stays')
  t.match(left[1], { actor_type: 'operator', data: { through_seal_id: 1, deleted: sealed.length } })
  t.ok((await rows(other)).length === 1, 'the other organization keeps its events')
  // Again: nothing left to prune in a sealed range.
  const again = await run(['audit', 'prune', '--org', orgId])
  t.equal(again.code, 0)
  t.equal(again.out, 'nothing pruned: no sealed range is wholly older than 1 days\n')
})

t.test('the commands are in the help', async (t) => {
  const help = await run(['help', 'audit'])
  t.match(help.out + help.err, /audit export/)
  t.match(help.out + help.err, /audit prune/)
})
