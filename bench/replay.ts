// Replay bench: 100,000 logged decisions in an embedded PGlite database (or PostgreSQL with
// DATABASE_URL=postgres://…), replayed against a draft set through the same function
// POST /policies/replay runs: keyset pages from the decision log, decided by the engine. The goal
// is at most 5 s for 100,000. Run alone:
//
//   node --import tsx bench/replay.ts [--decisions 100000] [--runs 3]
import { BY_OPERATOR } from '../storage/audit.ts'
import { parseScriptArgs } from '../cli/command.ts'
import { silentLogger } from '../log.ts'
import { parseReplayRequest } from '../routes/policy-replay.ts'
import { replayDecisions } from '../services/policy-replay.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { createOrganization } from '../storage/organizations.ts'
import { createPolicy } from '../storage/policies.ts'
import { sql } from 'kysely'

const args = parseScriptArgs({ decisions: { type: 'string' }, runs: { type: 'string' } })
const DECISIONS = Number(args.decisions ?? 100_000)
const RUNS = Number(args.runs ?? 3)
const url = process.env.DATABASE_URL ?? 'memory://'

const handle = await openDatabase({ databaseUrl: url, dataDir: '', logger: silentLogger })
try {
  await migrateToLatest(handle.db)
  const now = new Date('2026-11-23T00:00:00Z')
  const org = await createOrganization(handle.db, `replay bench ${crypto.randomUUID().slice(0, 8)}`, now)
  // A stored set of 50 policies across namespaces, some with conditions.
  for (let i = 0; i < 50; i++) {
    await createPolicy(
      handle.db,
      org.id,
      {
        name: `stored ${i}`,
        description: '',
        effect: i % 3 === 0 ? 'deny' : i % 3 === 1 ? 'allow' : 'require_approval',
        agents: ['*'],
        actions: [`svc${i % 10}.*`],
        resources: ['*'],
        condition: i % 2 ? 'args.amount > 100.0' : null,
        approval: i % 3 === 2 ? { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 900, use_within_seconds: 300 } : null,
        mode: 'enforce',
        enabled: true,
      },
      'operator',
      now,
      BY_OPERATOR,
    )
  }
  const insertStart = performance.now()
  await sql`
    insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256,
      decision, policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
    select gen_random_uuid(), ${org.id}, '11111111-1111-4111-8111-111111111111', 'bot-' || (n % 20), 'svc' || (n % 12) || '.act' || (n % 7),
      'order/' || n, jsonb_build_object('amount', n % 500, 'currency', 'EUR'), jsonb_build_object('on_behalf_of', 'ada@example.com'), repeat('0', 64),
      (array['allow','deny','require_approval'])[1 + n % 3], (array['allow','deny','require_approval'])[1 + n % 3],
      '[{"rule":"default_decision"}]'::jsonb, '{}'::jsonb, '[]'::jsonb, null, 1, 'key:bench',
      ${now}::timestamptz - (n || ' seconds')::interval
    from generate_series(1, ${DECISIONS}) as n`.execute(handle.db)
  const insertMs = performance.now() - insertStart
  const request = parseReplayRequest({
    limit: Math.min(DECISIONS, 100_000),
    policies: [
      { name: 'draft deny refunds', effect: 'deny', actions: ['svc1.*'], condition: 'args.amount > 250.0 && args.currency == "EUR"' },
      { name: 'draft allow reads', effect: 'allow', actions: ['svc2.act1', 'svc3.*'] },
    ],
  })
  const times: number[] = []
  let evaluated = 0
  let changed = 0
  for (let run = 0; run < RUNS; run++) {
    const start = performance.now()
    const answer = await replayDecisions(handle.db, org.id, request)
    times.push(performance.now() - start)
    evaluated = answer!.evaluated
    changed = Object.values(answer!.changed).reduce((a, b) => a + b, 0)
  }
  const best = Math.min(...times)
  console.log(`Node ${process.version}; ${handle.kind === 'postgres' ? 'PostgreSQL' : 'PGlite (in memory)'}; ${DECISIONS.toLocaleString('en')} decisions inserted in ${(insertMs / 1000).toFixed(1)} s`)
  console.log('')
  console.log('| measurement | result |')
  console.log('|---|---|')
  console.log(`| replay of ${evaluated.toLocaleString('en')} logged decisions (${changed.toLocaleString('en')} changed), best of ${RUNS} | ${(best / 1000).toFixed(2)} s (goal ≤ 5 s) |`)
  console.log(`| every run | ${times.map((ms) => `${(ms / 1000).toFixed(2)} s`).join(', ')} |`)
  console.log(`| per decision | ${((best * 1000) / Math.max(evaluated, 1)).toFixed(1)} µs |`)
} finally {
  await handle.close()
}
