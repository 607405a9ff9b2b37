// POST /toolhive/decision (docs/mcp.md#toolhive): the decision endpoint of ToolHive's HTTP
// authorizer ("httpv1"), which posts a PORC document to <url>/decision and lets the MCP request
// through only on 200 {"allow": true}; any other answer is a deny there. ToolHive sends no
// credential of its own: Go's HTTP client turns the user information of the configured URL
// (https://toolhive:<key>@host/toolhive) into Basic authentication, so this route takes the key
// as the Basic password (or user name) as well as a Bearer token. The use case is
// services/toolhive.ts.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { bodyDoc, readInput } from '../http/body.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { json, type Reply } from '../http/reply.ts'
import type { Credentials, Principal } from '../services/credentials.ts'
import type { Services } from '../services/index.ts'
import { authorizeToolhive } from '../services/toolhive.ts'
import { createGuard, protectedErrors } from './access.ts'
import { DecisionAnswerSchema } from './decisions.ts'
import type { RequestContext, Route } from './deps.ts'
import { jsonObject } from './input.ts'

const NOT_AN_OBJECT = 'Request body must be a JSON object'

const JsonObject = (field: string, description: string) =>
  jsonObject(v.pipe(v.record(v.string(), v.unknown(), `Field ${field} must be a JSON object`), v.description(description)), `Field ${field} must be a JSON object`)

export const PorcSchema = v.pipe(
  v.object(
    {
      principal: v.optional(JsonObject('principal', 'The JWT claims of the person ToolHive authenticated, as its claim mapper maps them (sub, roles or mroles, groups…). sub is logged as context.on_behalf_of.'), {}),
      operation: v.pipe(v.string('Field operation must be a string'), v.maxLength(100, 'Field operation is longer than 100 characters'), v.description('mcp:tool:call, mcp:prompt:get or mcp:resource:read.')),
      resource: v.pipe(v.string('Field resource must be a string'), v.maxLength(2000, 'Field resource is longer than 2000 characters'), v.description('mrn:mcp:<server>:<feature>:<name>.')),
      context: v.optional(JsonObject('context', 'context.mcp.args: the arguments (ToolHive sends them with include_args: true); context.mcp.annotations: the tool\'s annotations.'), {}),
    },
    NOT_AN_OBJECT,
  ),
  v.title('ToolhivePorc'),
)

const { decision_id, decision, reasons, approval } = DecisionAnswerSchema.pipe[0].entries

export const ToolhiveAnswerSchema = v.pipe(
  v.object({ allow: v.pipe(v.boolean(), v.description('What ToolHive reads: true only for an allow decision.')), decision_id, decision, reasons, approval }),
  v.title('ToolhiveAnswer'),
)

const porcBody = bodyDoc(PorcSchema, ['application/json'], true)

// RFC 7617: the scheme is case-insensitive; the credentials are base64 of user-id ":" password.
const BASIC = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i

/** A Basic Authorization header as the Bearer header of its password (its user name when the password is empty). */
export function basicAsBearer(header: string | null): string | null {
  const match = header === null ? null : BASIC.exec(header)
  if (!match) return header
  let decoded: string
  try {
    decoded = atob(match[1]!)
  } catch {
    return 'Bearer -'
  }
  const colon = decoded.indexOf(':')
  const secret = colon < 0 ? decoded : decoded.slice(colon + 1) || decoded.slice(0, colon)
  return `Bearer ${secret}`
}

/** The credentials of the product API, reading a Basic header as its Bearer equivalent. */
function acceptingBasic(credentials: Credentials): Credentials {
  return { ...credentials, authenticate: (header, now) => credentials.authenticate(basicAsBearer(header), now) }
}

export function toolhiveRoutes(services: Pick<Services, 'credentials' | 'apiLimiter' | 'apiOrgLimiter' | 'decisions'>): Route[] {
  const guard = createGuard(acceptingBasic(services.credentials), services.apiLimiter, services.apiOrgLimiter)

  async function decide(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const porc = await readInput(request, ctx, porcBody)
    const probe = new URL(request.url).searchParams.get('probe') === 'true'
    const answer = await authorizeToolhive({ db: ctx.deps.db, decisions: services.decisions }, principal, porc, { requestId: ctx.requestId, now: ctx.now, probe })
    return json(200, answer)
  }

  return [{ method: 'POST', path: '/toolhive/decision', handler: guard.protect('decisions:check', decide, { agentKeys: true }), doc: decideDoc }]
}

const decideDoc: OperationDoc = {
  operationId: 'toolhiveDecision',
  summary: 'Decide a ToolHive authorization request (PORC)',
  description:
    'The decision endpoint of ToolHive\'s HTTP authorizer: configure its pdp.http.url as https://toolhive:<key>@<host>/toolhive (the key as the Basic password; a Bearer token works too). ' +
    'mcp:tool:call is decided as action mcp.<server>.<tool> on resource <server>, mcp:prompt:get as mcp-prompt.<server>.<prompt>, mcp:resource:read as mcp-resource.<server> on the resource URI; ' +
    'the arguments are context.mcp.args. An agent key decides for its agent; another key for the agent named as ToolHive\'s server. Every request is a logged decision (via toolhive) but with ?probe=true, which writes nothing. ' +
    'require_approval answers allow false and asks the approvers; the same request again uses that approval, and once it is approved goes through once.',
  tags: ['Decisions'],
  scopes: ['decisions:check'],
  query: v.object({ probe: v.optional(v.pipe(v.string(), v.description('true: what the decision would be, with nothing written.'))) }),
  body: porcBody,
  responses: {
    200: { description: 'The decision: ToolHive reads allow.', schema: ToolhiveAnswerSchema },
    ...protectedErrors({
      400: 'Malformed PORC, a credential sent in the URL, an operation other than mcp:tool:call, mcp:prompt:get or mcp:resource:read, or a server name that is not an agent handle with a key that is not an agent\'s.',
      403: "The credential's role lacks decisions:check.",
      409: 'A new agent would exceed MAX_AGENTS_PER_ORG.',
      413: 'Body larger than the limit.',
      415: 'Content-Type other than application/json.',
    }),
  },
}
