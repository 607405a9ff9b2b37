// `health [--wait] [--timeout S] [--url URL]`: asks the configured server's GET /health, once or
// until it answers 200, so scripts can wait for a server started in the background.
import type { Config } from '../config.ts'
import { UsageError, type Command } from './command.ts'

const POLL_MS = 200
const ATTEMPT_TIMEOUT_MS = 2_000

/** The server's own address as seen from this machine (a wildcard host is reached on loopback). */
function healthUrl(config: Config): string {
  if (config.port === 0) throw new UsageError('PORT is 0 (any free port): give the server\'s address with --url')
  const host = config.host === '0.0.0.0' || config.host === '' ? '127.0.0.1' : config.host === '::' ? '[::1]' : config.host.includes(':') ? `[${config.host}]` : config.host
  return `${config.tlsCertFile ? 'https' : 'http'}://${host}:${config.port}/health`
}

async function check(url: string): Promise<{ ok: boolean; detail: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS) })
    await response.body?.cancel()
    return { ok: response.status === 200, detail: `HTTP ${response.status}` }
  } catch (error) {
    const e = error as Error & { cause?: { code?: string; message?: string } }
    return { ok: false, detail: e.cause?.code ?? e.cause?.message ?? e.message }
  }
}

export const healthCommand: Command = {
  name: 'health',
  summary: 'check GET /health on HOST:PORT; with --wait, poll until it answers 200 (exit 0) or the timeout (exit 1)',
  options: {
    wait: { type: 'boolean', description: 'ask every 0.2 s until the server answers 200 or the timeout passes' },
    timeout: { type: 'string', value: 'SECONDS', description: 'how long --wait waits (1 to 3600)', default: '30' },
    url: { type: 'string', value: 'URL', description: 'the health URL to ask instead of HOST:PORT (needed when PORT is 0)' },
  },
  notes: 'A wildcard HOST (0.0.0.0, ::) is asked on loopback. Exit 0 when healthy, 1 otherwise.',
  async run({ options, config, io }) {
    const rawTimeout = options.timeout as string
    if (!/^\d+$/.test(rawTimeout) || Number(rawTimeout) < 1 || Number(rawTimeout) > 3600) {
      throw new UsageError('--timeout must be a whole number of seconds from 1 to 3600')
    }
    const given = options.url
    if (given !== undefined && (typeof given !== 'string' || !/^https?:\/\//.test(given))) throw new UsageError('--url must be an http(s) URL')
    const url = typeof given === 'string' ? given : healthUrl(config)
    const wait = options.wait === true
    const started = Date.now()
    const deadline = started + Number(rawTimeout) * 1000
    for (;;) {
      const result = await check(url)
      if (result.ok) {
        io.stdout.write(`healthy: ${url} answered 200 after ${((Date.now() - started) / 1000).toFixed(1)} s\n`)
        return 0
      }
      if (!wait || Date.now() + POLL_MS > deadline) {
        io.stderr.write(`not healthy: ${url} (${result.detail})${wait ? ` after ${rawTimeout} s` : ''}\n`)
        return 1
      }
      await new Promise((wake) => setTimeout(wake, POLL_MS))
    }
  },
}
