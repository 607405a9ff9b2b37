// `policy replay`: what draft policies would have decided on an organization's logged decisions,
// the same computation as POST /policies/replay, run on the database (or by the running server
// holding DATA_DIR, like every other command). Prints the answer as JSON on stdout.
import { readFile, stat } from 'node:fs/promises'
import { UUID } from '../domain/uuid.ts'
import { HttpError } from '../http/errors.ts'
import { MAX_REPLAY } from '../domain/replay.ts'
import { findOrganization } from '../storage/organizations.ts'
import { CommandFailed, UsageError, type Command, type Options } from './command.ts'
import { withDatabase } from './database.ts'

/** What POST /policies/replay answers. */
interface ReplayAnswer {
  readonly evaluated: number
  readonly changed: Readonly<Record<string, number>>
}

/** Far more than any set of 1,000 drafts needs; a bigger file is a mistake, not drafts. */
const MAX_FILE_BYTES = 16 * 1024 * 1024

function text(options: Options, name: string): string | undefined {
  const value = options[name]
  return typeof value === 'string' ? value : undefined
}

// The route's own schema checks the value; this only words the usual mistake as a usage error.
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/

function timestampOption(options: Options, name: string): string | undefined {
  const value = text(options, name)
  if (value !== undefined && (!RFC3339.test(value) || Number.isNaN(Date.parse(value)))) throw new UsageError(`--${name} must be an RFC 3339 date-time such as 2026-11-01T00:00:00Z`)
  return value
}

function limitOption(options: Options): number | undefined {
  const value = text(options, 'limit')
  if (value === undefined) return undefined
  if (!/^\d{1,6}$/.test(value) || Number(value) < 1 || Number(value) > MAX_REPLAY) throw new UsageError(`--limit must be a whole number from 1 to ${MAX_REPLAY}`)
  return Number(value)
}

/** The drafts file: a JSON array of drafts, or an object with a `policies` array. */
async function readDrafts(path: string): Promise<unknown> {
  let content: string
  try {
    if ((await stat(path)).size > MAX_FILE_BYTES) throw new CommandFailed(`${path} is larger than ${MAX_FILE_BYTES} bytes`)
    content = await readFile(path, 'utf8')
  } catch (error) {
    if (error instanceof CommandFailed) throw error
    throw new CommandFailed(`cannot read ${path} (${(error as { code?: string }).code ?? 'error'})`)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(content)
  } catch {
    throw new CommandFailed(`${path} is not JSON: write an array of draft policies, or {"policies": [...]}`)
  }
  if (Array.isArray(parsed)) return parsed
  if (typeof parsed === 'object' && parsed !== null && Array.isArray((parsed as { policies?: unknown }).policies)) return (parsed as { policies: unknown }).policies
  throw new CommandFailed(`${path} must hold an array of draft policies, or {"policies": [...]}`)
}

const policyReplay: Command = {
  name: 'policy replay',
  summary: "replay an organization's logged decisions against draft policies; prints what would change (JSON)",
  options: {
    org: { type: 'string', value: 'ID', description: "the organization's id, as org create prints it", required: true },
    file: { type: 'string', value: 'FILE', description: 'a JSON file: an array of draft policies (bodies of POST /policies, with policy_id to stand in for a stored one)', required: true },
    from: { type: 'string', value: 'TIME', description: 'only decisions made at or after TIME (RFC 3339)' },
    to: { type: 'string', value: 'TIME', description: 'only decisions made before TIME (RFC 3339)' },
    limit: { type: 'string', value: 'N', description: `the newest N decisions in the window, 1 to ${MAX_REPLAY}`, default: '10000' },
  },
  notes: 'The answer is {"evaluated", "changed": {"<old>→<new>": n}, "sample": [...]}, as POST /policies/replay gives it.\nNothing is written. Drafts are checked like POST /policies; a problem names the draft.',
  async run({ options, config, io, operations, database }) {
    if (!operations) throw new CommandFailed('policy replay needs the product API: run it through server.ts')
    const orgId = text(options, 'org') ?? ''
    if (!UUID.test(orgId)) throw new UsageError('--org must be a UUID')
    const from = timestampOption(options, 'from')
    const to = timestampOption(options, 'to')
    const limit = limitOption(options)
    const drafts = await readDrafts(text(options, 'file') ?? '')
    const body = { policies: drafts, ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }), ...(limit === undefined ? {} : { limit }) }
    return withDatabase({ config, database }, async ({ db }) => {
      const organizationId = orgId.toLowerCase()
      if (!(await findOrganization(db, organizationId))) throw new UsageError(`no organization ${orgId}`)
      let answer: ReplayAnswer
      try {
        answer = (await operations.replayPolicies(db, organizationId, body)) as ReplayAnswer
      } catch (error) {
        // A refused draft, or one naming a policy the organization does not have.
        if (error instanceof HttpError) throw new CommandFailed(error.message)
        throw error
      }
      io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`)
      io.stderr.write(`replayed ${answer!.evaluated} decisions; ${Object.values(answer!.changed).reduce((a, b) => a + b, 0)} would change\n`)
      return 0
    })
  },
}

export const policyCommands: readonly Command[] = [policyReplay]
