// `start`: open and migrate the database, build the handler, serve it, and shut down gracefully.
import type { Config } from '../config.ts'
import { createJsonLogger } from '../routes/deps.ts'
import { createHandler } from '../server.ts'
import { openDatabase } from '../storage/connect.ts'
import { migrateToLatest } from '../storage/migrate.ts'
import { createRateLimitStore } from '../storage/ratelimits.ts'
import { serve } from './serve.ts'

export interface RunningServer {
  readonly port: number
  /** Resolves once a SIGTERM/SIGINT shutdown has finished. */
  readonly stopped: Promise<void>
  stop(): Promise<void>
}

export async function startServer(config: Config): Promise<RunningServer> {
  const logger = createJsonLogger(config.logLevel === 'silent' ? 'silent' : config.logLevel, batchedStdout())
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger })
  const applied = await migrateToLatest(database.db)
  if (applied.length > 0) logger.log('info', 'migrations applied', { migrations: applied.join(',') })
  // Several processes may share PostgreSQL: count rate limits across them (PGlite is one process).
  const rateLimits = database.kind === 'postgres' ? createRateLimitStore(database.db, { logger }) : undefined
  const app = createHandler(config, { db: database.db, clock: Date.now, logger, ...(rateLimits ? { rateLimits } : {}) })
  const server = await serve(app, config)
  logger.log('info', 'listening', {
    runtime: server.runtime,
    url: `${config.tlsCertFile ? 'https' : 'http'}://${config.host}:${server.port}`,
    database: database.kind,
  })

  let stopping: Promise<void> | null = null
  let resolveStopped!: () => void
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve))
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      logger.log('info', 'shutting down')
      // In-flight requests finish first; then background work and the database close.
      await server.close()
      await app.close()
      await rateLimits?.close()
      await database.close()
      logger.log('info', 'stopped')
      resolveStopped()
    })()
    return stopping
  }
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void stop())
  return { port: server.port, stopped, stop }
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
