// What a route file writes against: a route (method, path, handler, published doc) and a surface
// (its routes plus its error format and headers). pipeline.ts turns surfaces into one fetch handler;
// the discovery documents read the same objects, so what is published is what is served.
import type { IRequest } from 'itty-router'
import type { GenericSchema } from 'valibot'
import type { PipelineConfig, PipelineDeps, RequestContext } from './context.ts'
import type { HttpError } from './errors.ts'
import type { Reply } from './reply.ts'

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * Handlers answer with a Reply (reply.ts `json`, `created`, `noContent`); fetch builds the Response.
 * A refusal may be thrown as an HttpError or returned as one; the pipeline answers both the same
 * way. Returning is for refusals on hot paths (a bad credential): a throw that crosses an `await`
 * costs far more than a return.
 */
export type RouteHandler<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> = (
  request: IRequest,
  ctx: RequestContext<C, D>,
) => Reply | HttpError | Promise<Reply | HttpError>

export interface ResponseDoc {
  readonly description: string
  /** valibot schema of the JSON body; omitted for bodiless responses. */
  readonly schema?: GenericSchema
  /** Media type of the body when it is not application/json (e.g. text/plain for llms.txt). */
  readonly mediaType?: string
  /** Response headers worth documenting (name → description). */
  readonly headers?: Readonly<Record<string, string>>
}

/**
 * A request body as published and as validated: `readInput` (body.ts) reads a body with exactly
 * these media types and this schema, so the OpenAPI document cannot drift from the code.
 */
export interface BodyDoc<S extends GenericSchema = GenericSchema> {
  readonly schema: S
  /** application/json, application/x-www-form-urlencoded, text/plain (holding JSON). */
  readonly mediaTypes: readonly BodyMediaType[]
  /** false: an empty body reads as {}. */
  readonly required: boolean
  /** Messages that win over any other problem, in this order (e.g. "Missing required fields"). */
  readonly precedence?: readonly string[]
  /** A JSON null counts as an absent field. */
  readonly nullIsAbsent?: boolean
}

export type BodyMediaType = 'application/json' | 'application/merge-patch+json' | 'application/x-www-form-urlencoded' | 'text/plain'

/**
 * What the OpenAPI document says of a route. Written beside the route, from the same valibot
 * schemas the handler validates with, so the document cannot drift from the code.
 */
export interface OperationDoc {
  readonly operationId: string
  readonly summary: string
  readonly description?: string
  readonly tags: readonly string[]
  /** null: public (`security: []`); otherwise the bearer scheme with these scopes. */
  readonly scopes: readonly string[] | null
  /** valibot object schema of the query parameters. */
  readonly query?: GenericSchema
  /** The request body: the handler reads it through this very object (body.ts `readInput`). */
  readonly body?: BodyDoc
  /** Request headers worth documenting (name → description), e.g. Service-Api-Version. */
  readonly headers?: Readonly<Record<string, string>>
  readonly responses: Readonly<Record<number, ResponseDoc>>
  readonly deprecated?: boolean
}

export interface Route<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> {
  readonly method: Method
  /** itty-router pattern, e.g. "/policies/:policy_id". */
  readonly path: string
  readonly handler: RouteHandler<C, D>
  /** What the OpenAPI document says of it: every route is published. */
  readonly doc: OperationDoc
}

export interface Surface<C extends PipelineConfig = PipelineConfig, D extends PipelineDeps = PipelineDeps> {
  readonly name: string
  readonly routes: readonly Route<C, D>[]
  /**
   * The body of an error response on this surface. A function of its arguments alone: the body of
   * a fixed refusal (errors.ts `fixedError`) is computed once and reused.
   */
  errorBody(status: number, error: HttpError): unknown
  /** Headers on every response of this surface (e.g. Cache-Control: no-store). */
  readonly headers?: Readonly<Record<string, string>>
  /** Starts background work (timers, LISTEN connections); nothing runs before it. */
  start?(): void
  /** Stops what start() began. */
  close?(): Promise<void>
}

/** What the discovery documents read of a route: its method, path and doc. */
export type PublishedRoute = Pick<Route, 'method' | 'path' | 'doc'>

/** What the discovery documents read of a surface: its name and routes, whatever its context types. */
export interface PublishedSurface {
  readonly name: string
  readonly routes: readonly PublishedRoute[]
}
