// Upstream MCP servers (docs/mcp.md): POST/GET /mcp/servers, GET/PATCH/DELETE
// /mcp/servers/{server_id}. Viewers and up read, Admins and Owners write. Headers are write-only:
// an answer names them (header_names), never their values. Scoped by the credential's
// organization: another organization's server answers the same 404 as one that does not exist.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { creatorString } from '../domain/creator.ts'
import { headerNameProblem, headerValueProblem, MAX_UPSTREAM_HEADERS, MCP_SERVER_NAME, MCP_SERVER_NAME_MESSAGE } from '../domain/mcp.ts'
import { bodyDoc, readInput, unknownField } from '../http/body.ts'
import { HttpError } from '../http/errors.ts'
import type { OperationDoc } from '../http/pipeline.ts'
import { created, json, noContent, type Reply } from '../http/reply.ts'
import type { Principal } from '../services/credentials.ts'
import { MCP_SERVER_NOT_FOUND, type McpServerService, type Writer } from '../services/mcp-servers.ts'
import type { McpServer } from '../storage/mcp-servers.ts'
import { auditBy, protectedErrors, type Guard } from './access.ts'
import type { RequestContext, Route } from './deps.ts'
import { CURSOR_INVALID, decodeCursor, encodeCursor, jsonObject, PageSize, parseQuery, outboundUrlSchema, pathId } from './input.ts'

const MAX_ARGUMENT = 128
const NO_CONTROL = /^[^\u0000-\u001f\u007f]*$/

const NameSchema = v.pipe(
  v.string('Field name must be a string'),
  v.regex(MCP_SERVER_NAME, `Field name ${MCP_SERVER_NAME_MESSAGE}`),
  v.description('1–32 of a-z, 0-9 and -, starting with a letter; unique in the organization. Tools are listed as <name>__<tool>, and decided as action mcp.<name>.<tool>.'),
)

const UrlSchema = outboundUrlSchema(
  'Field url must not hold a user name or password (send credentials as headers)',
  "The upstream's Streamable HTTP endpoint. https; plain http and private, loopback or other internal addresses only with MCP_ALLOW_PRIVATE=true.",
)

const HEADERS_NOT_AN_OBJECT = 'Field headers must be a JSON object of header names to values'

/** The first header whose name or value is refused, named (never its value); null when all pass. */
function headersProblem(headers: Readonly<Record<string, string | null>>): string | null {
  for (const [name, given] of Object.entries(headers)) {
    const problem = headerNameProblem(name) ?? (given === null ? null : headerValueProblem(given))
    if (problem) return `Field headers: ${JSON.stringify(name.slice(0, 64))} ${problem}`
  }
  return null
}

function headersSchema<T extends v.GenericSchema<unknown, string | null>>(value: T, description: string) {
  return v.pipe(
    jsonObject(v.record(v.string(), value, HEADERS_NOT_AN_OBJECT), HEADERS_NOT_AN_OBJECT),
    v.check((headers) => Object.keys(headers).length <= MAX_UPSTREAM_HEADERS, `Field headers holds more than ${MAX_UPSTREAM_HEADERS} headers`),
    v.check(
      (headers) => headersProblem(headers as Record<string, string | null>) === null,
      (issue) => headersProblem(issue.input as Record<string, string | null>) ?? 'Field headers is invalid',
    ),
    v.description(description),
  )
}

const HEADER_VALUE = 'Field headers must map header names to string values'

const ResourceArgumentSchema = v.pipe(
  v.nullable(
    v.pipe(
      v.string('Field resource_argument must be a string or null'),
      v.minLength(1, 'Field resource_argument must not be empty'),
      v.maxLength(MAX_ARGUMENT, `Field resource_argument is longer than ${MAX_ARGUMENT} characters`),
      v.check((text) => NO_CONTROL.test(text), 'Field resource_argument holds a control character'),
    ),
  ),
  v.description("The tool argument whose value becomes the decision's resource (when the call gives it as a string or number); null: the resource is the server's name."),
)

const EnabledSchema = v.pipe(v.boolean('Field enabled must be true or false'), v.description('A disabled server offers no tools and takes no calls.'))

const READ_ONLY = ['server_id', 'organization_id', 'header_names', 'created_by', 'created_at', 'updated_at']

const McpServerCreateSchema = v.pipe(
  v.strictObject(
    {
      name: NameSchema,
      url: UrlSchema,
      headers: v.optional(
        headersSchema(v.string(HEADER_VALUE), 'Headers sent with every request to the upstream (a credential, say). Write-only: stored sealed, never returned nor logged; answers name them in header_names.'),
        {},
      ),
      resource_argument: v.optional(ResourceArgumentSchema, null),
      enabled: v.optional(EnabledSchema, true),
    },
    unknownField(READ_ONLY),
  ),
  v.title('McpServerCreate'),
)

const McpServerUpdateSchema = v.pipe(
  v.strictObject(
    {
      name: v.optional(NameSchema),
      url: v.optional(UrlSchema),
      headers: v.optional(
        v.nullable(
          headersSchema(
            v.nullable(v.string(HEADER_VALUE)),
            'Merged by name into the stored headers: a value sets that header, null removes it. headers: null removes every header.',
          ),
        ),
      ),
      resource_argument: v.optional(ResourceArgumentSchema),
      enabled: v.optional(EnabledSchema),
    },
    unknownField(READ_ONLY),
  ),
  v.title('McpServerUpdate'),
)

const McpServerSchema = v.pipe(
  v.object({
    server_id: v.pipe(v.string(), v.uuid()),
    organization_id: v.pipe(v.string(), v.uuid()),
    name: v.string(),
    url: v.string(),
    header_names: v.pipe(v.array(v.string()), v.description('The headers set, lower-cased and sorted; their values are never returned.')),
    resource_argument: v.nullable(v.string()),
    enabled: v.boolean(),
    created_by: v.pipe(v.string(), v.description('"user:<uuid>" or "key:<uuid>".')),
    created_at: v.pipe(v.string(), v.isoTimestamp()),
    updated_at: v.pipe(v.string(), v.isoTimestamp()),
  }),
  v.title('McpServer'),
)

const McpServerListSchema = v.pipe(
  v.object({ servers: v.array(McpServerSchema), next_cursor: v.pipe(v.nullable(v.string()), v.description('Pass as `cursor` for the next page; null on the last page.')) }),
  v.title('McpServerList'),
)

const PAGE_SIZE = PageSize(100, 50)
const ListQuerySchema = v.object({ limit: v.optional(PAGE_SIZE), cursor: v.optional(v.pipe(v.string(), v.description('next_cursor of the previous page.'))) })
const NameCursorSchema = v.strictTuple([v.pipe(v.string(), v.regex(MCP_SERVER_NAME, CURSOR_INVALID))])

const createBody = bodyDoc(McpServerCreateSchema, ['application/json'], true)
const updateBody = bodyDoc(McpServerUpdateSchema, ['application/json', 'application/merge-patch+json'], true)

export function mcpServerToJson(server: McpServer): v.InferOutput<typeof McpServerSchema> {
  return {
    server_id: server.id,
    organization_id: server.organization_id,
    name: server.name,
    url: server.url,
    header_names: server.header_names,
    resource_argument: server.resource_argument,
    enabled: server.enabled,
    created_by: server.created_by,
    created_at: server.created_at.toISOString(),
    updated_at: server.updated_at.toISOString(),
  }
}

function writerOf(ctx: RequestContext, principal: Principal): Writer {
  return { by: auditBy(ctx, principal), createdBy: creatorString(principal.userId, principal.keyId) }
}

export function mcpServerRoutes(guard: Guard, servers: McpServerService): Route[] {
  async function list(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const query = parseQuery(ListQuerySchema, request)
    const limit = query.limit ?? 50
    const after = query.cursor ? decodeCursor(query.cursor, NameCursorSchema)[0] : null
    const rows = await servers.list(principal.organizationId, { after, limit: limit + 1 })
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return json(200, { servers: page.map(mcpServerToJson), next_cursor: rows.length > limit && last ? encodeCursor([last.name]) : null })
  }

  async function create(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const input = await readInput(request, ctx, createBody)
    const server = await servers.create(principal.organizationId, input, writerOf(ctx, principal), new Date(ctx.now))
    return created(mcpServerToJson(server), `${ctx.config.productApiUrl}/mcp/servers/${server.id}`)
  }

  async function read(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'server_id')
    const server = id ? await servers.get(principal.organizationId, id) : null
    if (!server) throw new HttpError(404, MCP_SERVER_NOT_FOUND)
    return json(200, mcpServerToJson(server))
  }

  async function update(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'server_id')
    const changes = await readInput(request, ctx, updateBody)
    if (Object.keys(changes).length === 0) throw new HttpError(400, 'Request body names no field to change')
    const server = id ? await servers.update(principal.organizationId, id, changes, writerOf(ctx, principal), new Date(ctx.now)) : null
    if (!server) throw new HttpError(404, MCP_SERVER_NOT_FOUND)
    return json(200, mcpServerToJson(server))
  }

  async function remove(request: IRequest, ctx: RequestContext, principal: Principal): Promise<Reply> {
    const id = pathId(request, 'server_id')
    const deleted = id ? await servers.remove(principal.organizationId, id, writerOf(ctx, principal), new Date(ctx.now)) : false
    if (!deleted) throw new HttpError(404, MCP_SERVER_NOT_FOUND)
    return noContent()
  }

  return [
    { method: 'GET', path: '/mcp/servers', handler: guard.protect('mcp:read', list), doc: listDoc },
    { method: 'POST', path: '/mcp/servers', handler: guard.protect('mcp:manage', create), doc: createDoc },
    { method: 'GET', path: '/mcp/servers/:server_id', handler: guard.protect('mcp:read', read), doc: readDoc },
    { method: 'PATCH', path: '/mcp/servers/:server_id', handler: guard.protect('mcp:manage', update), doc: updateDoc },
    { method: 'DELETE', path: '/mcp/servers/:server_id', handler: guard.protect('mcp:manage', remove), doc: deleteDoc },
  ]
}

const TAGS = ['MCP servers']
const NOT_FOUND = { 404: 'No such MCP server in the caller\'s organization ("MCP server not found").' }
const WRITE_REFUSALS = {
  400: 'Malformed request or invalid field; a URL refused by the SSRF guard (MCP_ALLOW_PRIVATE); headers on PostgreSQL without SECRETS_KEY.',
  413: 'Body larger than the limit.',
  415: 'Content-Type not accepted.',
}

const listDoc: OperationDoc = {
  operationId: 'listMcpServers',
  summary: "List the organization's upstream MCP servers",
  description: 'In name order. Header values are never returned; header_names says which are set.',
  tags: TAGS,
  scopes: ['mcp:read'],
  query: ListQuerySchema,
  responses: { 200: { description: 'A page of servers.', schema: McpServerListSchema }, ...protectedErrors() },
}

const createDoc: OperationDoc = {
  operationId: 'createMcpServer',
  summary: 'Register an upstream MCP server',
  description:
    "Its tools are offered through the gateway (/mcp) as <name>__<tool>, each call decided as action mcp.<name>.<tool>. Headers are sealed (AES-256-GCM under SECRETS_KEY or DATA_DIR/secrets.key) before they are stored, so a database dump alone does not reveal them. Private, loopback and other internal addresses, and plain http, are refused unless MCP_ALLOW_PRIVATE=true; a host name is resolved now and again at every connection.",
  tags: TAGS,
  scopes: ['mcp:manage'],
  body: createBody,
  responses: {
    201: { description: 'Created.', schema: McpServerSchema, headers: { Location: 'URL of the new server.' } },
    ...protectedErrors({ ...WRITE_REFUSALS, 409: 'The name is taken, or the organization has reached its cap of MCP servers (MAX_MCP_SERVERS_PER_ORG).' }),
  },
}

const readDoc: OperationDoc = {
  operationId: 'getMcpServer',
  summary: 'Fetch one upstream MCP server (without header values)',
  tags: TAGS,
  scopes: ['mcp:read'],
  responses: { 200: { description: 'The server.', schema: McpServerSchema }, ...protectedErrors(NOT_FOUND) },
}

const updateDoc: OperationDoc = {
  operationId: 'updateMcpServer',
  summary: 'Change an upstream MCP server (disable it with enabled=false)',
  description: 'Fields left out keep their value; headers merge by name. A change applies to the next tool call, in every process.',
  tags: TAGS,
  scopes: ['mcp:manage'],
  body: updateBody,
  responses: {
    200: { description: 'The changed server.', schema: McpServerSchema },
    ...protectedErrors({ ...NOT_FOUND, ...WRITE_REFUSALS, 409: 'The name is taken, or the stored headers do not open with the current SECRETS_KEY (send headers: null first).' }),
  },
}

const deleteDoc: OperationDoc = {
  operationId: 'deleteMcpServer',
  summary: 'Delete an upstream MCP server',
  description: 'Its tools leave the gateway at once; the decisions about them stay.',
  tags: TAGS,
  scopes: ['mcp:manage'],
  responses: { 204: { description: 'Deleted.' }, ...protectedErrors(NOT_FOUND) },
}
