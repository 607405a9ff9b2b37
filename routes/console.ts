// The console: static files (HTML, CSS, ES modules) under /console/, served by the same server.
// Only files found in the console/ folder at the first request are served, looked up by exact
// path in a table: no request path is ever joined to a file system path, so `..`, encoded
// slashes or NUL cannot reach any other file. index.html carries a strict Content-Security-Policy
// (only this origin and the product API; no inline script or style); every answer has an ETag and
// `Cache-Control: no-cache`, so browsers revalidate (304) and never run a stale module after an
// upgrade.
import { readdir, readFile } from 'node:fs/promises'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { Config } from '../config.ts'
import { HttpError } from '../http/errors.ts'
import { pathOf, type OperationDoc } from '../http/pipeline.ts'
import { reply, type Reply } from '../http/reply.ts'
import type { RequestContext, Route, Surface } from './deps.ts'

export const CONSOLE_PREFIX = '/console/'

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
}

interface Asset {
  readonly body: string
  readonly type: string
  readonly etag: string
}

/** The Content-Security-Policy of the console's pages: this origin, plus the product API's when it lives elsewhere. */
export function consoleCsp(config: Pick<Config, 'appUrl' | 'productApiUrl'>): string {
  const api = new URL(config.productApiUrl).origin
  const connect = api === new URL(config.appUrl).origin ? "'self'" : `'self' ${api}`
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    `connect-src ${connect}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    // The pages never parse strings as HTML: any sink that would (innerHTML…) throws.
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; ')
}

/** Headers on every console answer: no referrer leaves the console, and no other window may hold it. */
const PAGE_HEADERS = { 'Referrer-Policy': 'no-referrer', 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Resource-Policy': 'same-origin' }

const NOT_FOUND_HTML =
  '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Not found · Steward console</title></head>' +
  '<body><main><h1>Not found</h1><p>There is no console page here. <a href="/console/">Open the console</a>.</p></main></body></html>\n'

const defaultRoot = fileURLToPath(new URL('../console/', import.meta.url))

async function etagOf(body: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(body)))
  return `"${btoa(String.fromCharCode(...digest.subarray(0, 18))).replace(/\+/g, '-').replace(/\//g, '_')}"`
}

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...(await filesUnder(path)))
    else if (entry.isFile()) out.push(path)
  }
  return out
}

/** Every servable file, keyed by its URL path; index.html gets the product API's URL. */
async function loadAssets(root: string, config: Config): Promise<Map<string, Asset>> {
  const assets = new Map<string, Asset>()
  for (const file of await filesUnder(root)) {
    const name = relative(root, file).split(sep).join('/')
    const type = TYPES[name.slice(name.lastIndexOf('.'))]
    if (!type || !/^[a-z0-9][a-z0-9._/-]*$/.test(name)) continue
    let body = await readFile(file, 'utf8')
    if (name === 'index.html') body = body.replace('%PRODUCT_API_URL%', escapeAttribute(apiBase(config)))
    assets.set(CONSOLE_PREFIX + name, { body, type, etag: await etagOf(body) })
  }
  const index = assets.get(`${CONSOLE_PREFIX}index.html`)
  if (index) assets.set(CONSOLE_PREFIX, index)
  return assets
}

/**
 * Where the console finds the product API. On the console's own origin it is only a path (empty
 * by default), so the console works whatever host name it was opened by (localhost, 127.0.0.1, a
 * LAN address) without setting APP_URL; on another origin, the full URL.
 */
export function apiBase(config: Pick<Config, 'appUrl' | 'productApiUrl'>): string {
  const api = new URL(config.productApiUrl)
  return api.origin === new URL(config.appUrl).origin ? api.pathname.replace(/\/$/, '') : config.productApiUrl
}

function escapeAttribute(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** RFC 9110 §13.1.2: If-None-Match holds a list of entity tags, or "*"; weak comparison. */
function matches(header: string | null, etag: string): boolean {
  if (header === null) return false
  if (header.trim() === '*') return true
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag)
}

export function createConsoleSurface(config: Config, options: { root?: string } = {}): Surface {
  const csp = consoleCsp(config)
  let loaded: Promise<Map<string, Asset>> | null = null
  const assets = (): Promise<Map<string, Asset>> => {
    // Read once, at the first request (a module does nothing when imported); a failed read is retried.
    loaded ??= loadAssets(options.root ?? defaultRoot, config).catch((error: unknown) => {
      loaded = null
      throw error
    })
    return loaded
  }

  async function serve(request: IRequest, _ctx: RequestContext): Promise<Reply> {
    const path = pathOf(request.url)
    // RFC 9110 §15.4.9: 308 keeps the method; the console's pages resolve against /console/.
    if (path === '/console') return reply(308, null, { Location: CONSOLE_PREFIX, ...PAGE_HEADERS })
    const asset = (await assets()).get(path)
    if (!asset) return notFound(request, path)
    const headers: Record<string, string> = { 'Content-Type': asset.type, ETag: asset.etag, 'Cache-Control': 'no-cache', ...PAGE_HEADERS }
    if (asset.type.startsWith('text/html')) headers['Content-Security-Policy'] = csp
    // RFC 9110 §15.4.5: 304 carries the validator and the caching headers, never a body.
    if (matches(request.headers.get('if-none-match'), asset.etag)) return reply(304, null, headers)
    return reply(200, asset.body, headers)
  }

  function notFound(request: Request, path: string): Reply {
    const wantsHtml = /\btext\/html\b/i.test(request.headers.get('accept') ?? '')
    const headers = { 'Cache-Control': 'no-cache', Vary: 'Accept', ...PAGE_HEADERS }
    if (wantsHtml) return reply(404, NOT_FOUND_HTML, { ...headers, 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': csp })
    throw new HttpError(404, `No resource at ${path.slice(0, 200)}`, { headers })
  }

  const route: Route = { method: 'GET', path: '/console/*', handler: serve, doc: consoleDoc }
  return { name: 'console', routes: [route], errorBody: (_status, error) => ({ error: error.message }) }
}

const consoleDoc: OperationDoc = {
  operationId: 'console',
  summary: 'The web console (HTML, CSS and JavaScript modules)',
  tags: ['Console'],
  scopes: null,
  responses: {
    200: { description: 'A console file.', schema: v.string(), mediaType: 'text/html' },
    304: { description: 'Not modified (If-None-Match matched the ETag).' },
    308: { description: '/console redirects to /console/.' },
    404: { description: 'No such console file: HTML for browsers, else JSON.' },
  },
}
