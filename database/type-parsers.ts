// How a column's text becomes a JavaScript value, where Steward decides rather than the driver:
// set on each pg pool and each PGlite instance Steward opens (database/connect.ts), so rows
// reach the repositories already typed as database/schema.ts says and nothing converts them again.
// Other types keep their driver's parser.

export const INT8_OID = 20
export const TIMESTAMP_OID = 1114
export const TIMESTAMPTZ_OID = 1184

/** PostgreSQL's ISO output: a year of four digits or more, an offset to the second, an era. */
const TIMESTAMP_TEXT = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?(?:([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?)?( BC)?$/

/**
 * A timestamptz (or timestamp, read as local time) as a Date, to the millisecond. The usual text
 * goes to Date's own parser, as PGlite's default does; what that parser gets wrong or cannot read
 * (years before 1000, offsets with seconds, BC) is read field by field, as pg's default does.
 * Text that is no timestamp at all ('infinity') gives an invalid Date.
 */
export function parseTimestamp(text: string): Date {
  if (text.charCodeAt(0) !== 48 /* 0 */) {
    const date = new Date(text)
    if (!Number.isNaN(date.getTime())) return date
  }
  const m = TIMESTAMP_TEXT.exec(text)
  if (m === null) return new Date(Number.NaN)
  const year = m[12] === undefined ? Number(m[1]) : 1 - Number(m[1])
  const ms = m[7] === undefined ? 0 : Math.floor(Number(m[7]) * 1000)
  // The year is set apart: given to Date.UTC or the Date constructor, 0–99 would mean 1900–1999.
  if (m[8] === undefined) {
    const local = new Date(2000, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]), ms)
    local.setFullYear(year)
    return local
  }
  const offset = (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60 + Number(m[11] ?? 0))
  const utc = new Date(Date.UTC(2000, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]), ms))
  utc.setUTCFullYear(year)
  return new Date(utc.getTime() - offset * 1000)
}

type Parsers = Readonly<Record<number, (text: string) => unknown>>

/**
 * PGlite: timestamps. int8 keeps PGlite's parser, a number (a bigint only past 2^53, which ids,
 * counts and transaction ids never reach).
 */
export const PGLITE_PARSERS: Parsers = { [TIMESTAMP_OID]: parseTimestamp, [TIMESTAMPTZ_OID]: parseTimestamp }

/** pg: timestamps, and int8 as a number as on PGlite (pg's own parser leaves it a string). */
export const POSTGRES_PARSERS: Parsers = { ...PGLITE_PARSERS, [INT8_OID]: Number }
