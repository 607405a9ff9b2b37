// The logger: one JSON object per line. Callers pass only fields they chose; request bodies,
// emails and tokens are never logged.

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'
export type LogFields = Record<string, string | number | boolean | null | undefined>

export interface Logger {
  log(level: LogLevel, message: string, fields?: LogFields): void
}

const ORDER: Record<LogLevel | 'silent', number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 }

/** A logger writing lines at `minimum` and above (`silent`: none) through `write`. */
export function createJsonLogger(
  minimum: LogLevel | 'silent',
  write: (line: string) => void = (line) => process.stdout.write(line + '\n'),
): Logger {
  return {
    log(level, message, fields = {}) {
      if (ORDER[level] < ORDER[minimum]) return
      write(JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields }))
    },
  }
}

export const silentLogger: Logger = { log() {} }

/** The `code` of a thrown value (a pg SQLSTATE, a Node errno name), for log lines; null otherwise. */
export function errorCode(error: unknown): string | null {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : null
}
