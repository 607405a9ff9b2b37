// Verification of the audit seals (docs/audit.md): recomputes an
// organization's seal chain from its rows, seal by seal, and names the first mismatch. The rows
// are read and hashed by storage/audit-seal.ts through the format of engine/seal.ts, the same
// path the sealer takes.
import type { Kysely } from 'kysely'
import { sealSha256, ZERO_SHA256, type RunDigestResult, type Seal } from '../engine/seal.ts'
import type { Database } from '../database/schema.ts'
import { decisionRetentionDays, digestRange, latestSeal, prunedThroughSeal, sealsFrom, type LatestSeal } from '../storage/audit-seal.ts'

export type { LatestSeal }

export type ProblemKind = 'edited' | 'deleted' | 'inserted' | 'reordered' | 'seal_removed' | 'seal_edited'

export interface VerifyProblem {
  kind: ProblemKind
  seal_id: number
  /** Which rows the problem is in: events or decisions (absent for a problem of the seal itself). */
  rows?: 'events' | 'decisions'
  message: string
}

export type VerifyResult =
  | {
      ok: true
      seals: number
      /** Events and decisions recomputed from their rows. */
      events: number
      decisions: number
      /** The last seal checked (null: none yet). */
      through_seal_id: number | null
      latest_seal: LatestSeal | null
      /** Seals older than the audit prune's through_seal_id: only their chain links were checked. */
      pruned_seals: number
      /** Seals whose decisions were removed by decision retention (not checked against rows). */
      decisions_pruned_seals: number
    }
  | { ok: false; problem: VerifyProblem; latest_seal: LatestSeal | null }

const SEALS_PER_PAGE = 200

/**
 * Recomputes one organization's seal chain from its rows, seal by seal in order, and names the
 * first mismatch. Constant memory: seals and rows are read in pages.
 */
export async function verifyChain(db: Kysely<Database>, organizationId: string, now: Date = new Date()): Promise<VerifyResult> {
  const latest = await latestSeal(db, organizationId)
  const fail = (problem: VerifyProblem): VerifyResult => ({ ok: false, problem, latest_seal: latest })

  const prunedThrough = await prunedThroughSeal(db, organizationId)
  const retentionHorizon = now.getTime() - (await decisionRetentionDays(db, organizationId)) * 86_400_000

  let expectedId = 1
  let prevSha = ZERO_SHA256
  let prevTo = 0
  let seals = 0
  let events = 0
  let decisions = 0
  let prunedSeals = 0
  let decisionsPruned = 0
  for (;;) {
    const page = await sealsFrom(db, organizationId, expectedId, SEALS_PER_PAGE)
    for (const seal of page) {
      const id = seal.seal_id
      if (id !== expectedId) {
        return fail({ kind: 'seal_removed', seal_id: expectedId, message: `seal ${expectedId} is missing: the chain goes from ${expectedId - 1} to ${id}` })
      }
      if (seal.prev_sha256 !== prevSha) {
        return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id} does not link to seal ${id - 1}: its prev_sha256 is not that seal's sha256` })
      }
      if (seal.xid_from !== prevTo) {
        return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id} does not start where seal ${id - 1} ends (xid ${seal.xid_from}, expected ${prevTo})` })
      }
      seals++
      expectedId = id + 1
      prevSha = seal.sha256
      prevTo = seal.xid_to
      if (id <= prunedThrough) {
        // Its rows were deleted by an audit prune: only the chain is left to check.
        prunedSeals++
        continue
      }
      const found = await digestRange(db, organizationId, seal.xid_from, seal.xid_to)
      events += found.events.count
      decisions += found.decisions.count
      const decisionsGone = seal.decisions > 0 && found.decisions.count < seal.decisions && seal.sealed_at.getTime() < retentionHorizon
      if (decisionsGone) {
        // Decision retention removed (some of) this seal's decisions: the events are checked, the
        // seal's own hash cannot be (it covers the decisions' order-free digest).
        decisionsPruned++
        const problem = compareRun(seal, 'events', found.events, null)
        if (problem) return fail(problem)
        continue
      }
      const withRows = sealSha256({ ...seal, events: found.events.count, decisions: found.decisions.count, events_sha256: found.events.sha256, decisions_sha256: found.decisions.sha256 }, {
        events: found.events.set,
        decisions: found.decisions.set,
      })
      const rowsMatchColumns =
        found.events.count === seal.events &&
        found.events.sha256 === seal.events_sha256 &&
        found.decisions.count === seal.decisions &&
        found.decisions.sha256 === seal.decisions_sha256
      if (rowsMatchColumns) {
        if (withRows !== seal.sha256) return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id}'s sha256 does not match its contents` })
        continue
      }
      // The rows still give the seal's hash: the seal's stored counts or digests were changed.
      if (withRows === seal.sha256) return fail({ kind: 'seal_edited', seal_id: id, message: `seal ${id}'s counts or digests were changed; its rows still match its sha256` })
      const problem =
        compareRun(seal, 'events', found.events, (set) => sealSha256(seal, { events: set, decisions: found.decisions.set }) === seal.sha256) ??
        compareRun(seal, 'decisions', found.decisions, (set) => sealSha256(seal, { events: found.events.set, decisions: set }) === seal.sha256)
      return fail(problem ?? { kind: 'seal_edited', seal_id: id, message: `seal ${id} does not match its rows` })
    }
    if (page.length < SEALS_PER_PAGE) break
  }
  return {
    ok: true,
    seals,
    events,
    decisions,
    through_seal_id: seals > 0 ? expectedId - 1 : null,
    latest_seal: latest,
    pruned_seals: prunedSeals,
    decisions_pruned_seals: decisionsPruned,
  }
}

/**
 * Compares one kind of row with what the seal recorded. `sameSet` tells whether an order-free
 * digest gives the seal's hash (null: cannot be told).
 */
function compareRun(seal: Seal, rows: 'events' | 'decisions', found: RunDigestResult, sameSet: ((set: string) => boolean) | null): VerifyProblem | null {
  const sealed = rows === 'events' ? seal.events : seal.decisions
  const digest = rows === 'events' ? seal.events_sha256 : seal.decisions_sha256
  const one = rows === 'events' ? 'an event' : 'a decision'
  const id = seal.seal_id
  if (found.count < sealed) return { kind: 'deleted', seal_id: id, rows, message: `${one} of seal ${id} was deleted (sealed ${sealed} ${rows}, found ${found.count})` }
  if (found.count > sealed) return { kind: 'inserted', seal_id: id, rows, message: `${one} was inserted into seal ${id}'s range (sealed ${sealed} ${rows}, found ${found.count})` }
  if (found.sha256 === digest) return null
  if (sameSet?.(found.set)) return { kind: 'reordered', seal_id: id, rows, message: `${rows} of seal ${id} were reordered: the same rows under other ids` }
  return { kind: 'edited', seal_id: id, rows, message: `${one} of seal ${id} was edited (${found.count} ${rows}, digest differs)` }
}
