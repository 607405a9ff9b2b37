// Statements sent as named prepared statements on PostgreSQL (the pool in database/connect.ts
// recognizes the mark).
import { createHash } from 'node:crypto'

/**
 * Marks a statement text to be sent as a named prepared statement on PostgreSQL: each connection
 * parses and plans it once, then only binds and executes. For a few fixed texts on hot paths (the
 * decision log's inserts, a change with its audit event), where planning was a third of the
 * statement: the guarded insert took 0.54 ms sent unnamed and 0.40 ms prepared, one at a time on
 * the local PostgreSQL. Only texts a caller keeps to a small, fixed set may be marked: each one
 * stays prepared on every connection for its life. On PGlite the mark is a comment and changes
 * nothing: every query is prepared there (pglite-statements.ts). (Named statements need a session
 * per client: behind PgBouncer, use its session mode, which LISTEN needs anyway.)
 */
export function preparedText(text: string): string {
  return `${PREPARED_MARK}${text}`
}
export const PREPARED_MARK = '/* prepared */ '
/** Statement name per marked text: a digest, so two texts never share one. */
const preparedNames = new Map<string, string>()
export function preparedName(text: string): string {
  let name = preparedNames.get(text)
  if (name === undefined) {
    name = `steward_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`
    preparedNames.set(text, name)
  }
  return name
}
