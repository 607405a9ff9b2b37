// `leads export`: streams the lead lists as CSV or NDJSON, with progress on a terminal.
import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import type { Writable } from 'node:stream'
import type { Kysely } from 'kysely'
import { countLeads, streamLeads, type ExportedLead, type LeadList } from '../storage/leads.ts'
import type { Database } from '../storage/schema.ts'

export const EXPORT_COLUMNS = [
  'list', 'id', 'email', 'first_name', 'last_name', 'company', 'linkedin', 'phone', 'source', 'analytics_distinct_id', 'via', 'received_at',
] as const satisfies ReadonlyArray<keyof ExportedLead>

/** RFC 4180 quoting, and a leading ' before = + - @ TAB CR so a spreadsheet never runs a cell as a formula (OWASP CSV injection). */
export function csvCell(value: string | number | null): string {
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
}

export async function exportLeads(db: Kysely<Database>, options: ExportOptions): Promise<number> {
  const { out, progress } = options
  const total = progress ? (await Promise.all(options.lists.map((list) => countLeads(db, list)))).reduce((a, b) => a + b, 0) : 0
  let written = 0
  let lastReport = 0
  const write = async (chunk: string) => {
    if (!out.write(chunk)) await once(out, 'drain')
  }
  if (options.format === 'csv') await write(EXPORT_COLUMNS.join(',') + '\r\n')
  for (const list of options.lists) {
    for await (const lead of streamLeads(db, list)) {
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

export function openOutput(path: string | null): Writable {
  return path ? createWriteStream(path) : process.stdout
}
