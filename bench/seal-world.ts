// What both seal benchmarks (audit-seal.ts, audit-seal-pass.ts) write into: a scratch PostgreSQL
// database, migrated, with one busy organization and `idle` more, and the multi-row decision
// insert (one audit event per batch) they time.
import { sql, type Kysely, type Transaction } from 'kysely'
import { SYSTEM } from '../domain/audit.ts'
import { silentLogger } from '../log.ts'
import { recordEvent } from '../storage/audit.ts'
import { openDatabase, type DatabaseHandle } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { createOrganization } from '../storage/organizations.ts'
import type { Database } from '../database/schema.ts'
import { createScratchDatabase, reachable } from './lib.ts'

export interface SealWorld {
  readonly db: Kysely<Database>
  readonly organizationId: string
  readonly agentId: string
  close(): Promise<void>
}

/** The world on BENCH_DATABASE_URL or TEST_DATABASE_URL; exits 0 with a note when there is no PostgreSQL. */
export async function openSealWorld(prefix: string, maxConnections: number, idle: number): Promise<SealWorld> {
  const adminUrl = process.env.BENCH_DATABASE_URL || process.env.TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test'
  if (!(await reachable(adminUrl))) {
    console.log(`no PostgreSQL at ${adminUrl}: nothing to measure`)
    process.exit(0)
  }
  const scratch = await createScratchDatabase(adminUrl, prefix)
  let handle: DatabaseHandle | null = null
  try {
    handle = await openDatabase({ databaseUrl: scratch.url, dataDir: '', logger: silentLogger, maxConnections })
    const db = handle.db
    await migrateToLatest(db)
    const org = await createOrganization(db, 'Busy', new Date())
    for (let i = 0; i < idle; i++) await createOrganization(db, `Idle ${i}`, new Date())
    const opened = handle
    return {
      db,
      organizationId: org.id,
      agentId: crypto.randomUUID(),
      async close() {
        await opened.close()
        await scratch.drop()
      },
    }
  } catch (error) {
    await handle?.close()
    await scratch.drop()
    throw error
  }
}

/** `rows` decisions of the busy organization in one statement, and one audit event, in `trx`. */
export async function insertDecisionBatch(trx: Transaction<Database>, world: SealWorld, rows: number, at: Date): Promise<void> {
  await sql`insert into decisions (decision_id, organization_id, agent_id, agent_handle, action, resource, args, context, args_sha256, decision,
      policy_decision, reasons, monitor, errors, approval_id, ruleset_revision, requested_by, evaluated_at)
    select gen_random_uuid(), ${world.organizationId}, ${world.agentId}, 'bench-bot', 'tickets.read', 'ticket/' || n, jsonb_build_object('n', n), '{}'::jsonb,
      ${'a'.repeat(64)}, 'allow', 'allow', '[{"rule":"policy"}]'::jsonb, '[]'::jsonb, '[]'::jsonb, null, 1, 'operator', ${at}
    from generate_series(1, ${rows}) n`.execute(trx)
  await recordEvent(trx, { organizationId: world.organizationId, actor: SYSTEM, type: 'policy.updated', target: { type: 'policy', id: null }, data: { batch: true }, occurredAt: at })
}
