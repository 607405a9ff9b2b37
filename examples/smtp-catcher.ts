// A tiny local SMTP server that prints every mail it receives (headers and text), for trying lead
// notifications, double opt-in and unsubscribe without a real mail provider (docs/leads.md).
// It listens on loopback only, accepts any sender and recipient, and keeps nothing.
//
//   node --import tsx examples/smtp-catcher.ts [--port 2525]
import { SMTPServer } from 'smtp-server'

const flag = process.argv.indexOf('--port')
const port = flag > 0 ? Number(process.argv[flag + 1]) : 2525

/** Quoted-printable text (what nodemailer sends for long or non-ASCII lines) made readable. */
function readable(raw: string): string {
  const split = raw.indexOf('\r\n\r\n')
  const head = raw.slice(0, split)
  let body = raw.slice(split + 4)
  if (/^content-transfer-encoding:\s*quoted-printable/im.test(head)) {
    body = Buffer.from(body.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/gi, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1').toString('utf8')
  }
  return `${head}\n\n${body}`.replace(/\r\n/g, '\n')
}

const server = new SMTPServer({
  authOptional: true,
  // No certificate here: a plain local catcher (set SMTP_REQUIRE_TLS=false, the default).
  disabledCommands: ['STARTTLS'],
  logger: false,
  onData(stream, session, callback) {
    const chunks: Buffer[] = []
    stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    stream.on('end', () => {
      const to = session.envelope.rcptTo.map((r) => r.address).join(', ')
      process.stdout.write(`\n===== mail to ${to} =====\n${readable(Buffer.concat(chunks).toString('utf8'))}\n===== end =====\n`)
      callback()
    })
  },
})
// A client that drops its connection is not the catcher's failure.
server.on('error', (error) => process.stderr.write(`smtp-catcher: ${error.message}\n`))
server.listen(port, '127.0.0.1', () => process.stdout.write(`smtp-catcher listening on 127.0.0.1:${port}\n`))
process.on('SIGINT', () => server.close(() => process.exit(0)))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
