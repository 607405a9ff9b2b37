// The operator command line behind server.ts: `start`, `migrate`, `leads export`, provisioning.
// Every command and group answers --help without opening the database or reading configuration.
import { ConfigError, loadConfig, type Config } from '../config.ts'
import { forwardToRunningServer } from './channel.ts'
import { CommandFailed, commandHelp, parseOptions, UsageError, usageLine, wantsHelp, type BuildApp, type Command, type Env, type Io, type ProductOperations, type RunCommand } from './command.ts'
import { withDatabase } from './database.ts'
import type { DatabaseHandle } from '../database/connect.ts'
import { cannotWrite, exportLeads, openOutput } from './export.ts'
import { createLeadLinks } from '../services/lead-links.ts'
import { unsubscribeUrls } from '../services/lead-mail.ts'
import { createSecrets } from '../services/secrets.ts'
import { healthCommand } from './health.ts'
import { auditCommands } from './audit.ts'
import { policyCommands } from './policies.ts'
import { governanceCommands } from './governance.ts'
import { auditSealCommands } from './audit-verify.ts'
import { provisionCommands } from './provision.ts'

// The name usage lines give: the README's command is ./steward (Bun and Deno run server.ts).
const PROGRAM = 'steward'

const start: Command = {
  name: 'start',
  summary: 'migrate the database and serve HTTP on HOST:PORT',
  options: {},
  notes: 'Configuration comes from environment variables (DATABASE_URL or DATA_DIR, HOST, PORT, ...); see docs/configuration.md.',
  async run({ config, buildApp, operations }) {
    if (!buildApp) throw new CommandFailed('start serves the handler server.ts builds: run server.ts start')
    const { startServer } = await import('./start.ts')
    // Commands the running server carries out get the same product operations.
    const runCommand: RunCommand = (argv, env, io, given) => runCli(argv, env, io, { ...given, ...(operations ? { operations } : {}) })
    const running = await startServer(config, buildApp, runCommand).catch((error: unknown) => {
      // startServer closed what it opened; whatever still holds the event loop must not keep a
      // failed server alive (the timer itself does not).
      setTimeout(() => process.exit(1), 1000).unref()
      throw error
    })
    await running.stopped
    return 0
  },
}

const migrate: Command = {
  name: 'migrate',
  summary: 'bring the database schema up to date and exit',
  options: {},
  async run({ config, io, database }) {
    return withDatabase({ config, database }, async (_handle, applied) => {
      io.stdout.write(applied.length > 0 ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n')
      return 0
    })
  },
}

const LISTS = ['demo', 'newsletter', 'all'] as const

const leadsExport: Command = {
  name: 'leads export',
  summary: 'stream stored leads as CSV or NDJSON (stdout by default)',
  options: {
    list: { type: 'string', value: 'LIST', description: 'which lead list to export', choices: LISTS, default: 'all' },
    format: { type: 'string', value: 'FORMAT', description: 'CSV (spreadsheet-safe) or one JSON object per line', choices: ['csv', 'ndjson'], default: 'csv' },
    output: { type: 'string', value: 'FILE', description: 'write to FILE instead of stdout; it appears only once the export is complete' },
  },
  async run({ options, config, io, database }) {
    const list = options.list as (typeof LISTS)[number]
    const format = options.format as 'csv' | 'ndjson'
    const path = typeof options.output === 'string' && options.output !== '' ? options.output : null
    // Opened before the database: a bad path fails at once, and a failed export leaves no file.
    const output = path ? await openOutput(path) : null
    const out = output ? output.stream : (io.stdout as unknown as import('node:stream').Writable)
    try {
      const count = await withDatabase({ config, database }, (handle) =>
        exportLeads(handle.db, {
          lists: list === 'all' ? ['demo', 'newsletter'] : [list],
          format,
          out,
          progress: io.stderr.isTTY ? (io.stderr as unknown as import('node:stream').Writable) : null,
          unsubscribeUrl: unsubscribeUrls(config, createLeadLinks(createSecrets(config))),
        }),
      )
      if (output) {
        await output.commit()
        io.stderr.write(`wrote ${count} leads to ${path}\n`)
      }
      return 0
    } catch (error) {
      if (!output) throw error
      await output.abort()
      throw output.stream.errored ? cannotWrite(path!, output.stream.errored) : error
    }
  },
}

export const commands: readonly Command[] = [start, migrate, leadsExport, ...provisionCommands, ...policyCommands, ...governanceCommands, ...auditCommands, ...auditSealCommands, healthCommand]

function listing(heading: string, group: readonly Command[], hint: string): string {
  const width = Math.max(...group.map((c) => c.name.length))
  const lines = [heading, '', 'commands:', ...group.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`), '', hint]
  return lines.join('\n') + '\n'
}

function topHelp(): string {
  return listing(
    `usage: ${PROGRAM} <command> [options]`,
    commands,
    `Run '${PROGRAM} <command> --help' for a command's options.\nConfiguration comes from environment variables; see docs/configuration.md.`,
  )
}

function groupHelp(word: string, group: readonly Command[]): string {
  return listing(`usage: ${PROGRAM} ${word} <command> [options]`, group, `Run '${PROGRAM} ${word} <command> --help' for a command's options.`)
}

/** The command named by the first words of argv: the longest name wins ("key create" before "key"). */
function findCommand(argv: readonly string[]): Command | null {
  const byLength = [...commands].sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)
  return byLength.find((c) => c.name.split(' ').every((word, i) => argv[i] === word)) ?? null
}

/** No command matched: a group name alone lists its commands; anything else is unknown. */
function answerWithoutCommand(argv: readonly string[], io: Io): number {
  const group = commands.filter((c) => c.name.split(' ')[0] === argv[0])
  if (group.length > 0) {
    if (argv.length === 2 && (argv[1] === '--help' || argv[1] === '-h')) {
      io.stdout.write(groupHelp(argv[0]!, group))
      return 0
    }
    if (argv.length > 1) io.stderr.write(`usage error: unknown command '${argv.slice(0, 2).join(' ')}'\n`)
    io.stderr.write(groupHelp(argv[0]!, group))
    return 2
  }
  io.stderr.write(`usage error: unknown command '${argv[0]}'\n`)
  io.stderr.write(topHelp())
  return 2
}

/** `help`, `help key`, `help key create`. */
function answerHelp(words: readonly string[], io: Io): number {
  if (words.length === 0) {
    io.stdout.write(topHelp())
    return 0
  }
  const command = findCommand(words)
  if (command) {
    io.stdout.write(commandHelp(PROGRAM, command))
    return 0
  }
  return answerWithoutCommand(words.length === 1 ? [words[0]!, '--help'] : words, io)
}

/**
 * `given` and `credentialsChanged` come from a running server carrying out a forwarded command:
 * its own configuration, and how it drops its cached credential lookups.
 */
export interface CliOptions {
  /** The configuration already loaded (a command carried out by the running server); else read from env. */
  readonly config?: Config
  /** See CommandContext.credentialsChanged. */
  readonly credentialsChanged?: (id: string) => void
  /** Builds the handler `start` serves: given by the composition root (server.ts). */
  readonly buildApp?: BuildApp
  /** See CommandContext.operations: given by the composition root (server.ts). */
  readonly operations?: ProductOperations
  /** See CommandContext.database: the running server carrying the command out, which never forwards it. */
  readonly database?: DatabaseHandle
}

export async function runCli(argv: readonly string[], env: Env, io: Io = process, cli: CliOptions = {}): Promise<number> {
  if (argv.length === 0) {
    io.stderr.write(topHelp())
    return 2
  }
  if (argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') return answerHelp(argv.slice(1), io)
  const command = findCommand(argv)
  if (!command) return answerWithoutCommand(argv, io)
  const rest = argv.slice(command.name.split(' ').length)
  if (wantsHelp(rest)) {
    io.stdout.write(commandHelp(PROGRAM, command))
    return 0
  }
  try {
    const options = parseOptions(command, rest)
    const config = cli.config ?? loadConfig(env)
    const { credentialsChanged, buildApp, operations, database } = cli
    // The running server carrying a command out never hands it on again.
    const forwarded = database ? null : await forwardToRunningServer(command.name, argv, config, io, env)
    if (forwarded !== null) return forwarded
    return await command.run({
      options,
      config,
      io,
      env,
      ...(credentialsChanged ? { credentialsChanged } : {}),
      ...(buildApp ? { buildApp } : {}),
      ...(operations ? { operations } : {}),
      ...(database ? { database } : {}),
    })
  } catch (error) {
    return report(command, error, io)
  }
}

/** One line for every failure: the operator sees what went wrong, never a stack trace. */
function report(command: Command, error: unknown, io: Io): number {
  if (error instanceof UsageError) {
    io.stderr.write(`usage error: ${error.message}\nusage: ${usageLine(PROGRAM, command)}\nRun '${PROGRAM} ${command.name} --help' for the options.\n`)
    return 2
  }
  if (error instanceof ConfigError) {
    io.stderr.write(`configuration error: ${error.message}\n`)
    return 2
  }
  if (error instanceof CommandFailed) {
    io.stderr.write(`${command.name} failed: ${error.message}\n`)
    return error.exitCode
  }
  const e = error as Error & { code?: string }
  io.stderr.write(`${command.name} failed: ${e.message}${e.code ? ` (${e.code})` : ''}\n`)
  return 1
}
