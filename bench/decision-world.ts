// What the decision benchmarks (decision-pair.ts, decisions-scale.ts) send and to whom: one
// organization with a member key, an active agent and 10 policies, and requests shaped like a
// user's. An agent asks about a new order, amount and customer each time, and a new lead brings
// a new email; the same body sent over and over is not what a server sees.
import { randomBytes } from 'node:crypto'
import { BY_OPERATOR } from '../storage/audit.ts'

export interface DecisionWorld {
  readonly organizationId: string
  /** A member key: holds decisions:check. */
  readonly key: string
  /** An active agent that 10 policies name; one of them allows its payments under a condition. */
  readonly handle: string
}

const ACTIONS = ['payments.refund', 'payments.capture', 'payments.void'] as const
const REASONS = ['damaged', 'late', 'duplicate', 'goodwill'] as const

/**
 * The n-th POST /decisions body: its own resource, amount, reason and customer, each allowed by
 * the world's condition (`args.amount < 1000 && args.currency == "EUR"`), so every request
 * evaluates that condition and writes a row.
 */
export function decisionBody(handle: string, n: number): string {
  return JSON.stringify({
    agent: handle,
    action: ACTIONS[n % ACTIONS.length],
    resource: `order/${100_000 + n}`,
    args: { amount: 1 + ((n * 7919) % 999), currency: 'EUR', reason: REASONS[n % REASONS.length] },
    context: { on_behalf_of: `customer-${n % 5000}@example.com`, ticket: `T-${n}` },
  })
}

/** The n-th POST /demo-request body of a run: a new lead, with an email never sent before. */
export function leadBody(run: string, n: number): string {
  return JSON.stringify({ first_name: 'Ada', last_name: 'Lovelace', email: `lead-${run}-${n}@example.com`, company: 'Analytical', linkedin: 'https://www.linkedin.com/in/ada' })
}

/** The bench's database, migrated: PostgreSQL, or a PGlite data directory no server holds yet. */
export async function openBenchDatabase(target: { databaseUrl: string } | { dataDir: string }) {
  const { openDatabase } = await import('../database/connect.ts')
  const { migrateToLatest } = await import('../database/migrate.ts')
  const { silentLogger } = await import('../log.ts')
  const handle = await openDatabase({ databaseUrl: 'databaseUrl' in target ? target.databaseUrl : null, dataDir: 'dataDir' in target ? target.dataDir : '', logger: silentLogger })
  try {
    await migrateToLatest(handle.db)
  } catch (error) {
    await handle.close()
    throw error
  }
  return handle
}

/**
 * Seeds the world on PostgreSQL (`databaseUrl`) or in a PGlite data directory that no server
 * holds yet (`dataDir`): one process holds a PGlite directory at a time.
 */
export async function seedDecisionWorld(target: { databaseUrl: string } | { dataDir: string }): Promise<DecisionWorld> {
  const { createOrganization } = await import('../storage/organizations.ts')
  const { createApiKey } = await import('../storage/keys.ts')
  const { createAgent } = await import('../storage/agents.ts')
  const { createPolicy } = await import('../storage/policies.ts')
  const handle = await openBenchDatabase(target)
  try {
    const now = new Date()
    const org = await createOrganization(handle.db, `decisions bench ${randomBytes(3).toString('hex')}`, now)
    const { secret } = await createApiKey(handle.db, { organizationId: org.id, name: 'bench', role: 'member', createdByUserId: null, createdByKeyId: null, expiresAt: null }, now, BY_OPERATOR)
    await createAgent(handle.db, org.id, { handle: 'bench-bot', display_name: 'Bench bot', description: '', owner_user_id: null, labels: { team: 'support' }, status: 'active' }, now, { limit: 1000, what: 'agents', setting: 'MAX_AGENTS_PER_ORG' }, BY_OPERATOR)
    for (let i = 0; i < 10; i++) {
      const allow = i === 0
      await createPolicy(
        handle.db,
        org.id,
        {
          name: `decision policy ${i}`,
          description: 'benchmark policy',
          effect: allow ? 'allow' : i % 2 ? 'deny' : 'require_approval',
          agents: allow ? ['bench-bot'] : ['*'],
          actions: allow ? ['payments.*'] : [`svc${i}.*`],
          resources: ['*'],
          condition: allow ? 'args.amount < 1000 && args.currency == "EUR"' : null,
          approval: allow || i % 2 ? null : { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 900, use_within_seconds: 300 },
          mode: 'enforce',
          enabled: true,
        },
        'operator',
        now,
        BY_OPERATOR,
      )
    }
    return { organizationId: org.id, key: secret, handle: 'bench-bot' }
  } finally {
    await handle.close()
  }
}
