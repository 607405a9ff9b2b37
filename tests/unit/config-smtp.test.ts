// The SMTP settings of lead mail (config.ts readSmtp): the URL or the parts, the defaults that
// follow from each other, and the errors that stop the server.
import t from 'tap'
import { ConfigError, loadConfig } from '../../config.ts'

t.test('no SMTP settings: null (no mail)', async (t) => {
  t.equal(loadConfig({}).smtp, null)
})

t.test('SMTP_URL gives host, port, TLS mode and credentials; SMTP_FROM is required', async (t) => {
  const smtp = loadConfig({ SMTP_URL: 'smtps://mailer%40acme:p%40ss@smtp.example.com', SMTP_FROM: 'Steward <leads@acme.example>' }).smtp
  t.same(smtp, {
    host: 'smtp.example.com',
    port: 465,
    secure: true,
    user: 'mailer@acme',
    password: 'p@ss',
    from: 'Steward <leads@acme.example>',
    requireTls: false,
    tlsRejectUnauthorized: true,
    tlsServername: null,
    tlsCa: null,
    timeoutMs: 30_000,
  })
  const plain = loadConfig({ SMTP_URL: 'smtp://smtp.example.com:2525', SMTP_FROM: 'a@example.com', SMTP_REQUIRE_TLS: 'true' }).smtp!
  t.same([plain.port, plain.secure, plain.user, plain.requireTls], [2525, false, null, true])
  t.throws(() => loadConfig({ SMTP_URL: 'smtp://smtp.example.com' }), new ConfigError('SMTP_FROM is required with SMTP_URL or SMTP_HOST (the From address of lead mail)'))
  t.throws(() => loadConfig({ SMTP_URL: 'http://smtp.example.com', SMTP_FROM: 'a@example.com' }), new ConfigError('SMTP_URL must look like smtp://user:password@host:587 or smtps://host:465'))
})

t.test('SMTP_HOST and the parts: 587 plain by default, 465 secure, explicit SMTP_SECURE wins', async (t) => {
  const base = { SMTP_HOST: 'mail.internal', SMTP_FROM: 'a@example.com' }
  const of = (env: Record<string, string>) => {
    const smtp = loadConfig({ ...base, ...env }).smtp!
    return [smtp.port, smtp.secure]
  }
  t.same(of({}), [587, false])
  t.same(of({ SMTP_PORT: '465' }), [465, true])
  t.same(of({ SMTP_SECURE: 'true' }), [465, true])
  t.same(of({ SMTP_PORT: '2465', SMTP_SECURE: 'true' }), [2465, true])
  const auth = loadConfig({ ...base, SMTP_USER: 'u', SMTP_PASSWORD: 'p', SMTP_TLS_REJECT_UNAUTHORIZED: 'false', SMTP_TLS_SERVERNAME: 'mail.example.com' }).smtp!
  t.same([auth.user, auth.password, auth.tlsRejectUnauthorized, auth.tlsServername], ['u', 'p', false, 'mail.example.com'])
  t.throws(() => loadConfig({ ...base, SMTP_PORT: '70000' }), new ConfigError('SMTP_PORT must be between 1 and 65535'))
  t.throws(() => loadConfig({ ...base, SMTP_SECURE: 'yes' }), new ConfigError('SMTP_SECURE must be true or false'))
  t.throws(() => loadConfig({ ...base, SMTP_TLS_CA_FILE: '/nonexistent/ca.pem' }), new ConfigError('SMTP_TLS_CA_FILE: cannot read /nonexistent/ca.pem (ENOENT)'))
})
