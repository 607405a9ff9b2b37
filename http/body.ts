// Reading a request body the one way a route may: its text (body-text.ts), a media type the route
// accepts, the JSON object or form it holds (body-parse.ts), then validation against the schema
// the OpenAPI document publishes, a refusal worded the one way.
import * as v from 'valibot'
import type { PipelineConfig, RequestContext } from './context.ts'
import type { BodyDoc, BodyMediaType } from './surface.ts'
import { fixedError, HttpError } from './errors.ts'
import { parseForm, parseJsonObject } from './body-parse.ts'
import { mediaType, readText } from './body-text.ts'

/** The body formats a route may accept. */
export type BodyFormat = 'json' | 'form' | 'text/plain-json'

export interface BodyOptions {
  /** Accepted formats: `json` (application/json, any +json), `form` (x-www-form-urlencoded), `text/plain-json` (text/plain or no type, holding JSON: no CORS preflight). */
  readonly accept: readonly BodyFormat[]
  /** An empty body reads as `{}` (whatever its type). */
  readonly optional?: boolean
}

export interface Body {
  readonly form: boolean
  readonly params: Record<string, unknown>
}

/**
 * The one body reader: reads the text (bounded, timed), refuses a media type the route does not
 * accept (415), and parses a JSON object or a form with the shared checks.
 */
export function readBody(request: Request, ctx: RequestContext<PipelineConfig>, options: BodyOptions): Promise<Body> {
  const type = mediaType(request)
  const format = formatOf(type, options.accept)
  // A lead post (text/plain accepted) refuses its type before reading; other routes read first,
  // so an over-long body is a 413 whatever its type, and an optional empty body has no type.
  if (format === null && options.accept.includes('text/plain-json')) return Promise.reject(unsupported(type, options.accept))
  return readText(request, ctx.config.bodyLimitBytes, ctx.config.bodyTimeoutMs).then((text) => {
    if (options.optional && text.trim() === '') return { form: false, params: {} }
    if (format === null) throw unsupported(type, options.accept)
    return format === 'form' ? { form: true, params: parseForm(text) } : { form: false, params: parseJsonObject(text) }
  })
}

function formatOf(type: string, accept: readonly BodyFormat[]): 'json' | 'form' | null {
  if (type === 'application/json' || type.endsWith('+json')) return 'json'
  if (accept.includes('text/plain-json') && (type === '' || type === 'text/plain')) return 'json'
  if (accept.includes('form') && type === 'application/x-www-form-urlencoded') return 'form'
  return null
}

function unsupported(type: string, accept: readonly BodyFormat[]): HttpError {
  const what = accept.includes('form') ? 'application/json or application/x-www-form-urlencoded' : 'application/json'
  return new HttpError(415, `Content-Type ${type || '(none)'} is not supported; send ${what}`)
}

/**
 * The one way valibot issues become a 400: the first issue's message, with the field it concerns
 * when the message does not name it; a missing field is "Field X is required".
 */
export function parseWith<S extends v.GenericSchema>(schema: S, input: unknown, precedence: readonly string[] = []): v.InferOutput<S> {
  return orThrow(checkWith(schema, input, precedence))
}

/** The value, or the refusal thrown. */
function orThrow<T>(checked: T | HttpError): T {
  if (checked instanceof HttpError) throw checked
  return checked
}

/** valibot's own setting: stop at the first issue. */
const FIRST_ISSUE_ONLY = Object.freeze({ abortEarly: true })

/**
 * `parseWith` with the 400 returned instead of thrown. With a precedence, the schema runs first
 * up to its first issue: a valid body passes the same way, and when that issue already carries
 * the message that wins over every other, nothing a full run could add changes the answer, so the
 * other issues are never built (on a lead post missing fields, four of five). Any other first
 * issue gets the full run, whose issues decide as before.
 */
function checkWith<S extends v.GenericSchema>(schema: S, input: unknown, precedence: readonly string[] = []): v.InferOutput<S> | HttpError {
  if (precedence.length > 0) {
    const early = v.safeParse(schema, input, FIRST_ISSUE_ONLY)
    if (early.success) return early.output
    if (early.issues[0].message === precedence[0]) return precedenceRefusal(precedence[0]!)
  }
  const result = v.safeParse(schema, input)
  return result.success ? result.output : new HttpError(400, firstProblem(result.issues, precedence))
}

/** The 400 of a precedence message, the same on every request that earns it: a fixed refusal, made once. */
function precedenceRefusal(message: string): HttpError {
  let refusal = PRECEDENCE_REFUSALS.get(message)
  if (refusal === undefined) PRECEDENCE_REFUSALS.set(message, (refusal = fixedError(400, message)))
  return refusal
}

/** The messages come from the routes' body docs: a few, fixed in the code. */
const PRECEDENCE_REFUSALS = new Map<string, HttpError>()

/** The message of the problem that wins: a listed message in order, then an unknown field, then the first. */
function firstProblem(issues: readonly v.BaseIssue<unknown>[], precedence: readonly string[]): string {
  for (const message of precedence) if (issues.some((issue) => issue.message === message)) return message
  // A field the schema does not know wins over any other problem (OWASP API3: mass assignment).
  const unknown = issues.find((issue) => issue.type === 'strict_object' && issue.expected === 'never')
  return issueMessage(unknown ?? issues[0]!)
}

const FORMATS: Readonly<Record<BodyMediaType, BodyFormat>> = {
  'application/json': 'json',
  'application/merge-patch+json': 'json',
  'application/x-www-form-urlencoded': 'form',
  'text/plain': 'text/plain-json',
}

/**
 * Reads and validates a body exactly as its doc publishes it: the doc's media types, its schema,
 * its precedence of messages. Handlers read bodies only through here (or `readBody` when the
 * shape depends on the content, as at the token endpoint).
 */
export async function readInput<S extends v.GenericSchema>(request: Request, ctx: RequestContext<PipelineConfig>, doc: BodyDoc<S>): Promise<v.InferOutput<S>> {
  return orThrow(await readInputOrRefusal(request, ctx, doc))
}

/**
 * `readInput` with the refusal (413, 415, 400…) returned as an HttpError instead of thrown, for
 * routes where refusals are the expected load (the public lead forms): a handler returns it and
 * the pipeline answers it exactly as a thrown one (docs/architecture.md, "Refusals returned").
 * Anything else (the client going away, a fault) still rejects.
 */
export function readInputOrRefusal<S extends v.GenericSchema>(request: Request, ctx: RequestContext<PipelineConfig>, doc: BodyDoc<S>): Promise<v.InferOutput<S> | HttpError> {
  return readBody(request, ctx, optionsOf(doc)).then(
    ({ params }) => checkInput(doc, params),
    (error: unknown) => (error instanceof HttpError ? error : Promise.reject(error)),
  )
}

/** What `readBody` is told for a doc, worked out once per doc rather than once per request. */
const OPTIONS = new WeakMap<BodyDoc, BodyOptions>()
function optionsOf(doc: BodyDoc): BodyOptions {
  let options = OPTIONS.get(doc)
  if (options === undefined) OPTIONS.set(doc, (options = { accept: doc.mediaTypes.map((type) => FORMATS[type]), optional: !doc.required }))
  return options
}

/** Validates an already-read body as `doc` publishes it. */
export function validateInput<S extends v.GenericSchema>(doc: BodyDoc<S>, params: Record<string, unknown>): v.InferOutput<S> {
  return orThrow(checkInput(doc, params))
}

/** The body's value as `doc` publishes it, or the 400 that says what is wrong. */
function checkInput<S extends v.GenericSchema>(doc: BodyDoc<S>, params: Record<string, unknown>): v.InferOutput<S> | HttpError {
  let input = params
  // A copy without the nulls, made only when there is one (most bodies have none).
  if (doc.nullIsAbsent && hasNull(params)) {
    input = {}
    for (const [key, value] of Object.entries(params)) if (value !== null) input[key] = value
  }
  return checkWith(doc.schema, input, doc.precedence)
}

function hasNull(params: Record<string, unknown>): boolean {
  for (const key in params) if (params[key] === null) return true
  return false
}

/** A body doc with its schema's type kept, for `readInput`. */
export function bodyDoc<S extends v.GenericSchema>(schema: S, mediaTypes: readonly BodyMediaType[], required: boolean, extra: Pick<BodyDoc, 'precedence' | 'nullIsAbsent'> = {}): BodyDoc<S> {
  return { schema, mediaTypes, required, ...extra }
}

function issueMessage(issue: v.BaseIssue<unknown>): string {
  const path = issue.path?.map((item) => String(item.key)).join('.')
  if (path && issue.input === undefined && issue.path?.length === 1) return `Field ${path} is required`
  // A missing field inside a list item (a replay's drafts): name the field and where it is.
  if (path && issue.input === undefined) return `Field ${String(issue.path!.at(-1)!.key)} is required (at ${path})`
  const message = issue.message
  return path && !message.includes(path) ? `${message} (at ${path})` : message
}

/** What `unknownField` may also say: a nested object's type message, a retired field's own message. */
export interface UnknownFieldOptions {
  /** The message when the value is not an object at all (a nested object such as approval). */
  readonly notAnObject?: string
  /** Fields that once existed, each with the message that says what replaced it. */
  readonly retired?: Readonly<Record<string, string>>
}

/**
 * The message of a strict object's unknown key: fields the server owns are "read-only", any other
 * is unknown. `readOnly` names response fields, not the schema's keys.
 */
export function unknownField(readOnly: readonly string[] = [], options: UnknownFieldOptions = {}): (issue: v.BaseIssue<unknown>) => string {
  // Called for a missing field too (the object's own message): parseWith words that one itself.
  return (issue) => {
    if (issue.expected === 'Object' && options.notAnObject !== undefined) return options.notAnObject
    const key = String(issue.path?.[issue.path.length - 1]?.key ?? '')
    // Own keys only: a field named valueOf or constructor must not find Object.prototype's.
    const retired = issue.expected === 'never' && options.retired && Object.hasOwn(options.retired, key) ? options.retired[key] : undefined
    if (retired !== undefined) return retired
    return readOnly.includes(key) ? `Field ${key} is read-only` : `Unknown field: ${key}`
  }
}
