// `leads export`: streams the lead lists as CSV or NDJSON, with progress on a terminal.
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { createWriteStream, openSync, statSync, type Stats } from 'node:fs'
import { rename, unlink } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import type { Writable } from 'node:stream'
import type { Kysely } from 'kysely'
import { countLeads, streamLeads, type ExportedLead, type LeadList } from '../storage/leads.ts'
import { pendingLeadIds } from '../storage/lead-subscriptions.ts'
import type { Database } from '../database/schema.ts'
import { CommandFailed } from './command.ts'

export const EXPORT_COLUMNS = [
  'list', 'id', 'email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id', 'via', 'received_at', 'status', 'unsubscribe_url',
] as const satisfies ReadonlyArray<keyof ExportRow>

/**
 * A lead as exported: a newsletter subscriber also carries its status (pending until confirmed,
 * under double opt-in) and its one-click unsubscribe URL, for whatever sends the newsletter.
 */
type ExportRow = ExportedLead & { status: string | null; unsubscribe_url: string | null }

/** RFC 4180 quoting, and a leading ' before = + - @ TAB CR so a spreadsheet never runs a cell as a formula (OWASP CSV injection). */
function csvCell(value: string | number | null): string {
  if (value === null) return ''
  let text = String(value)
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

export interface ExportOptions {
  readonly lists: readonly LeadList[]
  readonly format: 'csv' | 'ndjson'
  readonly out: Writable
  /** Where progress goes (a terminal); null for none. */
  readonly progress: Writable | null
  /** The unsubscribe URL of a newsletter lead (services/lead-mail.ts); absent or null: none. */
  readonly unsubscribeUrl?: (leadId: number) => string | null
}

export async function exportLeads(db: Kysely<Database>, options: ExportOptions): Promise<number> {
  const { out, progress } = options
  const total = progress ? (await Promise.all(options.lists.map((list) => countLeads(db, list)))).reduce((a, b) => a + b, 0) : 0
  let written = 0
  let lastReport = 0
  const write = async (chunk: string) => {
    // A stream that failed (disk full, closed pipe) never drains: stop instead of waiting forever.
    if (out.errored) throw out.errored
    if (!out.write(chunk)) await once(out, 'drain')
  }
  if (options.format === 'csv') await write(EXPORT_COLUMNS.join(',') + '\r\n')
  for (const list of options.lists) {
    // Pending subscriptions are few (they expire within days): one read, not one per lead.
    const pending = list === 'newsletter' ? await pendingLeadIds(db) : null
    for await (const found of streamLeads(db, list)) {
      const lead: ExportRow = {
        ...found,
        status: pending ? (pending.has(found.id) ? 'pending' : 'active') : null,
        unsubscribe_url: pending ? (options.unsubscribeUrl?.(found.id) ?? null) : null,
      }
      await write(
        options.format === 'csv'
          ? EXPORT_COLUMNS.map((column) => csvCell(lead[column])).join(',') + '\r\n'
          : JSON.stringify(lead) + '\n',
      )
      written++
      if (progress && (written - lastReport >= 1000 || written === total)) {
        lastReport = written
        progress.write(`\rexported ${written} of ${total} leads (${total ? Math.floor((written / total) * 100) : 100}%)`)
      }
    }
  }
  if (progress) progress.write(`\rexported ${written} of ${total} leads (100%)\n`)
  return written
}

/** A file being written by an export: it takes its final name only once complete. */
export interface Output {
  readonly stream: Writable
  /** Flushes the file and gives it its name (replacing any file there). */
  commit(): Promise<void>
  /** Drops what was written, leaving whatever was at the path before. */
  abort(): Promise<void>
}

/**
 * Opens an export's destination. A regular file is written beside its final path and renamed
 * into place on success, so a failed or interrupted export never leaves a truncated file that
 * looks complete; leads are personal data, so the file is readable by its owner only.
 * A device or pipe (/dev/stdout, a FIFO) is written in place: renaming over it would replace it.
 */
export async function openOutput(path: string): Promise<Output> {
  const existing = statOrNull(path)
  if (existing?.isDirectory()) throw new CommandFailed(`cannot write ${path}: it is a directory`)
  const inPlace = existing !== null && !existing.isFile()
  const partial = inPlace ? path : join(dirname(path), `.${basename(path)}.${randomBytes(4).toString('hex')}.partial`)
  let fd: number
  try {
    fd = openSync(partial, inPlace ? 'w' : 'wx', 0o600)
  } catch (error) {
    throw cannotWrite(path, error)
  }
  const stream = createWriteStream(partial, { fd })
  // Recorded here, rethrown by the writer or by commit: an 'error' with no listener would crash.
  stream.on('error', () => {})
  const closed = once(stream, 'close').catch(() => {})
  const abort = async (): Promise<void> => {
    if (!stream.destroyed) stream.destroy()
    await closed
    if (!inPlace) await unlink(partial).catch(() => {})
  }
  return {
    stream,
    abort,
    async commit() {
      try {
        await new Promise<void>((resolve, reject) => stream.end((error?: Error | null) => (error ? reject(error) : resolve())))
        if (stream.errored) throw stream.errored
        if (!inPlace) await rename(partial, path)
      } catch (error) {
        await abort()
        throw cannotWrite(path, error)
      }
    },
  }
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw cannotWrite(path, error)
  }
}

const REASONS: Readonly<Record<string, string>> = {
  ENOENT: 'its directory does not exist',
  ENOTDIR: 'a part of the path is not a directory',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  EISDIR: 'it is a directory',
  EEXIST: 'a temporary file of the same name exists',
}

/** One line naming the path and the reason, for a failure to create or write an export file. */
export function cannotWrite(path: string, error: unknown): CommandFailed {
  if (error instanceof CommandFailed) return error
  const { code, message } = error as NodeJS.ErrnoException
  const reason = (code && REASONS[code]) ?? String(message ?? error).split('\n')[0]
  return new CommandFailed(`cannot write ${path}: ${reason}${code ? ` (${code})` : ''}`)
}
