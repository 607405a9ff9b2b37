// Reports bench: 1,000,000 logged decisions of one organization over 30 days, in 2,000-row transactions (20 agents, 84
// actions, three outcomes, a policy or a rule as the reason; a second organization's rows beside
// them), then the decisions-over-time report (GET /reports/decisions, through the service it
// calls) over those 30 days, by day in Europe/Paris, grouped by outcome. Timed twice in one run:
// from the log alone (the rollup not yet filled: what a report costs before the background pass
// catches up) and once the rollup holds every row. The goal is ≤ 200 ms on PostgreSQL.
//
//   DATABASE_URL=postgres://… node --import tsx bench/reports.ts [--decisions 1000000] [--runs 5]
import os from 'node:os'
import { sql } from 'kysely'
import { parseScriptArgs } from '../cli/command.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { ensureDecisionPartitions } from '../database/partitions.ts'
import { silentLogger } from '../log.ts'
import { createReports, type Group } from '../services/reports.ts'
import { createOrganization } from '../storage/organizations.ts'
import { rollUpChunk } from '../storage/report-rollup.ts'

const args = parseScriptArgs({ decisions: { type: 'string' }, runs: { type: 'string' } })
const DECISIONS = Number(args.decisions ?? 1_000_000)
const RUNS = Number(args.runs ?? 5)
/** Rows per insert statement (and transaction): the log's rows arrive in many transactions, as the writer's batches do (and a rollup chunk holds whole transactions). */
const INSERT_ROWS = 2_000
const DAYS = 30
const url = process.env.DATABASE_URL ?? 'memory://'

const loadAtStart = os.loadavg()[0]!
const handle = await openDatabase({ databaseUrl: url, dataDir: '', logger: silentLogger })
const db = handle.db
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const ms = (value: number) => `${value.toFixed(value < 10 ? 1 : 0)} ms`
try {
  await migrateToLatest(db)
  const now = new Date('2026-12-06T00:00:00Z')
  for (let month = 0; month < 3; month++) await ensureDecisionPartitions(db, new Date(Date.UTC(2026, 9 + month, 1)))
  const org = await createOrganization(db, `reports bench ${crypto.randomUUID().slice(0, 8)}`, now)
  const other = await createOrganization(db, `reports bench other ${crypto.randomUUID().slice(0, 8)}`, now)
  const policies = Array.from({ length: 10 }, () => crypto.randomUUID())
  const spacing = (DAYS * 86_400) / DECISIONS // seconds between two decisions
  const insertStart = performance.now()
  for (let first = 1; first <= DECISIONS; first += INSERT_ROWS) {
    const last = Math.min(DECISIONS, first + INSERT_ROWS - 1)
    await db.transaction().execute(async (trx) => {
      await sql`set local statement_timeout = 0`.execute(trx)
      // One row in ten belongs to the other organization: the report must skip them.
      await sql`
        insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256,
          decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
        select gen_random_uuid(), case when n % 10 = 0 then ${other.id}::uuid else ${org.id}::uuid end,
          ('00000000-0000-4000-8000-' || lpad((n % 20)::text, 12, '0'))::uuid, 'bot-' || (n % 20), 'svc' || (n % 12) || '.act' || (n % 7),
          'order/' || n, jsonb_build_object('amount', n % 500, 'currency', 'EUR'), jsonb_build_object('on_behalf_of', 'ada@example.com'), repeat('0', 64),
          o.outcome, o.outcome, r.reasons, jsonb_build_object('decision', o.outcome, 'reasons', r.reasons), '[]'::jsonb, null, 1, 'key:bench',
          ${now}::timestamptz - make_interval(secs => n * ${spacing}::float8)
        from generate_series(${first}::int, ${last}::int) as n
        cross join lateral (select (array['allow','deny','require_approval'])[1 + n % 3] as outcome) o
        cross join lateral (select case when n % 4 = 0 then '[{"rule":"default_decision"}]'::jsonb
          else jsonb_build_array(jsonb_build_object('policy_id', (${`{${policies.join(',')}}`}::uuid[])[1 + n % 10], 'version', 1, 'name', 'p', 'effect', o.outcome, 'mode', 'enforce')) end as reasons) r`.execute(trx)
    })
  }
  const insertMs = performance.now() - insertStart
  await db.transaction().execute(async (trx) => {
    await sql`set local statement_timeout = 0`.execute(trx)
    await sql`analyze decisions`.execute(trx)
  })

  const reports = createReports(db)
  const window = { from: new Date(now.getTime() - DAYS * 86_400_000), to: now, tz: 'Europe/Paris' }
  const time = async (group: Group) => {
    const times: number[] = []
    let total = 0
    for (let run = 0; run < RUNS; run++) {
      const start = performance.now()
      const answer = await reports.decisions(org.id, window, 'day', group, 10)
      times.push(performance.now() - start)
      total = answer.total
    }
    return { median: median(times), best: Math.min(...times), total }
  }
  const raw = await time('outcome')
  const rollStart = performance.now()
  let chunks = 0
  while (await rollUpChunk(db, org.id)) chunks++
  const rollMs = performance.now() - rollStart
  const rollRows = await db.selectFrom('decision_rollup').select(sql<string>`count(*)::text`.as('n')).where('organization_id', '=', org.id).executeTakeFirstOrThrow()
  const rolled = await time('outcome')
  const byAgent = await time('agent')
  const byPolicy = await time('policy')
  // What the pass costs once caught up: the next few hundred decisions, as a minute of traffic leaves them.
  await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256,
      decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
    select gen_random_uuid(), ${org.id}, '00000000-0000-4000-8000-000000000001', 'bot-1', 'svc1.act1', '', '{}', '{}', repeat('0', 64),
      'allow', 'allow', '[{"rule":"default_decision"}]', '{"decision":"allow","reasons":[{"rule":"default_decision"}]}', '[]', null, 1, 'key:bench', ${now}::timestamptz - interval '1 minute'
    from generate_series(1, 600)`.execute(db)
  const tailStart = performance.now()
  await rollUpChunk(db, org.id)
  const tailMs = performance.now() - tailStart

  const kind = handle.kind === 'postgres' ? 'PostgreSQL' : 'PGlite (in memory)'
  const ok = (value: number) => (value <= 200 ? '✓' : '✗')
  console.log(`Node ${process.version}; ${kind}; ${DECISIONS.toLocaleString('en')} decisions over ${DAYS} days (${(DECISIONS * 0.9).toLocaleString('en')} of the organization reported on) inserted in ${(insertMs / 1000).toFixed(1)} s; median of ${RUNS} runs each; ${os.cpus().length} cores, load average ${loadAtStart.toFixed(1)} at the start, ${os.loadavg()[0]!.toFixed(1)} at the end.`)
  console.log('')
  console.log('| measurement | result |')
  console.log('|---|---|')
  console.log(`| decisions over time (30 days by day, Europe/Paris, by outcome), rollup filled | **${ms(rolled.median)} ${ok(rolled.median)}** (goal ≤ 200 ms; best ${ms(rolled.best)}) |`)
  console.log(`| the same from the log alone (before the rollup pass) | ${ms(raw.median)} (best ${ms(raw.best)}): ${(raw.median / Math.max(rolled.median, 0.001)).toFixed(0)}× the rollup's |`)
  console.log(`| grouped by agent / by policy, rollup filled | ${ms(byAgent.median)} / ${ms(byPolicy.median)} |`)
  console.log(`| rollup pass over the whole log (${chunks} chunks) | ${(rollMs / 1000).toFixed(1)} s, ${Number(rollRows.n).toLocaleString('en')} rollup rows |`)
  console.log(`| rollup pass over 600 new decisions | ${ms(tailMs)} |`)
  console.log(`| decisions counted (both ways agree) | ${rolled.total.toLocaleString('en')} ${rolled.total === raw.total ? '= ' : '≠ '}${raw.total.toLocaleString('en')} |`)
} finally {
  await handle.close()
}
