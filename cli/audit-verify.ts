// Operator commands over the audit seals: `audit verify` recomputes each organization's seal chain
// from its rows (services/audit-verify.ts) and names the first mismatch; `audit seal` seals what is
// new at once (a running server does this every AUDIT_SEAL_INTERVAL_MS).
import { UUID } from '../domain/uuid.ts'
import { verifyChain } from '../services/audit-verify.ts'
import { sealAll, sealedOrganizations, sealOrganization } from '../storage/audit-seal.ts'
import { findOrganization } from '../storage/organizations.ts'
import { UsageError, type Command, type Options, type OptionSpec } from './command.ts'
import { withDatabase } from './database.ts'
import type { DatabaseHandle } from '../database/connect.ts'

const ORG: OptionSpec = { type: 'string', value: 'ID', description: 'only this organization (default: every organization that has seals)' }

function orgOption(options: Options): string | null {
  const value = options.org
  if (value === undefined) return null
  if (typeof value !== 'string' || !UUID.test(value)) throw new UsageError('--org must be a UUID')
  return value.toLowerCase()
}

async function requireOrganization(db: DatabaseHandle['db'], orgId: string): Promise<void> {
  if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
}

const auditVerify: Command = {
  name: 'audit verify',
  summary: 'recompute the audit seal chain from the rows; exit 1 naming the first mismatch',
  options: { org: ORG },
  notes:
    'Prints one line per organization: "ok" with the counts and the latest seal\'s sha256 (keep it\n' +
    'somewhere the database cannot reach: a later run proves the log unchanged up to it), or\n' +
    '"FAILED" with the kind of mismatch and the first seal that does not hold. Rows written after\n' +
    'the latest seal are not covered yet. A database superuser can rewrite rows and seals alike:\n' +
    'compare the printed sha256 with the one you kept.',
  async run({ options, config, io, database }) {
    const only = orgOption(options)
    return withDatabase({ config, database }, async ({ db }) => {
      if (only) await requireOrganization(db, only)
      const orgs = only ? [only] : await sealedOrganizations(db)
      let failed = 0
      for (const orgId of orgs) {
        const result = await verifyChain(db, orgId, new Date())
        if (result.ok) {
          const latest = result.latest_seal ? ` latest_seal=${result.latest_seal.seal_id} sha256=${result.latest_seal.sha256}` : ' (no seal yet)'
          io.stdout.write(`ok ${orgId} seals=${result.seals} events=${result.events} decisions=${result.decisions}${latest}\n`)
        } else {
          failed++
          io.stdout.write(`FAILED ${orgId} ${result.problem.kind} seal=${result.problem.seal_id}: ${result.problem.message}\n`)
        }
      }
      if (orgs.length === 0) io.stdout.write('ok (no seals yet)\n')
      return failed > 0 ? 1 : 0
    })
  },
}

const auditSeal: Command = {
  name: 'audit seal',
  summary: 'seal the audit events and decisions written since the last seal, now',
  options: { org: { ...ORG, description: 'only this organization (default: every organization with new rows)' } },
  async run({ options, config, io, database }) {
    const only = orgOption(options)
    return withDatabase({ config, database }, async ({ db }) => {
      if (only) await requireOrganization(db, only)
      const outcome = only ? await sealOrganization(db, only, new Date()) : null
      const seals = outcome ? ('sealed' in outcome ? [outcome.sealed] : []) : await sealAll(db, new Date())
      for (const seal of seals) io.stdout.write(`sealed ${seal.organization_id} seal=${seal.seal_id} events=${seal.events} decisions=${seal.decisions} sha256=${seal.sha256}\n`)
      if (seals.length === 0) io.stdout.write('nothing new to seal\n')
      return 0
    })
  },
}

export const auditSealCommands: readonly Command[] = [auditVerify, auditSeal]
