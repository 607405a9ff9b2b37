// A real SMTP server for the lead-mail tests (the smtp-server package, on an ephemeral port of
// 127.0.0.1), keeping what it receives: the envelope, the headers and the decoded text body.
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'

export interface ReceivedMail {
  from: string
  to: string[]
  /** Lower-cased header names; folded lines joined. */
  headers: Record<string, string>
  text: string
  raw: string
}

export interface TestSmtp {
  readonly port: number
  readonly mails: ReceivedMail[]
  /** Resolves when `count` mails have arrived (polls; the test's own timeout bounds it). */
  waitFor(count: number): Promise<ReceivedMail[]>
  /** Stops listening (the port stays this server's number for restart()). */
  stop(): Promise<void>
  /** Listens again on the same port. */
  restart(): Promise<void>
}

function decodeQuotedPrintable(text: string): string {
  const bytes = text.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)))
  return Buffer.from(bytes, 'latin1').toString('utf8')
}

export function parseMail(raw: string, from: string, to: string[]): ReceivedMail {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split).replace(/\r\n[ \t]+/g, ' ')
  const headers: Record<string, string> = {}
  for (const line of head.split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim()
  }
  let text = raw.slice(split + 4)
  const encoding = (headers['content-transfer-encoding'] ?? '').toLowerCase()
  if (encoding === 'quoted-printable') text = decodeQuotedPrintable(text)
  else if (encoding === 'base64') text = Buffer.from(text.replace(/\s+/g, ''), 'base64').toString('utf8')
  return { from, to, headers, text: text.replace(/\r\n/g, '\n'), raw }
}

function newServer(mails: ReceivedMail[]): SMTPServer {
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        const from = session.envelope.mailFrom ? session.envelope.mailFrom.address : ''
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), from, session.envelope.rcptTo.map((r) => r.address)))
        callback()
      })
    },
  })
  // A client that drops its connection is an 'error' event, not the test's failure.
  server.on('error', () => {})
  return server
}

export async function startSmtp(): Promise<TestSmtp> {
  const mails: ReceivedMail[] = []
  let server = newServer(mails)
  server.listen(0, '127.0.0.1')
  await once(server.server, 'listening')
  const port = (server.server.address() as AddressInfo).port
  return {
    port,
    mails,
    async waitFor(count) {
      while (mails.length < count) await new Promise((resolve) => setTimeout(resolve, 20))
      return mails
    },
    stop() {
      return new Promise((resolve) => server.close(() => resolve()))
    },
    async restart() {
      server = newServer(mails)
      server.listen(port, '127.0.0.1')
      await once(server.server, 'listening')
    },
  }
}
