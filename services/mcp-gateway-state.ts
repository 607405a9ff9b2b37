// The gateway's `requestState` (protocol revision 2026-07-28): what a client echoes when it
// retries a tool call that waits for an approval. It names the approval and the tool, expires with
// the approval, and is HMAC-SHA256 signed (the SDK's codec) with a key derived from the secrets
// key, bound to the agent key and the method: a state altered, minted for another key or another
// call, or expired is refused before any handler runs. Signed, not encrypted: it holds only ids the
// agent may see anyway. A state replayed after its approval was used decides as a deny, since an
// approval is consumed once (services/decision-approvals.ts).
import { randomBytes } from 'node:crypto'
import { createRequestStateCodec, type ServerContext } from '@modelcontextprotocol/server'
import type { Logger } from '../log.ts'
import type { Secrets } from './secrets.ts'

/** The label of the request-state key derived from the secrets key (auth/secret-box.ts derive). */
export const REQUEST_STATE_LABEL = 'steward mcp request state v1'
/** Longer than any approval can live (timeout up to 7 days, then its use window): each state also carries its own expiry. */
const CODEC_TTL_SECONDS = 9 * 86_400

/** What a retry carries: the approval, the tool name it was asked for, and when it stops being usable (ms). */
export interface RequestState {
  readonly approvalId: string
  readonly tool: string
  readonly expiresAt: number
}

export interface RequestStateCodec {
  mint(state: RequestState, ctx: ServerContext): Promise<string>
  /** The state, or a throw (the SDK answers -32602 "Invalid or expired requestState"). */
  verify(text: string, ctx: ServerContext): Promise<RequestState>
}

/** Who a state is bound to: the agent key behind the request, and the method. */
function bindingOf(ctx: ServerContext): string {
  const principal = (ctx.http?.authInfo?.extra as { principal?: { keyId?: string | null; agentId?: string | null } } | undefined)?.principal
  return `${principal?.keyId ?? ''}\u0000${principal?.agentId ?? ''}\u0000${ctx.mcpReq.method}`
}

export function createRequestStateCodecFor(secrets: Secrets, logger: Logger, clock: () => number): RequestStateCodec {
  let key = secrets.box()?.derive(REQUEST_STATE_LABEL) ?? null
  if (key === null) {
    // PostgreSQL without SECRETS_KEY: a key of this process, so a retry must come back to it.
    logger.log('warn', 'SECRETS_KEY is not set: MCP approval retries (requestState) verify only in the process that issued them')
    key = randomBytes(32)
  }
  const codec = createRequestStateCodec<RequestState>({ key, ttlSeconds: CODEC_TTL_SECONDS, bind: bindingOf })
  return {
    mint: (state, ctx) => codec.mint(state, ctx),
    async verify(text, ctx) {
      const state = await codec.verify(text, ctx)
      if (typeof state?.approvalId !== 'string' || typeof state.tool !== 'string' || typeof state.expiresAt !== 'number') throw new Error('malformed')
      if (state.expiresAt <= clock()) throw new Error('expired')
      return state
    },
  }
}
