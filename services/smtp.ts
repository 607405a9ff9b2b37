// The SMTP transport of lead mail (nodemailer): one per process, built from the SMTP settings.
// A send resolves with the server's answer or rejects with its error; retrying is the outbox job's.
import tls from 'node:tls'
import nodemailer from 'nodemailer'
import type { SmtpSettings } from '../config.ts'

export interface OutgoingMail {
  readonly to: readonly string[]
  readonly replyTo: string | null
  readonly subject: string
  readonly text: string
  readonly headers: Readonly<Record<string, string>>
}

export interface Mailer {
  /** Sends one mail; resolves with the server's answer (e.g. "250 OK: queued"). */
  send(mail: OutgoingMail): Promise<string>
  close(): void
}

export function createMailer(smtp: SmtpSettings): Mailer {
  const transport = nodemailer.createTransport({
    host: smtp.host,
    port: smtp.port,
    secure: smtp.secure,
    requireTLS: smtp.requireTls,
    auth: smtp.user !== null ? { user: smtp.user, pass: smtp.password ?? '' } : undefined,
    // A private CA is trusted besides the system's, never instead of them.
    tls: { rejectUnauthorized: smtp.tlsRejectUnauthorized, ...(smtp.tlsServername ? { servername: smtp.tlsServername } : {}), ...(smtp.tlsCa ? { ca: [...tls.rootCertificates, smtp.tlsCa] } : {}) },
    connectionTimeout: smtp.timeoutMs,
    greetingTimeout: smtp.timeoutMs,
    socketTimeout: smtp.timeoutMs,
  })
  return {
    async send(mail) {
      const info = await transport.sendMail({
        from: smtp.from,
        to: [...mail.to],
        replyTo: mail.replyTo ?? undefined,
        subject: mail.subject,
        text: mail.text,
        headers: { ...mail.headers },
      })
      return String(info.response ?? 'sent')
    },
    close() {
      transport.close()
    },
  }
}
