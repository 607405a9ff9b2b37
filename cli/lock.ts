// One process at a time on an embedded (PGlite) data directory. Two processes writing the same
// PGlite files lose each other's acknowledged writes, so the directory is locked for the life of
// the process that opens it.
//
// The lock is a Unix socket bound at DATA_DIR/steward.sock: bind(2) is atomic (EADDRINUSE when
// the name exists), and the kernel stops the listener when its process dies however it dies, so
// a crash leaves a socket file nobody answers on (ECONNREFUSED), which the next process removes.
// The same socket is the channel through which a running server carries out operator commands.
import { randomBytes } from 'node:crypto'
import { lstatSync, mkdirSync, readFileSync, renameSync, rmSync, unlinkSync, watch, writeFileSync, type FSWatcher } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { join, resolve } from 'node:path'
import { DataDirError } from './data-dir.ts'

export const SOCKET_NAME = 'steward.sock'
/** Held for the few milliseconds it takes to find a socket file stale, remove it and bind anew. */
const GUARD_NAME = 'steward.sock.guard'
// sun_path holds 108 bytes with its NUL; Node silently truncates a longer path and binds elsewhere.
const MAX_SOCKET_PATH = 107
const PROBE_TIMEOUT_MS = 3_000
const GUARD_WAIT_MS = 3_000
/** How often a holder checks that its socket file is still its own, where no file watch tells it at once. */
const LOST_CHECK_MS = 500

export type HolderRole = 'server' | 'command'

/** What the process holding a data directory says about itself. */
export interface Holder {
  readonly pid: number | null
  readonly since: string | null
  readonly role: HolderRole | null
}

/** The data directory is held by another live process. */
export class DataDirHeldError extends DataDirError {
  override name = 'DataDirHeldError'
  constructor(
    readonly dataDir: string,
    readonly holder: Holder,
  ) {
    super(heldMessage(dataDir, holder))
  }
}

function heldMessage(dataDir: string, holder: Holder): string {
  const who = holder.role === 'server' ? 'a running Steward server' : holder.role === 'command' ? 'a running operator command' : 'another process'
  const pid = holder.pid === null ? '' : ` (pid ${holder.pid}${holder.since ? `, since ${holder.since}` : ''})`
  const advice =
    holder.role === 'server'
      ? 'stop that server first (kill ' + (holder.pid ?? 'PID') + ') or use it as it is; operator commands are carried out by it'
      : 'wait for it to finish, or stop it, then try again'
  return `DATA_DIR ${dataDir} is in use by ${who}${pid}: ${advice}`
}

export function socketPath(dataDir: string): string {
  return join(resolve(dataDir), SOCKET_NAME)
}

/** Asks whoever listens on the socket who they are. null: nobody answers (no file, or stale). */
export async function probeHolder(path: string): Promise<Holder | null> {
  // No file, nobody to ask. Checked synchronously: under heavy load the probe's timer can fire
  // before the connect error (ENOENT) is delivered, which would make a free directory look held.
  if (inode(path) === null) return null
  return await new Promise<Holder | null>((done) => {
    let settled = false
    let buffer = ''
    const finish = (holder: Holder | null, socket?: Socket) => {
      if (settled) return
      settled = true
      socket?.destroy()
      done(holder)
    }
    const socket = connect(path)
    // A timeout says "someone holds it" only if the name is still there: a holder that released
    // while this process was starved of CPU has removed it.
    const timer = setTimeout(() => finish(inode(path) === null ? null : { pid: null, since: null, role: null }, socket), PROBE_TIMEOUT_MS)
    timer.unref?.()
    socket.on('connect', () => socket.write(JSON.stringify({ type: 'hello' }) + '\n'))
    socket.on('data', (chunk) => {
      buffer += chunk
      const newline = buffer.indexOf('\n')
      if (newline < 0) return
      clearTimeout(timer)
      finish(parseHello(buffer.slice(0, newline)), socket)
    })
    socket.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      // A live listener that errs is still a holder; only "nobody there" frees the name.
      finish(error.code === 'ECONNREFUSED' || error.code === 'ENOENT' || error.code === 'ENOTDIR' ? null : { pid: null, since: null, role: null }, socket)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      finish({ pid: null, since: null, role: null })
    })
  })
}

function parseHello(line: string): Holder {
  try {
    const hello = JSON.parse(line) as Record<string, unknown>
    return {
      pid: typeof hello.pid === 'number' ? hello.pid : null,
      since: typeof hello.since === 'string' ? hello.since : null,
      role: hello.role === 'server' || hello.role === 'command' ? hello.role : null,
    }
  } catch {
    return { pid: null, since: null, role: null }
  }
}

export type ConnectionHandler = (socket: Socket, firstLine: Record<string, unknown>) => void

export interface DataDirLock {
  readonly path: string
  readonly holder: Holder
  /** Who handles requests other than `hello` (a server carrying out commands); none refuses them. */
  setHandler(handler: ConnectionHandler | null): void
  /**
   * Calls `lost` once if the socket file stops being this lock's own: removed (the directory was
   * deleted or moved) or replaced by another process's. The embedded database opens its files by
   * path, so from then on its writes would land in whatever directory now has that name, under
   * another holder: the holder must stop at once, without closing the database (a close writes).
   * Released locks are no longer watched.
   */
  watch(lost: (reason: string) => void): void
  release(): Promise<void>
}

/**
 * Locks DATA_DIR for this process, or throws DataDirHeldError naming the live holder.
 * A socket file left by a dead process is removed; the guard directory makes that removal and
 * the new bind one step, so two processes finding the same stale file cannot both win.
 */
export async function lockDataDir(dataDir: string, role: HolderRole): Promise<DataDirLock> {
  const path = socketPath(dataDir)
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
    throw new DataDirError(`DATA_DIR ${dataDir} is too deep for its lock socket (${path} has more than ${MAX_SOCKET_PATH} bytes); use a shorter DATA_DIR path`)
  }
  const holder: Holder = { pid: process.pid, since: new Date().toISOString(), role }
  let handler: ConnectionHandler | null = null
  // Unreferenced: the lock never keeps a process alive by itself (a failed start must exit).
  const listen = () => tryListen(createServer((socket) => onConnection(socket, holder, () => handler)).unref(), path)
  const locked = (server: Server) => lockHandle(server, path, holder, (next) => (handler = next))

  for (let attempt = 0; attempt < 3; attempt++) {
    const server = await listen()
    if (server) return locked(server)
    const current = await probeHolder(path)
    if (current) throw new DataDirHeldError(dataDir, current)
    // Nobody answers: the file is stale. Remove it only under the guard, after probing again.
    const won = await withGuard(resolve(dataDir), async () => {
      if (await probeHolder(path)) return null
      try {
        unlinkSync(path)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      }
      return await listen()
    })
    if (won) return locked(won)
  }
  const current = await probeHolder(path)
  throw new DataDirHeldError(dataDir, current ?? { pid: null, since: null, role: null })
}

function lockHandle(server: Server, path: string, holder: Holder, setHandler: (handler: ConnectionHandler | null) => void): DataDirLock {
  const bound = inode(path)
  let released: Promise<void> | null = null
  let stopWatching = () => {}
  return {
    path,
    holder,
    setHandler,
    watch(lost) {
      stopWatching()
      stopWatching = watchOwnership(path, bound, lost)
    },
    release() {
      stopWatching()
      released ??= new Promise<void>((done) => {
        // Never remove a file that is no longer ours: the next holder may have bound the name.
        // Node's close() unlinks the socket's name whatever file it now is, so a listener whose
        // name was taken over is left open instead (unreferenced, unreachable, gone at exit).
        if (bound === null || inode(path) !== bound) return done()
        server.close(() => done())
        // Node's close() has removed the file; other runtimes may leave it.
        try {
          if (inode(path) === bound) unlinkSync(path)
        } catch {
          // Already gone.
        }
      })
      return released
    },
  }
}

/**
 * PostgreSQL checks that postmaster.pid is still its own once a minute; this checks the socket
 * file on every change the kernel reports for it (inotify, at once) and every LOST_CHECK_MS where
 * a runtime or file system reports none. An lstat is about a microsecond. Returns the stop.
 */
function watchOwnership(path: string, bound: number | null, lost: (reason: string) => void): () => void {
  let watcher: FSWatcher | null = null
  let timer: ReturnType<typeof setInterval> | null = null
  let done = false
  const stop = () => {
    done = true
    if (timer) clearInterval(timer)
    try {
      watcher?.close()
    } catch {
      // Closed already.
    }
  }
  const check = () => {
    if (done) return
    const now = inode(path)
    if (now !== null && now === bound) return
    stop()
    lost(now === null ? `its lock socket ${path} was removed (the data directory was deleted or moved)` : `its lock socket ${path} was replaced by another process's`)
  }
  timer = setInterval(check, LOST_CHECK_MS)
  timer.unref?.()
  try {
    watcher = watch(path, { persistent: false }, check)
    watcher.on('error', () => {}) // the interval still checks
  } catch {
    // No file watch here: the interval alone checks.
  }
  check()
  return stop
}

function inode(path: string): number | null {
  try {
    return lstatSync(path).ino
  } catch {
    return null
  }
}

/** Binds with an owner-only mode from the start: the umask covers the moment before any chmod. */
async function tryListen(server: Server, path: string): Promise<Server | null> {
  return await new Promise<Server | null>((done, fail) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.off('listening', onListening)
      if (error.code === 'EADDRINUSE') done(null)
      else fail(new DataDirError(`cannot create the lock socket ${path}: ${error.message}`))
    }
    const onListening = () => {
      server.off('error', onError)
      done(server)
    }
    server.once('error', onError)
    server.once('listening', onListening)
    const previous = safeUmask(0o177)
    try {
      server.listen(path)
    } finally {
      if (previous !== null) safeUmask(previous)
    }
  })
}

function safeUmask(mask: number): number | null {
  try {
    return process.umask(mask)
  } catch {
    return null // runtimes without umask: the owner-only DATA_DIR still keeps others out
  }
}

function onConnection(socket: Socket, holder: Holder, handler: () => ConnectionHandler | null): void {
  let buffer = ''
  socket.setEncoding('utf8')
  socket.on('error', () => socket.destroy())
  const onData = (chunk: string) => {
    buffer += chunk
    if (buffer.length > 1_000_000) return void socket.destroy()
    const newline = buffer.indexOf('\n')
    if (newline < 0) return
    socket.off('data', onData)
    const rest = buffer.slice(newline + 1)
    let first: Record<string, unknown>
    try {
      first = JSON.parse(buffer.slice(0, newline)) as Record<string, unknown>
    } catch {
      return void socket.destroy()
    }
    if (first.type === 'hello') return void socket.end(JSON.stringify({ type: 'hello', ...holder }) + '\n')
    const next = handler()
    if (!next) return void socket.end(JSON.stringify({ type: 'refused', reason: 'this process does not carry out commands' }) + '\n')
    socket.pause()
    if (rest !== '') socket.unshift(rest)
    next(socket, first)
  }
  socket.on('data', onData)
}

/**
 * A directory created atomically (mkdir fails with EEXIST) with its owner's pid inside. A guard
 * whose owner is dead (it crashed inside the few milliseconds it is held) is set aside.
 */
async function withGuard<T>(dataDir: string, work: () => Promise<T>): Promise<T> {
  const guard = join(dataDir, GUARD_NAME)
  const deadline = Date.now() + GUARD_WAIT_MS
  for (;;) {
    try {
      mkdirSync(guard, { mode: 0o700 })
      writeFileSync(join(guard, 'pid'), String(process.pid))
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
      if (guardOwnerIsDead(guard)) {
        // Rename first: of two processes setting the same dead guard aside, one rename fails.
        const aside = `${guard}.dead-${process.pid}-${randomBytes(4).toString('hex')}`
        try {
          renameSync(guard, aside)
          rmSync(aside, { recursive: true, force: true })
        } catch {
          // Someone else set it aside first.
        }
        continue
      }
      if (Date.now() > deadline) throw new DataDirError(`DATA_DIR ${dataDir}: the lock guard ${guard} stays held; if no Steward process runs, remove it`)
      await new Promise((wake) => setTimeout(wake, 10))
    }
  }
  try {
    return await work()
  } finally {
    rmSync(guard, { recursive: true, force: true })
  }
}

function guardOwnerIsDead(guard: string): boolean {
  let pid: number
  try {
    pid = Number(readFileSync(join(guard, 'pid'), 'utf8'))
  } catch {
    // Created but its pid not yet written, or removed meanwhile: dead only if it is old.
    try {
      return Date.now() - lstatSync(guard).mtimeMs > GUARD_WAIT_MS
    } catch {
      return false
    }
  }
  if (!Number.isInteger(pid) || pid <= 0) return true
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH'
  }
}
