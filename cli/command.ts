// The shape of an operator command, and the one flag parser they share: each command declares its
// options, and anything it did not declare is refused (a mistyped `--lst demo` must not export
// every list), through `node:util`'s parseArgs, which Node, Bun and Deno all provide.
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs, type ParseArgsConfig } from 'node:util'
import type { Kysely } from 'kysely'
import type { Config } from '../config.ts'
import type { FetchHandler } from '../http/pipeline.ts'
import type { PoolStats } from '../services/telemetry.ts'
import type { Logger } from '../log.ts'
import type { DatabaseHandle } from '../database/connect.ts'
import type { RateLimitStore } from '../storage/ratelimits.ts'
import type { Database } from '../database/schema.ts'

/** Where a command reads and writes. Tests pass streams; stdin may be absent (no input at all). */
export interface Io {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean }
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean }
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?: (mode: boolean) => unknown }
}

export type Env = Readonly<Record<string, string | undefined>>

export interface OptionSpec {
  readonly type: 'string' | 'boolean'
  readonly description: string
  /** The value's name in the usage line, e.g. ID. */
  readonly value?: string
  readonly required?: boolean
  /** The only accepted values (checked before the command runs, listed in the help). */
  readonly choices?: readonly string[]
  readonly default?: string
}

export type Options = Readonly<Record<string, string | boolean | undefined>>

export interface CommandContext {
  readonly options: Options
  readonly config: Config
  readonly io: Io
  /** The process environment, for the few inputs that are deliberately not configuration (a password). */
  readonly env: Env
  /**
   * Told the id of a key or user whose credentials the command changed, once the change is
   * committed. A running server carrying out the command drops its cached lookups of that id
   * here, so a revocation holds from the very next request; absent when the command runs alone.
   */
  readonly credentialsChanged?: (id: string) => void
  /** Builds the handler `start` serves (server.ts passes its createHandler). */
  readonly buildApp?: BuildApp
  /** Product API work that commands share with routes, handed in by server.ts. */
  readonly operations?: ProductOperations
  /** The running server's open database, when that server carries the command out (cli/database.ts). */
  readonly database?: DatabaseHandle
}

/**
 * Computations of the product API that operator commands run too. The composition root
 * (server.ts) hands them in, so that cli/ never imports routes/.
 */
export interface ProductOperations {
  /**
   * POST /policies/replay for one organization: `body` is that route's body. Null when the
   * organization does not exist; a refused body or draft throws an HttpError with the message.
   */
  replayPolicies(db: Kysely<Database>, organizationId: string, body: Record<string, unknown>): Promise<unknown | null>
}

/** Runs one command line (cli/main.ts `runCli`), handed to the command channel by `start`. */
export type RunCommand = (
  argv: readonly string[],
  env: Env,
  io: Io,
  options: { readonly config: Config; readonly credentialsChanged: (id: string) => void; readonly operations?: ProductOperations; readonly database: DatabaseHandle },
) => Promise<number>

/** What `start` serves: a fetch handler with one start()/close() pair for its background work. */
export interface ServedApp extends FetchHandler {
  /** Forgets cached credential lookups of an id (all when none): see server.ts. */
  forgetCredentials(id?: string): void
  start(): void
  close(): Promise<void>
}

export type BuildApp = (config: Config, deps: AppDeps) => ServedApp

/** What the CLI hands the handler builder: the open database, the clock, the logger, shared rate limits. */
export interface AppDeps {
  readonly db: Kysely<Database>
  readonly clock: () => number
  readonly logger: Logger
  readonly rateLimits?: RateLimitStore
  /** The PostgreSQL pool (null on PGlite), for the metrics of its use and errors. */
  readonly pool?: PoolStats | null
}

export interface Command {
  /** e.g. "leads export". */
  readonly name: string
  readonly summary: string
  readonly options: Readonly<Record<string, OptionSpec>>
  /** More help text, printed after the options. */
  readonly notes?: string
  run(context: CommandContext): Promise<number>
}

/** A mistake in how the command was called: exit 2, with the command's usage. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** The command was understood but could not be carried out: exit 1, the message on one line. */
export class CommandFailed extends Error {
  override name = 'CommandFailed'
  constructor(message: string, readonly exitCode = 1) {
    super(message)
  }
}

const HELP: OptionSpec = { type: 'boolean', description: 'show this help and exit' }

/** True when the arguments ask for help: it wins over every other mistake in them. */
export function wantsHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--')
  return (end < 0 ? argv : argv.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')
}

/** Parses a command's arguments strictly: unknown options, stray arguments and missing values are usage errors. */
export function parseOptions(command: Command, argv: readonly string[]): Options {
  let values: Record<string, string | boolean | undefined>
  try {
    const options = Object.fromEntries(Object.entries(command.options).map(([name, spec]) => [name, { type: spec.type }]))
    values = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values
  } catch (error) {
    throw new UsageError(describeParseError(error))
  }
  for (const [name, spec] of Object.entries(command.options)) {
    const value = values[name]
    if (spec.required && (value === undefined || value === '')) throw new UsageError(`missing required option '--${name}'`)
    if (typeof value === 'string' && spec.choices && !spec.choices.includes(value)) throw new UsageError(`--${name} must be ${alternatives(spec.choices)}`)
    if (value === undefined && spec.default !== undefined) values[name] = spec.default
  }
  return values
}

type ScriptOptions = NonNullable<ParseArgsConfig['options']>

/**
 * The same strict parsing for the developer scripts (fixtures, bench), which have no command
 * table: a mistake prints one line and exits 2.
 */
export function parseScriptArgs<const T extends ScriptOptions>(options: T): ReturnType<typeof parseArgs<{ options: T; strict: true }>>['values'] {
  try {
    return parseArgs({ options, strict: true }).values
  } catch (error) {
    process.stderr.write(`usage error: ${describeParseError(error)}\n`)
    process.exit(2)
  }
}

/** parseArgs' messages run over several lines and suggest syntax; the usage that follows says enough. */
function describeParseError(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string }
  const text = String(message ?? error)
  const quoted = /'([^']*)'/.exec(text)?.[1] ?? ''
  const option = /--?[\w-]+/.exec(quoted)?.[0] ?? quoted
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option '${option}'`
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') return `unexpected argument '${quoted}'`
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    return /does not take an argument/.test(text) ? `option '${option}' takes no value` : `option '${option}' needs a value (write ${option}=VALUE for one that starts with a dash)`
  }
  return text.split('\n')[0]!
}

function alternatives(values: readonly string[]): string {
  return values.length < 2 ? values.join('') : `${values.slice(0, -1).join(', ')} or ${values[values.length - 1]}`
}

function optionLabel(name: string, spec: OptionSpec): string {
  return spec.type === 'boolean' ? `--${name}` : `--${name} ${spec.value ?? 'VALUE'}`
}

export function usageLine(program: string, command: Command): string {
  const parts = Object.entries(command.options).map(([name, spec]) => (spec.required ? optionLabel(name, spec) : `[${optionLabel(name, spec)}]`))
  return [`${program} ${command.name}`, ...parts].join(' ')
}

/** The full help of one command: usage, summary, every option with its description. */
export function commandHelp(program: string, command: Command): string {
  const rows = [...Object.entries(command.options), ['help', HELP] as const].map(([name, spec]) => {
    const facts = [
      spec.required ? 'required' : null,
      spec.choices ? `one of ${spec.choices.join(', ')}` : null,
      spec.default !== undefined ? `default: ${spec.default}` : null,
    ].filter((fact) => fact !== null)
    return [name === 'help' ? '-h, --help' : optionLabel(name, spec), `${spec.description}${facts.length ? ` (${facts.join('; ')})` : ''}`] as const
  })
  const width = Math.max(...rows.map(([label]) => label.length))
  const lines = [`usage: ${usageLine(program, command)}`, '', `${command.summary[0]!.toUpperCase()}${command.summary.slice(1)}.`, '', 'options:']
  for (const [label, text] of rows) lines.push(`  ${label.padEnd(width)}  ${text}`)
  if (command.notes) lines.push('', command.notes)
  return lines.join('\n') + '\n'
}

/** True when the module whose `import.meta` is given is the script being run (Node, Bun, Deno). */
export function isEntryPoint(meta: ImportMeta): boolean {
  // Bun, Deno and Node ≥ 24.2 set import.meta.main. Only `true` is trusted: on Node 24 the
  // launcher imports the bundle (main: false) after pointing process.argv[1] at it, so false
  // falls through to that check.
  if ((meta as ImportMeta & { main?: boolean }).main === true) return true
  const script = process.argv[1]
  if (!script) return false
  try {
    return meta.url === pathToFileURL(realpathSync(script)).href
  } catch {
    return false
  }
}
