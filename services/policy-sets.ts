// Policies as code (POST /policies/plan and /policies/apply): a whole desired set, matched to the
// policies in force by name, compared field by field, replayed against the logged decisions, and
// applied as one ruleset revision only when the set in force is still the one that was planned.
import type { Kysely } from 'kysely'
import { canonicalSha256 } from '../engine/index.ts'
import type { AuditBy } from '../storage/audit.ts'
import type { Cap } from '../storage/caps.ts'
import { listPoliciesInForce, type Policy, type PolicyFields } from '../storage/policies.ts'
import { writePolicySet, type SetChange } from '../storage/policy-sets.ts'
import type { ReplayWindow } from '../storage/replay.ts'
import type { Database } from '../database/schema.ts'
import { HttpError } from '../http/errors.ts'
import { approvalFor, fieldsFromInput, type PolicyDocument } from './policies.ts'
import { replayDecisions, type ReplayAnswer } from './policy-replay.ts'

export const STALE_BASE = 'The policies changed since the plan: plan again'

/** The fields a plan compares (the name is what matches a file's policy to a stored one). */
export const COMPARED = ['description', 'effect', 'agents', 'actions', 'resources', 'condition', 'approval', 'mode', 'enabled', 'limits'] as const
type Compared = (typeof COMPARED)[number]

/** A policy's content as a plan shows it: every field, the approval block filled in, limits ([] for none). */
export type PolicyContent = Omit<PolicyFields, 'approval' | 'limits'> & { approval: PolicyFields['approval']; limits: unknown[] }

export interface SetDiff {
  create: PolicyFields[]
  change: { current: Policy; fields: PolicyFields; differ: Partial<Record<Compared, { from: unknown; to: unknown }>> }[]
  archive: Policy[]
  unchanged: number
}

export interface PlanAnswer {
  base: string
  create: { name: string; policy: PolicyContent }[]
  change: { policy_id: string; name: string; version: number; fields: Partial<Record<Compared, { from: unknown; to: unknown }>> }[]
  archive: { policy_id: string; name: string; version: number }[]
  unchanged: number
  replay: ReplayAnswer
}

export interface ApplyAnswer {
  applied: boolean
  base: string
  create: { policy_id: string; name: string; version: number }[]
  change: { policy_id: string; name: string; version: number }[]
  archive: { policy_id: string; name: string; version: number }[]
}

/**
 * The opaque fingerprint of a set in force: which policies, at which version. Any write to one of
 * them (or a policy entering or leaving the set) changes it; agent or settings changes do not.
 */
export function fingerprintOf(inForce: readonly Policy[]): string {
  const entries = inForce.map((policy) => `${policy.policy_id}:${policy.version}`).sort()
  return `ps1-${canonicalSha256(entries).slice(0, 32)}`
}

/** The content as stored and answered: legacy require_approval rows without a block get the defaults. */
function contentOf(fields: PolicyFields): PolicyContent {
  return {
    name: fields.name,
    description: fields.description,
    effect: fields.effect,
    agents: fields.agents,
    actions: fields.actions,
    resources: fields.resources,
    condition: fields.condition,
    approval: fields.approval ?? approvalFor(fields.effect, null),
    mode: fields.mode,
    enabled: fields.enabled,
    // Budgets (docs/budgets.md) ride on policies; a policy written before them has none.
    limits: (fields as { limits?: unknown[] }).limits ?? [],
  }
}

/** The desired set's fields, with the same checks as POST /policies; names must be unique in the file. */
export function desiredSet(documents: readonly PolicyDocument[]): PolicyFields[] {
  const seen = new Map<string, number>()
  return documents.map((document, index) => {
    const where = `Policy ${index}: `
    const first = seen.get(document.name)
    if (first !== undefined) throw new HttpError(400, `${where}name "${document.name}" is already used by policy ${first}; names must be unique in a policy set`)
    seen.set(document.name, index)
    return fieldsFromInput(document, where)
  })
}

/** The difference between the set in force and the desired set, matched by name. */
export function diffSets(inForce: readonly Policy[], desired: readonly PolicyFields[]): SetDiff {
  const byName = new Map<string, Policy[]>()
  for (const policy of inForce) byName.set(policy.name, [...(byName.get(policy.name) ?? []), policy])
  const shared = [...byName.entries()].filter(([, policies]) => policies.length > 1)
  if (shared.length > 0) {
    const [name, policies] = shared[0]!
    throw new HttpError(409, `Policies in force share the name "${name}" (${policies.map((p) => p.policy_id).sort().join(', ')}): rename or archive all but one, then plan again`)
  }
  const diff: SetDiff = { create: [], change: [], archive: [], unchanged: 0 }
  const matched = new Set<string>()
  for (const fields of desired) {
    const current = byName.get(fields.name)?.[0]
    if (current === undefined) {
      diff.create.push(fields)
      continue
    }
    matched.add(current.policy_id)
    const before = contentOf(current)
    const after = contentOf(fields)
    const differ: SetDiff['change'][number]['differ'] = {}
    for (const field of COMPARED) if (canonicalSha256(before[field]) !== canonicalSha256(after[field])) differ[field] = { from: before[field], to: after[field] }
    if (Object.keys(differ).length === 0) diff.unchanged++
    else diff.change.push({ current, fields, differ })
  }
  for (const policy of inForce) if (!matched.has(policy.policy_id)) diff.archive.push(policy)
  return diff
}

const NOTHING_REPLAYED: ReplayAnswer = { evaluated: 0, changed: {}, sample: [] }

/**
 * The plan: what applying the desired set would write, and what it would have decided on the
 * logged decisions (the replay of POST /policies/replay, with the whole change as drafts; nothing
 * is replayed when nothing would change). Writes nothing.
 */
export async function planPolicySet(db: Kysely<Database>, organizationId: string, desired: readonly PolicyFields[], replay: { window: ReplayWindow; limit: number }): Promise<PlanAnswer | null> {
  const inForce = await listPoliciesInForce(db, organizationId)
  const diff = diffSets(inForce, desired)
  const drafts = [
    ...diff.change.map(({ current, fields }) => ({ ...fields, policy_id: current.policy_id })),
    ...diff.archive.map((policy) => ({ ...policy, enabled: false })),
    ...diff.create,
  ]
  const replayed = drafts.length === 0 ? NOTHING_REPLAYED : await replayDecisions(db, organizationId, { ...replay, drafts })
  if (replayed === null) return null
  // The replay names a new policy by its place among the drafts; the plan, by its place in the file.
  const fileIndex = new Map(diff.create.map((fields, index) => [`draft:${drafts.length - diff.create.length + index}`, `draft:${desired.indexOf(fields)}`]))
  for (const sample of replayed.sample) {
    for (const reason of sample.reasons) if (typeof reason.policy_id === 'string' && fileIndex.has(reason.policy_id)) reason.policy_id = fileIndex.get(reason.policy_id)
  }
  return {
    base: fingerprintOf(inForce),
    create: diff.create.map((fields) => ({ name: fields.name, policy: contentOf(fields) })),
    change: diff.change.map(({ current, differ }) => ({ policy_id: current.policy_id, name: current.name, version: current.version, fields: differ })),
    archive: diff.archive.map((policy) => ({ policy_id: policy.policy_id, name: policy.name, version: policy.version })),
    unchanged: diff.unchanged,
    replay: replayed,
  }
}

const summary = (policy: Policy) => ({ policy_id: policy.policy_id, name: policy.name, version: policy.version })

/**
 * Applies the desired set when the set in force still has the fingerprint `base` (checked under
 * the set's locks: of two applies from one plan, one writes and the other is refused). Nothing to
 * change writes nothing. A refusal is a 409; a reached cap is the storage's CapReachedError.
 */
export async function applyPolicySet(
  db: Kysely<Database>,
  organizationId: string,
  desired: readonly PolicyFields[],
  base: string,
  actor: string,
  now: Date,
  by: AuditBy,
  cap: Cap,
): Promise<ApplyAnswer> {
  const decide = (inForce: Policy[]): SetChange | { refused: string } => {
    if (fingerprintOf(inForce) !== base) return { refused: STALE_BASE }
    const diff = diffSets(inForce, desired)
    return { create: diff.create, change: diff.change, archive: diff.archive }
  }
  const outcome = await writePolicySet(db, organizationId, decide, actor, now, by, cap)
  if (outcome.kind === 'refused') throw new HttpError(409, outcome.reason)
  if (outcome.kind === 'unchanged') return { applied: false, base: fingerprintOf(outcome.inForce), create: [], change: [], archive: [] }
  return {
    applied: true,
    base: fingerprintOf(outcome.inForce),
    create: outcome.created.map(summary),
    change: outcome.changed.map(summary),
    archive: outcome.archived.map(summary),
  }
}
