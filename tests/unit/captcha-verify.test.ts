// services/captcha.ts against a local stub: what counts as valid, invalid and unavailable (the
// provider "down", which the list's fail mode then decides), and the refusals of the SSRF guard.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { verifyCaptcha } from '../../services/captcha.ts'

type Answer = (request: IncomingMessage, response: ServerResponse) => void

async function stub(answer: Answer): Promise<string> {
  const server = createServer((request, response) => {
    request.resume()
    request.on('end', () => answer(request, response))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/siteverify`
}

const open = { allowPrivate: true, timeoutMs: 2000 }
const json = (status: number, body: string): Answer => (_request, response) => {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(body)
}

t.test('the provider\'s verdict', async (t) => {
  t.same(await verifyCaptcha(await stub(json(200, '{"success":true}')), 's', 'tok', '192.0.2.1', open), { kind: 'valid' })
  t.same(await verifyCaptcha(await stub(json(200, '{"success":false,"error-codes":["timeout-or-duplicate",7]}')), 's', 'tok', null, open), { kind: 'invalid', codes: ['timeout-or-duplicate'] })
})

t.test('no verdict is "unavailable": a 5xx, a 4xx, not JSON, no success field, too slow, nobody listening', async (t) => {
  const cases: [string, Answer][] = [
    ['HTTP 503', json(503, '{"success":true}')],
    ['HTTP 400', json(400, '{"success":false}')],
    ['answer is not JSON', json(200, '<html>')],
    ['answer has no success field', json(200, '{"ok":true}')],
    ['answer has no success field', json(200, '{"success":"true"}')],
  ]
  for (const [error, answer] of cases) t.same(await verifyCaptcha(await stub(answer), 's', 'tok', null, open), { kind: 'unavailable', error }, error)
  const slow = await stub(() => {})
  const late = await verifyCaptcha(slow, 's', 'tok', null, { allowPrivate: true, timeoutMs: 100 })
  t.match(late, { kind: 'unavailable', error: /ETIMEDOUT: no answer within 100 ms/ })
  t.match(await verifyCaptcha('http://127.0.0.1:1/x', 's', 'tok', null, open), { kind: 'unavailable', error: /ECONNREFUSED/ })
})

t.test('the SSRF guard without CAPTCHA_ALLOW_PRIVATE', async (t) => {
  const guarded = { allowPrivate: false, timeoutMs: 2000 }
  const url = await stub(json(200, '{"success":true}'))
  t.match(await verifyCaptcha(url, 's', 'tok', null, guarded), { kind: 'unavailable', error: /^refused: http: \(https only unless CAPTCHA_ALLOW_PRIVATE=true\)$/ })
  t.match(await verifyCaptcha('https://127.0.0.1/x', 's', 'tok', null, guarded), { kind: 'unavailable', error: /^refused: 127\.0\.0\.1 is a loopback address; set CAPTCHA_ALLOW_PRIVATE=true/ })
  t.match(await verifyCaptcha('https://localhost:1/x', 's', 'tok', null, guarded), { kind: 'unavailable', error: /refused: localhost resolves to/ })
  t.match(await verifyCaptcha('not a url', 's', 'tok', null, guarded), { kind: 'unavailable', error: 'invalid verify URL' })
})
