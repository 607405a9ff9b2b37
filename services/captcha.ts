// Server-side CAPTCHA verification for Cloudflare Turnstile, hCaptcha and Google reCAPTCHA. The
// three share one protocol: a form POST of `secret`, `response` (the token) and `remoteip` to the
// provider's siteverify URL, answered with JSON `{"success": true|false, ...}`. The request goes
// through the SSRF guard (services/outbound-url.ts) unless CAPTCHA_ALLOW_PRIVATE is set.
import http from 'node:http'
import https from 'node:https'
import type { CaptchaProvider } from '../database/lead-spam-schema.ts'
import { guardedLookup, refusedLiteral } from './outbound-url.ts'

/** Each provider's verify URL, the form field its widget posts the token in, and the token's lifetime. */
export const CAPTCHA_PROVIDERS: Readonly<Record<CaptchaProvider, { verifyUrl: string; tokenField: string; tokenTtlSeconds: number }>> = Object.freeze({
  turnstile: { verifyUrl: 'https://challenges.cloudflare.com/turnstile/v0/siteverify', tokenField: 'cf-turnstile-response', tokenTtlSeconds: 300 },
  hcaptcha: { verifyUrl: 'https://api.hcaptcha.com/siteverify', tokenField: 'h-captcha-response', tokenTtlSeconds: 120 },
  recaptcha: { verifyUrl: 'https://www.google.com/recaptcha/api/siteverify', tokenField: 'g-recaptcha-response', tokenTtlSeconds: 120 },
})

/** valid / invalid: the provider answered; unavailable: it could not be asked or gave no verdict. */
export type CaptchaVerdict = { kind: 'valid' } | { kind: 'invalid'; codes: string[] } | { kind: 'unavailable'; error: string }

export interface CaptchaVerifyOptions {
  /** CAPTCHA_ALLOW_PRIVATE: the verify URL may be plain http or an internal address (tests' stubs). */
  readonly allowPrivate: boolean
  readonly timeoutMs: number
}

const MAX_ANSWER_BYTES = 64 * 1024

/** Asks the provider at `verifyUrl` whether `token` is valid. Never throws. */
export function verifyCaptcha(verifyUrl: string, secret: string, token: string, remoteIp: string | null, options: CaptchaVerifyOptions): Promise<CaptchaVerdict> {
  return new Promise((resolve) => {
    let url: URL
    try {
      url = new URL(verifyUrl)
    } catch {
      return resolve({ kind: 'unavailable', error: 'invalid verify URL' })
    }
    if (url.protocol !== 'https:' && !(options.allowPrivate && url.protocol === 'http:')) return resolve({ kind: 'unavailable', error: `refused: ${url.protocol} (https only unless CAPTCHA_ALLOW_PRIVATE=true)` })
    if (!options.allowPrivate) {
      const literal = refusedLiteral(url.hostname)
      if (literal) return resolve({ kind: 'unavailable', error: `refused: ${literal}; set CAPTCHA_ALLOW_PRIVATE=true to allow internal targets` })
    }
    const form = new URLSearchParams({ secret, response: token })
    if (remoteIp) form.set('remoteip', remoteIp)
    const body = form.toString()
    let settled = false
    const finish = (verdict: CaptchaVerdict) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(verdict)
    }
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      {
        method: 'POST',
        lookup: guardedLookup({ allowPrivate: options.allowPrivate, setting: 'CAPTCHA_ALLOW_PRIVATE' }),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(Buffer.byteLength(body)), 'user-agent': 'Steward-Captcha/1' },
      },
      (response) => {
        const chunks: Buffer[] = []
        let read = 0
        response.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > MAX_ANSWER_BYTES) return response.destroy()
          chunks.push(chunk)
        })
        response.on('error', () => finish({ kind: 'unavailable', error: 'answer cut short' }))
        response.on('close', () => finish({ kind: 'unavailable', error: 'answer cut short' }))
        response.on('end', () => {
          const status = response.statusCode ?? 0
          if (status < 200 || status >= 300) return finish({ kind: 'unavailable', error: `HTTP ${status}` })
          let answer: unknown
          try {
            answer = JSON.parse(Buffer.concat(chunks).toString('utf8'))
          } catch {
            return finish({ kind: 'unavailable', error: 'answer is not JSON' })
          }
          const success = (answer as { success?: unknown } | null)?.success
          if (success === true) return finish({ kind: 'valid' })
          if (success === false) {
            const codes = (answer as { 'error-codes'?: unknown })['error-codes']
            return finish({ kind: 'invalid', codes: Array.isArray(codes) ? codes.filter((code): code is string => typeof code === 'string').slice(0, 10) : [] })
          }
          finish({ kind: 'unavailable', error: 'answer has no success field' })
        })
      },
    )
    const timer = setTimeout(() => request.destroy(Object.assign(new Error(`no answer within ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' })), options.timeoutMs)
    request.on('error', (error: Error & { code?: string }) => finish({ kind: 'unavailable', error: `${error.code ?? 'error'}: ${error.message}` }))
    request.end(body)
  })
}
