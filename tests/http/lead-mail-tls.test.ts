// Lead mail over TLS with authentication, against real smtp-server instances with a self-signed
// certificate made here by openssl: implicit TLS (smtps://) with a password, STARTTLS, certificate
// verification failing closed, SMTP_REQUIRE_TLS against a server that offers no STARTTLS, and a
// wrong password. Failures are attempts in the outbox, never a lost mail or a slower form.
import { execFileSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { SMTPServer, type SMTPServerOptions } from 'smtp-server'
import { BY_OPERATOR } from '../../storage/audit.ts'
import { createApiKey } from '../../storage/keys.ts'
import { createOrganization } from '../../storage/organizations.ts'
import { FakeClock, openTestDatabase } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { parseMail, type ReceivedMail } from '../support/smtp-support.ts'

const dir = mkdtempSync(join(tmpdir(), 'steward-smtp-tls-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
let haveOpenssl = true
try {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' })
} catch {
  haveOpenssl = false
}

const USER = 'mailer'
const PASSWORD = 's3cret pass'

async function server(t: Test, options: Partial<SMTPServerOptions>): Promise<{ port: number; mails: ReceivedMail[]; logins: string[] }> {
  const mails: ReceivedMail[] = []
  const logins: string[] = []
  const smtp = new SMTPServer({
    key: readFileSync(join(dir, 'key.pem')),
    cert: readFileSync(join(dir, 'cert.pem')),
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === USER && auth.password === PASSWORD) {
        logins.push(auth.username!)
        callback(null, { user: auth.username })
      } else callback(new Error('Invalid username or password'))
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (chunk: Buffer) => chunks.push(chunk))
      stream.on('end', () => {
        mails.push(parseMail(Buffer.concat(chunks).toString('utf8'), session.envelope.mailFrom ? session.envelope.mailFrom.address : '', session.envelope.rcptTo.map((r) => r.address)))
        callback()
      })
    },
    ...options,
  })
  // A client that gives up the handshake (an unverified certificate) is an 'error' here, not a crash.
  smtp.on('error', () => {})
  smtp.listen(0, '127.0.0.1')
  await once(smtp.server, 'listening')
  t.teardown(() => new Promise<void>((resolve) => smtp.close(() => resolve())))
  return { port: (smtp.server.address() as AddressInfo).port, mails, logins }
}

async function submitWith(t: Test, env: Record<string, string>) {
  const database = await openTestDatabase(t)
  const clock = new FakeClock()
  const holder = await createOrganization(database.db, 'Installation', new Date(clock.now - 60_000))
  const owner = (await createApiKey(database.db, { organizationId: holder.id, name: 'owner', role: 'owner', createdByUserId: null, createdByKeyId: null, expiresAt: null }, new Date(clock.now), BY_OPERATOR)).secret
  const app = await productApp(t, { database, clock, env: { LEAD_MAIL_POLL_MS: '50', SMTP_FROM: 'leads@example.com', ...env } })
  await app.call('PATCH', '/leads/lists/demo-requests', { token: owner, json: { notify: ['sales@example.com'] } })
  const answer = await app.call('POST', '/demo-request', { json: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', company: 'AE', linkedin: 'https://www.linkedin.com/in/ada' } })
  t.equal(answer.status, 200, 'the form answers 200 whatever SMTP does')
  const outbox = async () => (await jsonOf(await app.call('GET', '/leads/outbox', { token: owner }))).mails[0]
  return { app, outbox }
}

async function until<T>(check: () => Promise<T | null | undefined | false>): Promise<T> {
  for (;;) {
    const value = await check()
    if (value) return value
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

t.test('implicit TLS with a password: delivered to a server whose certificate verifies (SMTP_TLS_CA_FILE)', { skip: haveOpenssl ? false : 'openssl is not installed' }, async (t) => {
  const smtp = await server(t, { secure: true, authMethods: ['PLAIN', 'LOGIN'] })
  const url = `smtps://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${smtp.port}`
  const { outbox } = await submitWith(t, { SMTP_URL: url, SMTP_TLS_CA_FILE: join(dir, 'cert.pem'), SMTP_TLS_SERVERNAME: 'localhost' })
  const sent = await until(async () => ((await outbox())?.status === 'sent' ? await outbox() : null))
  t.equal(sent.attempts, 1)
  t.same(smtp.logins, [USER], 'authenticated')
  t.equal(smtp.mails[0]!.headers.subject, 'New demo request: Ada Lovelace, AE')
})

t.test('a certificate that does not verify fails closed: nothing sent, the attempt logged and retried', { skip: haveOpenssl ? false : 'openssl is not installed' }, async (t) => {
  const smtp = await server(t, { secure: true })
  const { outbox } = await submitWith(t, { SMTP_URL: `smtps://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${smtp.port}` })
  const failed = await until(async () => ((await outbox())?.attempts === 1 ? await outbox() : null))
  t.equal(failed.status, 'pending', 'kept for the next attempt')
  t.match(failed.last_error, /self[- ]signed certificate/i)
  t.same([smtp.logins, smtp.mails], [[], []], 'the password never went to an unverified server')
})

t.test('STARTTLS: upgraded and authenticated; SMTP_REQUIRE_TLS refuses a server without it', { skip: haveOpenssl ? false : 'openssl is not installed' }, async (t) => {
  const starttls = await server(t, {})
  const ok = await submitWith(t, { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(starttls.port), SMTP_USER: USER, SMTP_PASSWORD: PASSWORD, SMTP_REQUIRE_TLS: 'true', SMTP_TLS_REJECT_UNAUTHORIZED: 'false' })
  await until(async () => (await ok.outbox())?.status === 'sent')
  t.same(starttls.logins, [USER])
  t.equal(starttls.mails.length, 1)

  const plain = await server(t, { disabledCommands: ['STARTTLS'], allowInsecureAuth: true })
  const refused = await submitWith(t, { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(plain.port), SMTP_USER: USER, SMTP_PASSWORD: PASSWORD, SMTP_REQUIRE_TLS: 'true' })
  const failed = await until(async () => ((await refused.outbox())?.attempts === 1 ? await refused.outbox() : null))
  t.match(failed.last_error, /^500 /, 'the server refused STARTTLS, so nothing more was said')
  t.same([plain.logins, plain.mails], [[], []], 'no password in the clear, no mail')
})

t.test('a wrong password is a failed attempt, retried', { skip: haveOpenssl ? false : 'openssl is not installed' }, async (t) => {
  const smtp = await server(t, {})
  const { outbox } = await submitWith(t, { SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port), SMTP_USER: USER, SMTP_PASSWORD: 'wrong', SMTP_TLS_REJECT_UNAUTHORIZED: 'false' })
  const failed = await until(async () => ((await outbox())?.attempts === 1 ? await outbox() : null))
  t.equal(failed.status, 'pending')
  t.match(failed.last_error, /^535 /)
  t.equal(smtp.mails.length, 0)
})
