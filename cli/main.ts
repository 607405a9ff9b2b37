// The operator command line behind server.ts: `start`, `migrate`, `leads export`, provisioning.
import { ConfigError, loadConfig, type Config } from '../config.ts'
import { forwardToRunningServer } from './channel.ts'
import { parseArgs, stringFlag, UsageError, type Command, type Io } from './command.ts'
import { withDatabase } from './database.ts'
import { exportLeads, openOutput } from './export.ts'
import { healthCommand } from './health.ts'
import { provisionCommands } from './provision.ts'

const start: Command = {
  name: 'start',
  usage: 'start',
  summary: 'migrate the database and serve HTTP on HOST:PORT',
  async run(_args, config) {
    const { startServer } = await import('./start.ts')
    const running = await startServer(config).catch((error: unknown) => {
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
  usage: 'migrate',
  summary: 'bring the database schema up to date and exit',
  async run(_args, config, io) {
    return withDatabase(config, async (_handle, applied) => {
      io.stdout.write(applied.length > 0 ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n')
      return 0
    })
  },
}

const leadsExport: Command = {
  name: 'leads export',
  usage: 'leads export [--list demo|newsletter|all] [--format csv|ndjson] [--output FILE]',
  summary: 'stream stored leads as CSV or NDJSON (stdout by default)',
  async run(args, config, io) {
    const list = stringFlag(args, 'list', 'all')
    const format = stringFlag(args, 'format', 'csv')
    if (!['demo', 'newsletter', 'all'].includes(list)) throw new UsageError('--list must be demo, newsletter or all')
    if (format !== 'csv' && format !== 'ndjson') throw new UsageError('--format must be csv or ndjson')
    const output = typeof args.flags.output === 'string' ? args.flags.output : null
    const out = output ? openOutput(output) : (io.stdout as unknown as import('node:stream').Writable)
    const count = await withDatabase(config, (handle) =>
      exportLeads(handle.db, {
        lists: list === 'all' ? ['demo', 'newsletter'] : [list as 'demo' | 'newsletter'],
        format,
        out,
        progress: io.stderr.isTTY ? (io.stderr as unknown as import('node:stream').Writable) : null,
      }),
    )
    if (output) {
      await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())))
      io.stderr.write(`wrote ${count} leads to ${output}\n`)
    }
    return 0
  },
}

export const commands: readonly Command[] = [start, migrate, leadsExport, ...provisionCommands, healthCommand]

function help(io: Io): void {
  io.stdout.write('usage: server.ts <command> [options]\n\ncommands:\n')
  for (const command of commands) io.stdout.write(`  ${command.usage.padEnd(72)} ${command.summary}\n`)
  io.stdout.write('\nConfiguration comes from environment variables; see README.md.\n')
}

/** `config` is given by a running server carrying out a forwarded command (its own). */
export async function runCli(argv: readonly string[], env: Record<string, string | undefined>, io: Io = process, given?: Config): Promise<number> {
  if (argv.length === 0 || argv[0] === 'help' || argv[0] === '--help' || argv[0] === '-h') {
    help(io)
    return argv.length === 0 ? 2 : 0
  }
  // Longest command name first: "key create" before "key".
  const byLength = [...commands].sort((a, b) => b.name.split(' ').length - a.name.split(' ').length)
  const command = byLength.find((c) => c.name.split(' ').every((word, i) => argv[i] === word))
  if (!command) {
    io.stderr.write(`unknown command: ${argv.join(' ')}\n`)
    help(io)
    return 2
  }
  try {
    const config = given ?? loadConfig(env)
    const forwarded = await forwardToRunningServer(command.name, argv, config, io)
    if (forwarded !== null) return forwarded
    return await command.run(parseArgs(argv.slice(command.name.split(' ').length)), config, io)
  } catch (error) {
    if (error instanceof ConfigError || error instanceof UsageError) {
      io.stderr.write(`${error instanceof UsageError ? 'usage' : 'configuration'} error: ${error.message}\n`)
      if (error instanceof UsageError) io.stderr.write(`usage: server.ts ${command.usage}\n`)
      return 2
    }
    const e = error as Error & { code?: string }
    io.stderr.write(`${command.name} failed: ${e.message}${e.code ? ` (${e.code})` : ''}\n`)
    return 1
  }
}
