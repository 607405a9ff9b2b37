// Shared valibot pieces for values that travel from a request to the database. Validation that
// only looks plausible is not enough: valibot's isoTimestamp accepts "+05" (which Date cannot
// read) and "2030-02-30" (which Date silently turns into 2 March), and a Date far outside
// 0001–9999 is refused, or stored wrongly, by PostgreSQL or by the driver on the way there. Each
// piece here accepts exactly what the code after it can handle and answers a clear 400 for the
// rest, so a crafted value never becomes a 500.
import { decodeBase64urlIgnorePadding, encodeBase64urlNoPadding } from '@oslojs/encoding'
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import { readUuid } from '../domain/uuid.ts'
import { HttpError } from '../http/errors.ts'

/**
 * The window every stored instant must fall in, in UTC: years 0001 to 9999. Both ends render as
 * a plain RFC 3339 timestamp (Date#toISOString writes ±YYYYYY outside it), and both lie well
 * inside what JavaScript dates and PostgreSQL timestamptz can hold.
 */
export const EARLIEST_TIMESTAMP = utc(1, 1, 1, 0, 0, 0, 0)
export const LATEST_TIMESTAMP = utc(9999, 12, 31, 23, 59, 59, 999)

function utc(year: number, month: number, day: number, hour: number, minute: number, second: number, ms: number): number {
  // Date.UTC maps years 0–99 to 1900–1999; setUTCFullYear does not.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, ms)
  return date.getTime()
}

/**
 * RFC 3339 §5.6 date-time: a full date, "T", a full time with optional fraction (up to 9 digits,
 * kept to the millisecond), and either "Z" or a ±hh:mm offset. RFC 3339 allows lower-case t and
 * z; it does not allow an offset without minutes ("+05") or without its colon ("+0500").
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/

export type TimestampProblem = 'format' | 'calendar' | 'range'

function daysInMonth(year: number, month: number): number {
  return month === 2 ? (year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31
}

/**
 * The instant an RFC 3339 date-time names, or why it names none: 'format' (not RFC 3339 with
 * Z or ±hh:mm), 'calendar' (a day, time or offset that does not exist, such as 30 February or
 * a leap second, which a Date cannot hold), 'range' (outside years 0001–9999 in UTC).
 */
export function readTimestamp(text: string): Date | TimestampProblem {
  const match = RFC3339.exec(text)
  if (!match) return 'format'
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const ms = Number((match[7] ?? '').padEnd(3, '0').slice(0, 3))
  const offsetHours = match[9] === undefined ? 0 : Number(match[9])
  const offsetMinutes = match[10] === undefined ? 0 : Number(match[10])
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return 'calendar'
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return 'calendar'
  const offset = (match[8] === '-' ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000
  const instant = utc(year, month, day, hour, minute, second, ms) - offset
  if (instant < EARLIEST_TIMESTAMP || instant > LATEST_TIMESTAMP) return 'range'
  return new Date(instant)
}

function timestampMessages(field: string): Record<TimestampProblem, string> {
  return {
    format: `${field} must be an RFC 3339 date-time with Z or a ±hh:mm offset, such as 2030-01-01T00:00:00Z`,
    calendar: `${field} names a date or time that does not exist`,
    range: `${field} must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z`,
  }
}

/**
 * A request field holding an instant: an RFC 3339 string in, a valid Date out. Documented as
 * format date-time (the conversion to JSON Schema stops at the transformation).
 */
export function Timestamp(field: string, description?: string) {
  const messages = timestampMessages(`Field ${field}`)
  return v.pipe(
    v.string(messages.format),
    v.maxLength(64, messages.format),
    v.metadata({ format: 'date-time' }),
    v.description(
      description ? `${description} RFC 3339, with Z or a ±hh:mm offset; years 0001 to 9999.` : 'RFC 3339, with Z or a ±hh:mm offset; years 0001 to 9999.',
    ),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const read = readTimestamp(dataset.value)
      if (read instanceof Date) return read
      addIssue({ message: messages[read] })
      return NEVER
    }),
  )
}

/** A UUID in any case, lower-cased (RFC 9562 §4: UUIDs compare without regard to case). */
function Uuid(message: string) {
  return v.pipe(v.string(message), v.uuid(message), v.transform((text) => text.toLowerCase()))
}

/** A page size given as a query string: whole digits from 1 to `max`, read as a number. */
export function PageSize(max: number, fallback: number) {
  const message = `limit must be a whole number from 1 to ${max}`
  return v.pipe(
    v.string(message),
    v.regex(/^\d{1,4}$/, message),
    v.check((text) => Number(text) >= 1 && Number(text) <= max, message),
    v.description(`Page size, 1 to ${max} (default ${fallback}).`),
    v.transform(Number),
  )
}

/** Reads a single query or path value with a piece above; the piece's message becomes the 400. */
export function parseValue<S extends v.GenericSchema>(schema: S, value: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, value)
  if (result.success) return result.output
  throw new HttpError(400, result.issues[0].message)
}

export const CURSOR_INVALID = 'cursor is invalid; pass next_cursor from the previous page'
const MAX_CURSOR_LENGTH = 512
const BASE64URL = /^[A-Za-z0-9_-]*$/
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** The timestamp part of a cursor: what Timestamp accepts, any problem reported as one message. */
export const CursorTimestamp = v.pipe(
  v.string(),
  v.rawTransform(({ dataset, addIssue, NEVER }) => {
    const read = readTimestamp(dataset.value)
    if (read instanceof Date) return read
    addIssue({ message: CURSOR_INVALID })
    return NEVER
  }),
)

export const CursorUuid = Uuid(CURSOR_INVALID)

/** An opaque page cursor: base64url of a JSON array of strings. */
export function encodeCursor(parts: readonly string[]): string {
  return encodeBase64urlNoPadding(new TextEncoder().encode(JSON.stringify(parts)))
}

/**
 * Decodes a cursor and validates every part with `schema` (a strict tuple of pieces such as
 * CursorTimestamp and CursorUuid): a cursor is client input like any other, and one that
 * decodes to an impossible instant or a malformed id must not reach the database. Any problem
 * answers the same 400.
 */
export function decodeCursor<S extends v.GenericSchema>(cursor: string, schema: S): v.InferOutput<S> {
  if (cursor.length > MAX_CURSOR_LENGTH || !BASE64URL.test(cursor)) throw new HttpError(400, CURSOR_INVALID)
  let parts: unknown
  try {
    parts = JSON.parse(strictUtf8.decode(decodeBase64urlIgnorePadding(cursor)))
  } catch {
    throw new HttpError(400, CURSOR_INVALID)
  }
  const result = v.safeParse(schema, parts)
  if (!result.success) throw new HttpError(400, CURSOR_INVALID)
  return result.output
}

/**
 * The id a path parameter names, lower-cased, or null when it is no UUID (the caller answers the
 * same 404 as for an id that does not exist).
 */
export function pathId(request: IRequest, name: string): string | null {
  return readUuid(String(request.params[name] ?? ''))
}

/**
 * An object or record schema that refuses an array: valibot's object and record schemas take an
 * array as an object (its indexes as keys, or none at all for []), and a JSON body must say what
 * it means. The schema is otherwise unchanged, so its JSON Schema (type object) is too.
 */
export function jsonObject<S extends v.GenericSchema>(schema: S, message: string): S {
  return {
    ...schema,
    '~run'(dataset: v.UnknownDataset, config: v.Config<v.BaseIssue<unknown>>) {
      if (!Array.isArray(dataset.value)) return schema['~run'](dataset, config)
      v._addIssue(this as never, 'type', dataset, config, { message })
      return dataset
    },
  }
}

/**
 * Reads a query string with its published schema: the first value of each parameter, the first
 * problem as the 400 ("<name> is required" for a missing one). Unknown parameters are ignored.
 */
export function parseQuery<S extends v.GenericSchema>(schema: S, request: Request): v.InferOutput<S> {
  const values: Record<string, string> = Object.create(null)
  for (const [name, value] of new URL(request.url).searchParams) if (!(name in values)) values[name] = value
  const result = v.safeParse(schema, values)
  if (result.success) return result.output
  const issue = result.issues[0]
  const path = issue.path?.map((item) => String(item.key)).join('.')
  throw new HttpError(400, path && issue.input === undefined ? `${path} is required` : issue.message)
}

const MAX_URL = 2048

/** The URL, or null when it does not parse (every check below runs, even after one failed). */
function parsedUrl(text: string): URL | null {
  return URL.canParse(text) ? new URL(text) : null
}

/**
 * A URL Steward will call (a webhook endpoint, an upstream MCP server): absolute, http(s), no
 * user information, no fragment. Where it may point is checked when it is stored and called.
 */
export function outboundUrlSchema(userInfoMessage: string, description: string) {
  return v.pipe(
    v.string('Field url must be a string'),
    v.maxLength(MAX_URL, `Field url is longer than ${MAX_URL} characters`),
    v.check((text) => URL.canParse(text), 'Field url must be an absolute URL'),
    v.check((text) => ['http:', 'https:', undefined].includes(parsedUrl(text)?.protocol), 'Field url must be an https URL'),
    v.check((text) => !parsedUrl(text)?.username && !parsedUrl(text)?.password, userInfoMessage),
    v.check((text) => !parsedUrl(text)?.hash, 'Field url must not hold a fragment'),
    v.description(description),
  )
}
