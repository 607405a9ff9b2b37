// `start`: open and migrate the database, build the handler, serve it, and shut down gracefully.
import type { Config } from '../config.ts'
import { createJsonLogger, errorCode } from '../log.ts'
import type { BuildApp, RunCommand } from './command.ts'
import { startHousekeeping } from '../jobs/housekeeping.ts'
import { createRateLimitStore } from '../storage/ratelimits.ts'
import { commandChannel } from './channel.ts'
import { openLockedDatabase } from './database.ts'
import { holdingEventLoop } from './event-loop.ts'
import { preloadServe, serve } from './serve.ts'

export interface RunningServer {
  readonly port: number
  /** Resolves once a SIGTERM/SIGINT shutdown has finished. */
  readonly stopped: Promise<void>
  stop(): Promise<void>
}

export function startServer(config: Config, buildApp: BuildApp, runCommand: RunCommand): Promise<RunningServer> {
  // Until the server listens (a handle that keeps the loop alive), see cli/event-loop.ts.
  return holdingEventLoop(() => start(config, buildApp, runCommand))
}

async function start(config: Config, buildApp: BuildApp, runCommand: RunCommand): Promise<RunningServer> {
  const logger = createJsonLogger(config.logLevel === 'silent' ? 'silent' : config.logLevel, batchedStdout())
  // What was opened, closed in reverse order: by stop(), or at once if a later step of the start
  // fails (so a failed start exits at once). A step that fails to close is logged; the rest close.
  const opened: Array<() => Promise<void>> = []
  const closeOpened = async () => {
    for (const close of opened.splice(0).reverse()) await close().catch((error) => logger.log('warn', 'close failed', { code: errorCode(error) }))
  }
  try {
    preloadServe()
    const database = await openLockedDatabase(config, 'server', logger)
    opened.push(() => database.close())
    const { handle, applied, lock } = database
    if (applied.length > 0) logger.log('info', 'migrations applied', { migrations: applied.join(',') })
    // Several processes may share PostgreSQL: count rate limits across them (PGlite is one process).
    const rateLimits = handle.kind === 'postgres' ? createRateLimitStore(handle.db, { logger }) : undefined
    const app = buildApp(config, { db: handle.db, clock: Date.now, logger, pool: handle.pool, ...(rateLimits ? { rateLimits } : {}) })
    // Background work (credential feed and timers, rate-limit sharing) starts here and stops at close.
    app.start()
    opened.push(() => app.close())
    // PGlite has no autovacuum: this server analyzes and vacuums it (jobs/housekeeping.ts).
    if (handle.kind === 'pglite') {
      const housekeeping = startHousekeeping(handle.db, { onError: (error, table) => logger.log('warn', 'database housekeeping failed', { table, code: errorCode(error) }) })
      opened.push(async () => {
        housekeeping.stop()
        await housekeeping.done
      })
    }
    const server = await serve(app, config).catch((error: Error & { code?: string }) => {
      throw error.code === 'EADDRINUSE' ? new Error(`port ${config.port} on ${config.host} is already in use (set PORT to a free port, or stop what listens there)`) : error
    })
    // Operator commands on this data directory are carried out here, on this database.
    lock?.setHandler(commandChannel(config, handle, (id) => app.forgetCredentials(id), runCommand))
    logger.log('info', 'listening', {
      runtime: server.runtime,
      url: `${config.tlsCertFile ? 'https' : 'http'}://${config.host}:${server.port}`,
      database: handle.kind,
    })

    let stopping: Promise<void> | null = null
    let resolveStopped!: () => void
    const stopped = new Promise<void>((resolve) => (resolveStopped = resolve))
    const stop = (): Promise<void> => {
      stopping ??= (async () => {
        logger.log('info', 'shutting down')
        lock?.setHandler(null)
        // In-flight requests finish first; then background work and the database close.
        await server.close()
        await closeOpened()
        logger.log('info', 'stopped')
        resolveStopped()
      })()
      return stopping
    }
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void stop())
    return { port: server.port, stopped, stop }
  } catch (error) {
    await closeOpened()
    throw error
  }
}

/**
 * Log lines written once per event-loop turn instead of one write each: stdout to a pipe is a
 * synchronous write(2) per call on Linux, which at LOG_LEVEL=info cost a syscall per request.
 * Whatever is pending is written synchronously on exit.
 */
function batchedStdout(): (line: string) => void {
  let pending = ''
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (pending === '') return
    const out = pending
    pending = ''
    process.stdout.write(out)
  }
  process.once('exit', flush)
  return (line) => {
    pending += line + '\n'
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }
}
