// The server speaks HTTPS itself from TLS_CERT_FILE / TLS_KEY_FILE: a real process with a
// self-signed certificate made here by openssl, reached over TLS, announcing HSTS.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'steward-tls-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

let haveOpenssl = true
try {
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' })
} catch {
  haveOpenssl = false
}

interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

function get(port: number, path: string, ca: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', servername: 'localhost', port, path, ca }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

t.test('with TLS_CERT_FILE and TLS_KEY_FILE the server answers over HTTPS and sends HSTS', { skip: haveOpenssl ? false : 'openssl is not installed' }, async (t) => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: join(dir, 'data'),
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    TLS_CERT_FILE: join(dir, 'cert.pem'),
    TLS_KEY_FILE: join(dir, 'key.pem'),
    PRODUCT_API_URL: 'https://api.example.com',
  }
  delete env.DATABASE_URL
  const child = spawn(process.execPath, ['--import', 'tsx', 'server.ts', 'start'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const url = await new Promise<string>((resolve, reject) => {
    let buffer = ''
    child.stdout!.on('data', (chunk) => {
      buffer += chunk
      const match = /"msg":"listening".*?"url":"([^"]+)"/.exec(buffer)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code) => reject(new Error(`server exited with ${code} before listening`)))
  })
  t.match(url, /^https:\/\/127\.0\.0\.1:\d+$/, 'the listening line names an https URL')
  const port = Number(new URL(url).port)
  const ca = readFileSync(join(dir, 'cert.pem'))

  const health = await get(port, '/health', ca)
  t.equal(health.status, 200)
  t.equal(health.headers['strict-transport-security'], 'max-age=31536000')
  t.equal(JSON.parse(health.body).status, 'ok')

  const document = await get(port, '/.well-known/oauth-protected-resource', ca)
  t.equal(document.status, 200)
  t.equal(JSON.parse(document.body).resource, 'https://api.example.com', 'the configured resource, byte for byte')

  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM exits 0')
})
