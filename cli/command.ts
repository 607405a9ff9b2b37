// The shape of an operator command, and the flag parser they share.
import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import type { Config } from '../config.ts'

export interface Io {
  readonly stdout: NodeJS.WritableStream & { isTTY?: boolean }
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean }
  /** Where a password not given otherwise is read; the process's own when absent. A running server
   * carrying out a command gives the operator's (see channel.ts). */
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean }
  readonly env?: Readonly<Record<string, string | undefined>>
}

export interface Command {
  /** e.g. "leads export". */
  readonly name: string
  readonly usage: string
  readonly summary: string
  run(args: ParsedArgs, config: Config, io: Io): Promise<number>
}

export interface ParsedArgs {
  readonly flags: Readonly<Record<string, string | true>>
  readonly positional: readonly string[]
}

export class UsageError extends Error {
  override name = 'UsageError'
}

/** `--name value`, `--name=value` and bare `--flag`. */
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const flags: Record<string, string | true> = Object.create(null)
  const positional: string[] = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=')
      if (eq > 0) flags[arg.slice(2, eq)] = arg.slice(eq + 1)
      else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) flags[arg.slice(2)] = argv[++i]!
      else flags[arg.slice(2)] = true
    } else positional.push(arg)
  }
  return { flags, positional }
}

export function stringFlag(args: ParsedArgs, name: string, fallback?: string): string {
  const value = args.flags[name]
  if (typeof value === 'string' && value !== '') return value
  if (fallback !== undefined) return fallback
  throw new UsageError(`--${name} is required`)
}

/** True when the module whose `import.meta` is given is the script being run (Node, Bun, Deno). */
export function isEntryPoint(meta: ImportMeta): boolean {
  const main = (meta as ImportMeta & { main?: boolean }).main
  if (typeof main === 'boolean') return main // Bun, Deno
  const script = process.argv[1]
  if (!script) return false
  try {
    return meta.url === pathToFileURL(realpathSync(script)).href
  } catch {
    return false
  }
}
