// GET /audit/verify (docs/governance.md, seals and verification): recomputes the caller's
// organization's seal chain from its rows and answers whether it holds, or names the first
// mismatch. Admins and Owners only; keys bound to an agent are refused.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { verifyChain, type VerifyResult } from '../services/audit-verify.ts'
import { protectedErrors, type Guard } from './access.ts'
import type { Principal } from '../services/credentials.ts'
import { json, type Reply } from '../http/reply.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import type { RequestContext, Route } from './deps.ts'

const Count = v.pipe(v.number(), v.integer(), v.minValue(0))

const LatestSealSchema = v.nullable(
  v.pipe(
    v.object({
      seal_id: v.pipe(v.number(), v.integer(), v.minValue(1)),
      sha256: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/), v.description('Keep this outside the database: a later verification proves the log unchanged up to it.')),
      sealed_at: v.pipe(v.string(), v.isoTimestamp()),
    }),
    v.title('LatestSeal'),
  ),
)

export const AuditVerifySchema = v.pipe(
  v.variant('ok', [
    v.object({
      ok: v.literal(true),
      seals: v.pipe(Count, v.description('Seals checked.')),
      events: v.pipe(Count, v.description('Audit events recomputed from their rows.')),
      decisions: v.pipe(Count, v.description('Decisions recomputed from their rows.')),
      latest_seal: LatestSealSchema,
    }),
    v.object({
      ok: v.literal(false),
      problem: v.pipe(
        v.object({
          kind: v.picklist(['edited', 'deleted', 'inserted', 'reordered', 'seal_removed', 'seal_edited']),
          seal_id: v.pipe(v.number(), v.integer(), v.minValue(1), v.description('The first seal that does not hold.')),
          rows: v.optional(v.picklist(['events', 'decisions'])),
          message: v.string(),
        }),
        v.title('AuditVerifyProblem'),
      ),
      latest_seal: LatestSealSchema,
    }),
  ]),
  v.title('AuditVerification'),
)

export function verificationToJson(result: VerifyResult): v.InferOutput<typeof AuditVerifySchema> {
  const latest_seal = result.latest_seal
    ? { seal_id: result.latest_seal.seal_id, sha256: result.latest_seal.sha256, sealed_at: result.latest_seal.sealed_at.toISOString() }
    : null
  if (!result.ok) return { ok: false, problem: { ...result.problem }, latest_seal }
  return { ok: true, seals: result.seals, events: result.events, decisions: result.decisions, latest_seal }
}

export function auditVerifyRoutes(guard: Guard): Route[] {
  async function verify(_request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    return json(200, verificationToJson(await verifyChain(ctx.deps.db, principal.organizationId, new Date(ctx.now))))
  }
  // The administrators' scope: Admins and Owners; agent keys are refused by the guard.
  return [{ method: 'GET', path: '/audit/verify', handler: guard.protect('members:manage', verify), doc: verifyDoc }]
}

const verifyDoc: OperationDoc = {
  operationId: 'verifyAuditLog',
  summary: "Verify the organization's audit seal chain",
  description:
    "Admins and Owners. Recomputes every seal of the caller's organization from its audit events and decisions and checks the chain links. " +
    'Always 200: `ok: true` with counts and the latest seal (keep its sha256 elsewhere), or `ok: false` naming the first seal that does not hold and how ' +
    '(edited, deleted, inserted, reordered rows; a removed or edited seal). Rows newer than the latest seal are not covered yet.',
  tags: ['Audit'],
  scopes: ['members:manage'],
  responses: {
    200: { description: 'The verification result.', schema: AuditVerifySchema },
    ...protectedErrors({ 403: 'The role is below Admin, the key is bound to an agent, or plain HTTP from a non-loopback client.' }),
  },
}
