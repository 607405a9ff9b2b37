// What the MCP gateway benchmark (mcp-gateway.ts) runs against: one organization with an admin
// key (to register the upstream), an active agent with an agent key (the gateway's caller, and
// the same caller of POST /decisions), and 10 policies, one of them allowing the agent's calls
// of the upstream `echo`'s tools, the others about other actions (as decision-world.ts).
import { randomBytes } from 'node:crypto'
import { BY_OPERATOR } from '../storage/audit.ts'
import { openBenchDatabase } from './decision-world.ts'

export interface GatewayWorld {
  readonly organizationId: string
  /** An admin key: registers the upstream (POST /mcp/servers). */
  readonly adminKey: string
  /** The agent's own key: calls the gateway, and asks POST /decisions. */
  readonly agentKey: string
}

/**
 * Seeds the world on PostgreSQL (`databaseUrl`) or in a PGlite data directory that no server
 * holds yet (`dataDir`): one process holds a PGlite directory at a time.
 */
export async function seedGatewayWorld(target: { databaseUrl: string } | { dataDir: string }): Promise<GatewayWorld> {
  const { createOrganization } = await import('../storage/organizations.ts')
  const { createApiKey } = await import('../storage/keys.ts')
  const { createAgent } = await import('../storage/agents.ts')
  const { createPolicy } = await import('../storage/policies.ts')
  const handle = await openBenchDatabase(target)
  try {
    const now = new Date()
    const org = await createOrganization(handle.db, `mcp bench ${randomBytes(3).toString('hex')}`, now)
    const key = (role: 'admin' | 'member', agentId: string | null = null) =>
      createApiKey(handle.db, { organizationId: org.id, name: `bench ${role}`, role, createdByUserId: null, createdByKeyId: null, expiresAt: null, agentId }, now, BY_OPERATOR)
    const admin = await key('admin')
    const agent = await createAgent(handle.db, org.id, { handle: 'bench-bot', display_name: 'Bench bot', description: '', owner_user_id: null, labels: { team: 'support' }, status: 'active' }, now, { limit: 1000, what: 'agents', setting: 'MAX_AGENTS_PER_ORG' }, BY_OPERATOR)
    const agentKey = await key('member', agent.agent_id)
    for (let i = 0; i < 10; i++) {
      const allow = i === 0
      await createPolicy(
        handle.db,
        org.id,
        {
          name: `gateway policy ${i}`,
          description: 'benchmark policy',
          effect: allow ? 'allow' : i % 2 ? 'deny' : 'require_approval',
          agents: allow ? ['bench-bot'] : ['*'],
          actions: allow ? ['mcp.echo.*'] : [`mcp.svc${i}.*`],
          resources: ['*'],
          condition: null,
          approval: allow || i % 2 ? null : { approvers_required: 1, approver_roles: ['owner', 'admin', 'manager'], timeout_seconds: 900, use_within_seconds: 300 },
          mode: 'enforce',
          enabled: true,
        },
        'operator',
        now,
        BY_OPERATOR,
      )
    }
    return { organizationId: org.id, adminKey: admin.secret, agentKey: agentKey.secret }
  } finally {
    await handle.close()
  }
}
