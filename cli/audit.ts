// `audit export` and `audit prune`: the operator's side of the audit log. Export streams an
// organization's events (constant memory: keyset pages by event_id, each write waiting for the
// output to drain) and records how far it reached; prune deletes what retention allows, and only
// what an export has covered.
import { once } from 'node:events'
import type { Writable } from 'node:stream'
import type { Kysely } from 'kysely'
import { UUID } from '../domain/uuid.ts'
import { settledBelowXid, streamAuditEvents, type AuditEventRow } from '../storage/audit-read.ts'
import { pruneAuditEvents, recordExport } from '../storage/audit-retention.ts'
import { findOrganization } from '../storage/organizations.ts'
import type { Database } from '../database/schema.ts'
import { CommandFailed, UsageError, type Command, type Options, type OptionSpec } from './command.ts'
import { withDatabase } from './database.ts'
import { cannotWrite, openOutput } from './export.ts'

const ORG: OptionSpec = { type: 'string', value: 'ID', description: "the organization's id, as org create prints it", required: true }

export const AUDIT_CSV_COLUMNS = ['event_id', 'organization_id', 'occurred_at', 'actor_type', 'actor_id', 'type', 'target_type', 'target_id', 'data', 'request_id'] as const

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

function text(options: Options, name: string): string | undefined {
  const value = options[name]
  return typeof value === 'string' ? value : undefined
}

function orgOption(options: Options): string {
  const value = text(options, 'org') ?? ''
  if (!UUID.test(value)) throw new UsageError('--org must be a UUID')
  return value.toLowerCase()
}

function timeOption(options: Options, name: string): Date | null {
  const value = text(options, name)
  if (value === undefined) return null
  const at = Date.parse(value)
  if (!RFC3339.test(value) || Number.isNaN(at)) throw new UsageError(`--${name} must be an RFC 3339 date-time such as 2026-11-01T00:00:00Z`)
  return new Date(at)
}

/** One event as GET /audit shows it. */
export function exportRecord(row: AuditEventRow): Record<string, unknown> {
  return {
    event_id: row.event_id,
    organization_id: row.organization_id,
    occurred_at: row.occurred_at.toISOString(),
    actor: { type: row.actor_type, id: row.actor_id },
    type: row.type,
    target: { type: row.target_type, id: row.target_id },
    data: row.data,
    request_id: row.request_id,
  }
}

/**
 * RFC 4180: a cell with a comma, quote, CR or LF is quoted, quotes doubled. A cell starting with
 * = + - @ (or TAB, CR) gets a leading ' so a spreadsheet shows it as text instead of running it
 * as a formula (CSV injection); `data` is a JSON object, so it starts with {.
 */
export function csvCell(value: string | number | null): string {
  if (value === null) return ''
  let cell = String(value)
  if (typeof value === 'string' && /^[=+\-@\t\r]/.test(cell)) cell = `'${cell}`
  return /[",\r\n]/.test(cell) ? `"${cell.replace(/"/g, '""')}"` : cell
}

export function csvLine(row: AuditEventRow): string {
  const cells: (string | number | null)[] = [
    row.event_id,
    row.organization_id,
    row.occurred_at.toISOString(),
    row.actor_type,
    row.actor_id,
    row.type,
    row.target_type,
    row.target_id,
    JSON.stringify(row.data),
    row.request_id,
  ]
  return cells.map(csvCell).join(',') + '\r\n'
}

export interface AuditExportOptions {
  readonly organizationId: string
  readonly format: 'ndjson' | 'csv'
  readonly from: Date | null
  readonly to: Date | null
  readonly out: Writable
  /** Where progress goes (a terminal); null for none. */
  readonly progress: Writable | null
  readonly pageSize?: number
}

/** Streams the events, then records the export; the count and the last event id written. */
export async function exportAuditEvents(db: Kysely<Database>, options: AuditExportOptions): Promise<{ events: number; throughEventId: number; pages: number; belowXid: number }> {
  const { out, progress } = options
  const write = async (chunk: string) => {
    // A stream that failed (disk full, closed pipe) never drains: stop instead of waiting forever.
    if (out.errored) throw out.errored
    if (!out.write(chunk)) await once(out, 'drain')
  }
  const belowXid = await settledBelowXid(db)
  const filter = { types: [], from: options.from, to: options.to }
  if (options.format === 'csv') await write(AUDIT_CSV_COLUMNS.join(',') + '\r\n')
  let events = 0
  let pages = 0
  let throughEventId = 0
  for await (const page of streamAuditEvents(db, options.organizationId, filter, { belowXid, pageSize: options.pageSize })) {
    pages++
    // One write per page: the page is already in memory, and the drain wait bounds what is buffered.
    await write(page.map((row) => (options.format === 'csv' ? csvLine(row) : JSON.stringify(exportRecord(row)) + '\n')).join(''))
    events += page.length
    throughEventId = page[page.length - 1]!.event_id
    progress?.write(`\rexported ${events} events`)
  }
  progress?.write(`\rexported ${events} events\n`)
  return { events, throughEventId, pages, belowXid }
}

const auditExport: Command = {
  name: 'audit export',
  summary: "stream an organization's audit events as NDJSON or CSV (stdout by default) and record the export",
  options: {
    org: ORG,
    format: { type: 'string', value: 'FORMAT', description: 'one JSON object per line (as GET /audit shows events), or CSV (spreadsheet-safe, data as a JSON column)', choices: ['ndjson', 'csv'], default: 'ndjson' },
    output: { type: 'string', value: 'FILE', description: 'write to FILE instead of stdout; it appears only once the export is complete' },
    from: { type: 'string', value: 'TIME', description: 'only events that occurred at or after TIME (RFC 3339)' },
    to: { type: 'string', value: 'TIME', description: 'only events that occurred before TIME (RFC 3339)' },
  },
  notes:
    'Oldest first, in event_id order, a page of 1,000 at a time. Events still being written when the export starts wait for the next one. The export is recorded (audit_exports and an audit.exported event); one without --from and --to lets `audit prune` delete what it covered.',
  async run({ options, config, io, database }) {
    const organizationId = orgOption(options)
    const format = options.format as 'ndjson' | 'csv'
    const from = timeOption(options, 'from')
    const to = timeOption(options, 'to')
    if (from && to && from.getTime() >= to.getTime()) throw new UsageError('--from must be before --to')
    const path = text(options, 'output') || null
    return withDatabase({ config, database }, async ({ db }) => {
      if (!(await findOrganization(db, organizationId))) throw new UsageError(`no organization ${organizationId}`)
      // Opened once the organization is known: a failed export leaves no file.
      const output = path ? await openOutput(path) : null
      const out = output ? output.stream : (io.stdout as unknown as Writable)
      const startedAt = new Date()
      try {
        const result = await exportAuditEvents(db, { organizationId, format, from, to, out, progress: io.stderr.isTTY ? (io.stderr as unknown as Writable) : null })
        if (output) await output.commit()
        await recordExport(db, { organizationId, throughEventId: result.throughEventId, format, events: result.events, complete: from === null && to === null, belowXid: result.belowXid, from, to, exportedAt: startedAt })
        if (path) io.stderr.write(`wrote ${result.events} events to ${path}\n`)
        return 0
      } catch (error) {
        if (!output) throw error
        await output.abort()
        throw output.stream.errored ? cannotWrite(path!, output.stream.errored) : error
      }
    })
  },
}

const auditPrune: Command = {
  name: 'audit prune',
  summary: 'delete audit events older than the retention (audit_retention_days), once an export has covered them',
  options: { org: ORG },
  notes:
    'Deletes whole sealed ranges only (every event of a range must be older than the retention), and only when a complete `audit export` (no --from/--to) covered every one of them; otherwise it deletes nothing and exits 1. Records an audit.pruned event.',
  async run({ options, config, io, database }) {
    const organizationId = orgOption(options)
    return withDatabase({ config, database }, async ({ db }) => {
      if (!(await findOrganization(db, organizationId))) throw new UsageError(`no organization ${organizationId}`)
      const outcome = await pruneAuditEvents(db, organizationId, new Date())
      switch (outcome.kind) {
        case 'no-seals':
          io.stdout.write('nothing pruned: the audit log has no seal yet, and only sealed ranges are deleted\n')
          return 0
        case 'nothing':
          io.stdout.write(`nothing pruned: no sealed range is wholly older than ${outcome.retentionDays} days\n`)
          return 0
        case 'not-exported':
          throw new CommandFailed(`${outcome.uncovered} event(s) older than the retention (${outcome.retentionDays} days) have not been exported: export first (steward audit export --org ${organizationId} --output FILE), then prune again; nothing was deleted`)
        case 'pruned':
          io.stdout.write(`pruned ${outcome.deleted} event(s) through seal ${outcome.throughSealId} (older than ${outcome.retentionDays} days)\n`)
          return 0
      }
    })
  },
}

export const auditCommands: readonly Command[] = [auditExport, auditPrune]
