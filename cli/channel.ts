// Operator commands on a data directory that a running server holds are carried out by that
// server, on its open database, through the lock socket in DATA_DIR (owner-only: mode 0600 in an
// owner-only directory, so only the same OS user, or root, can connect).
//
// Protocol: one JSON object per line. The command line sends
//   {"type":"run","argv":[…],"env":{"STEWARD_PASSWORD"?:…},"stdinIsTTY":bool,"stderrIsTTY":bool}
// the server answers with {"type":"stdout"|"stderr","data":…} as the command writes,
// {"type":"read"} when the command reads a line of standard input (answered with
// {"type":"input","line":…} or {"type":"input","eof":true}), {"type":"password"} when it needs a
// password (answered with {"type":"password","value":…}, {"type":"password","none":true} or
// {"type":"password","error":…,"code":N}: the command line prompts on its own terminal, without
// echo, or reads its pipe), and last {"type":"exit","code":N}.
import { isAbsolute, resolve } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { connect, type Socket } from 'node:net'
import { createInterface } from 'node:readline'
import type { Config } from '../config.ts'
import type { DatabaseHandle } from '../database/connect.ts'
import { CommandFailed, type Env, type Io, type RunCommand } from './command.ts'
import { usesDataDir } from './database.ts'
import { DataDirHeldError, probeHolder, socketPath, type ConnectionHandler } from './lock.ts'
import { readPasswordInput } from './prompt.ts'

/** Commands that never go to a running server: `start` must fail on a held directory; `health` asks over HTTP. */
const RUN_HERE = new Set(['start', 'health'])
/** The only environment a forwarded command may bring: a password it would otherwise read from stdin. */
const FORWARDED_ENV = ['STEWARD_PASSWORD'] as const
const MAX_ARGS = 64
const MAX_ARG_LENGTH = 4096
const MAX_MESSAGE_LENGTH = 1000

// ---------------------------------------------------------------------------------------------
// The command-line side.

/**
 * Hands the command to the server holding DATA_DIR and returns its exit code; null when the
 * command runs here (PostgreSQL, a free directory, or a command that must not be forwarded).
 * A directory held by anything other than a server fails at once.
 */
export async function forwardToRunningServer(commandName: string, argv: readonly string[], config: Config, io: Io, env: Env): Promise<number | null> {
  if (!usesDataDir(config) || RUN_HERE.has(commandName)) return null
  const path = socketPath(config.dataDir)
  const holder = await probeHolder(path)
  if (!holder) return null
  if (holder.role !== 'server') throw new DataDirHeldError(config.dataDir, holder)
  io.stderr.write(`carried out by the running server (pid ${holder.pid})\n`)
  return await runRemotely(path, withAbsoluteOutput(argv), io, env)
}

/** `--output FILE` and `--file FILE` name a file relative to where the operator typed the command. */
function withAbsoluteOutput(argv: readonly string[]): string[] {
  return argv.map((arg, i) => {
    for (const flag of ['--output', '--file']) {
      if (argv[i - 1] === flag && !isAbsolute(arg) && !arg.startsWith('--')) return resolve(arg)
      if (arg.startsWith(`${flag}=`) && !isAbsolute(arg.slice(flag.length + 1))) return `${flag}=${resolve(arg.slice(flag.length + 1))}`
    }
    return arg
  })
}

function runRemotely(path: string, argv: readonly string[], io: Io, processEnv: Env): Promise<number> {
  const stdin = io.stdin ?? null
  const env: Record<string, string> = {}
  for (const name of FORWARDED_ENV) {
    const value = processEnv[name]
    if (value) env[name] = value
  }
  return new Promise<number>((done) => {
    const socket = connect(path)
    let exitCode: number | null = null
    const lines = createInterface({ input: socket, crlfDelay: Infinity })
    let input: AsyncIterator<string> | null = null
    socket.on('connect', () => {
      socket.write(JSON.stringify({ type: 'run', argv, env, stdinIsTTY: stdin?.isTTY === true, stderrIsTTY: io.stderr.isTTY === true }) + '\n')
    })
    lines.on('line', (line) => {
      let message: Record<string, unknown>
      try {
        message = JSON.parse(line) as Record<string, unknown>
      } catch {
        return
      }
      if (message.type === 'stdout' && typeof message.data === 'string') {
        // The server waits for the socket to drain; pausing here passes our own backpressure on.
        if (!io.stdout.write(message.data)) {
          socket.pause()
          io.stdout.once('drain', () => socket.resume())
        }
      } else if (message.type === 'stderr' && typeof message.data === 'string') io.stderr.write(message.data)
      else if (message.type === 'password') void answerPassword(socket, stdin, io.stderr)
      else if (message.type === 'read') {
        if (!stdin) return void socket.write(JSON.stringify({ type: 'input', eof: true }) + '\n')
        input ??= createInterface({ input: stdin, crlfDelay: Infinity, terminal: false })[Symbol.asyncIterator]()
        void input.next().then(
          (next) => socket.write(JSON.stringify(next.done ? { type: 'input', eof: true } : { type: 'input', line: next.value }) + '\n'),
          () => socket.write(JSON.stringify({ type: 'input', eof: true }) + '\n'),
        )
      } else if (message.type === 'exit' && typeof message.code === 'number') exitCode = message.code
      else if (message.type === 'refused') {
        io.stderr.write('the server holding DATA_DIR is starting or stopping and takes no commands now; try again in a moment\n')
        exitCode = 1
      }
    })
    socket.on('error', (error) => io.stderr.write(`the running server could not carry out the command: ${error.message}\n`))
    socket.on('close', () => {
      void input?.return?.()
      if (exitCode === null) io.stderr.write('the running server closed the connection before the command finished\n')
      done(exitCode ?? 1)
    })
  })
}

/**
 * The password is read here, where the operator is: on a terminal with the same no-echo prompt as
 * a command run alone (the server cannot switch this terminal's echo off), else the pipe's first line.
 */
async function answerPassword(socket: Socket, stdin: Io['stdin'] | null, stderr: NodeJS.WritableStream): Promise<void> {
  let answer: Record<string, unknown>
  try {
    const password = await readPasswordInput(stdin ?? null, stderr)
    answer = password === null ? { type: 'password', none: true } : { type: 'password', value: password }
  } catch (error) {
    const e = error as Error
    answer = { type: 'password', error: e.message, code: error instanceof CommandFailed ? error.exitCode : 1 }
  }
  if (!socket.destroyed) socket.write(JSON.stringify(answer) + '\n')
}

// ---------------------------------------------------------------------------------------------
// The server side.

/**
 * Drops the server's cached credential lookups: of one key or user (an id), or all of them. A
 * command changes the database beside the server's API, so nothing else would tell its cache.
 */
export type ForgetCredentials = (id?: string) => void

/** Carries out forwarded commands with the same implementations, on the server's database. */
export function commandChannel(config: Config, handle: DatabaseHandle, forgetCredentials: ForgetCredentials, runCommand: RunCommand): ConnectionHandler {
  return (socket, first) => void carryOut(socket, first, config, handle, forgetCredentials, runCommand)
}

async function carryOut(
  socket: Socket,
  request: Record<string, unknown>,
  config: Config,
  handle: DatabaseHandle,
  forgetCredentials: ForgetCredentials,
  runCommand: RunCommand,
): Promise<void> {
  const send = (message: Record<string, unknown>, callback?: () => void): boolean => socket.write(JSON.stringify(message) + '\n', callback)
  const finish = (code: number) => {
    if (!socket.destroyed) socket.end(JSON.stringify({ type: 'exit', code }) + '\n')
  }
  const argv = request.argv
  if (request.type !== 'run' || !Array.isArray(argv) || argv.length > MAX_ARGS || !argv.every((arg) => typeof arg === 'string' && arg.length <= MAX_ARG_LENGTH)) {
    send({ type: 'stderr', data: 'malformed request\n' })
    return finish(2)
  }
  if (argv.length === 0 || RUN_HERE.has(argv[0] as string)) {
    send({ type: 'stderr', data: `${String(argv[0] ?? '')} cannot be carried out by a running server\n` })
    return finish(2)
  }
  const given = (request.env ?? {}) as Record<string, unknown>
  const env: Record<string, string> = {}
  for (const name of FORWARDED_ENV) if (typeof given[name] === 'string') env[name] = given[name] as string

  const io: Io = {
    stdout: Object.assign(remoteWritable(socket, 'stdout'), { isTTY: false }),
    stderr: Object.assign(remoteWritable(socket, 'stderr'), { isTTY: request.stderrIsTTY === true }),
    stdin: remoteStdin(socket, send, request.stdinIsTTY === true),
  }
  let code: number
  try {
    // Key and user commands name each changed credential as soon as it is committed, before they
    // report success: a revoked key fails from the very next request, not when the cache ages out.
    code = await runCommand(argv as string[], env, io, { config, credentialsChanged: (id) => forgetCredentials(id), database: handle })
  } catch {
    code = 1
  } finally {
    // And whatever a command changed without naming it: forgetting every lookup costs one
    // database read per credential in use, and no command can leave a stale entry behind.
    forgetCredentials()
  }
  // What the command wrote may still wait in the streams (a slow reader): it goes before the exit line.
  await Promise.all([flushed(io.stdout as Writable), flushed(io.stderr as Writable)])
  finish(code)
}

function flushed(writable: Writable): Promise<void> {
  if (writable.destroyed) return Promise.resolve()
  return new Promise<void>((done) => {
    writable.once('close', () => done())
    writable.end(() => done())
  })
}

/** Writes reach the operator as they come; a write completes once the socket took it (backpressure). */
function remoteWritable(socket: Socket, stream: 'stdout' | 'stderr'): Writable {
  const writable = new Writable({
    write(chunk: Buffer | string, _encoding, callback) {
      if (socket.destroyed) return callback(new Error('the operator disconnected'))
      const flushed = socket.write(JSON.stringify({ type: stream, data: chunk.toString() }) + '\n')
      if (flushed) callback()
      else socket.once('drain', () => callback())
    },
  })
  // An operator who stops reading (Ctrl-C) stops the command's writes too.
  socket.once('close', () => writable.destroy(new Error('the operator disconnected')))
  writable.on('error', () => {})
  return writable
}

type RemoteInput = Readable & { isTTY: boolean; readPassword: () => Promise<string | null> }

/**
 * Standard input of the operator's terminal, one line at a time, asked for only when read; a
 * password is asked for as such, so that the operator's side reads it without echo.
 */
function remoteStdin(socket: Socket, send: (message: Record<string, unknown>) => boolean, isTTY: boolean): RemoteInput {
  let asked = false
  const waiting: Array<{ resolve: (password: string | null) => void; reject: (error: Error) => void }> = []
  const lines = createInterface({ input: socket, crlfDelay: Infinity })
  const readable = new Readable({
    read() {
      if (asked) return
      asked = true
      send({ type: 'read' })
    },
  })
  lines.on('line', (line) => {
    let message: Record<string, unknown>
    try {
      message = JSON.parse(line) as Record<string, unknown>
    } catch {
      return
    }
    if (message.type === 'password') return answered(message)
    if (message.type !== 'input') return
    asked = false
    if (message.eof === true || typeof message.line !== 'string') readable.push(null)
    else readable.push(message.line + '\n')
  })
  const answered = (message: Record<string, unknown>): void => {
    const next = waiting.shift()
    if (!next) return
    if (typeof message.value === 'string') return next.resolve(message.value)
    if (typeof message.error === 'string') {
      const code = typeof message.code === 'number' && Number.isInteger(message.code) && message.code > 0 && message.code < 256 ? message.code : 1
      return next.reject(new CommandFailed(message.error.slice(0, MAX_MESSAGE_LENGTH).replace(/[\u0000-\u001f\u007f]/g, ' '), code))
    }
    next.resolve(null)
  }
  lines.on('close', () => {
    readable.push(null)
    for (const next of waiting.splice(0)) next.reject(new Error('the operator disconnected'))
  })
  const readPassword = (): Promise<string | null> =>
    new Promise<string | null>((resolve, reject) => {
      if (socket.destroyed) return reject(new Error('the operator disconnected'))
      waiting.push({ resolve, reject })
      send({ type: 'password' })
    })
  return Object.assign(readable, { isTTY, readPassword })
}
