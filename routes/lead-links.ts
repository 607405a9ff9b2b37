// The links in lead mail, opened by people and by mailbox providers, without credentials. Mail
// scanners open every link (and HEAD is answered as GET), so no GET changes anything: GET
// /leads/confirm and GET /leads/unsubscribe answer a page with a button, which posts to the same
// URL. POST /leads/confirm confirms a double opt-in; POST /leads/unsubscribe is RFC 8058
// one-click (its form body `List-Unsubscribe=One-Click`, or none, is accepted and not needed: the
// signed token in the URL says who). Each answers a small HTML page.
import type { IRequest } from 'itty-router'
import * as v from 'valibot'
import type { OperationDoc } from '../http/pipeline.ts'
import { reply, type Reply } from '../http/reply.ts'
import type { LeadMail } from '../services/lead-mail.ts'
import type { RequestContext, Route } from './deps.ts'

// Nothing on these pages loads or runs; the one form posts to this origin. No referrer: the URL holds the token.
const HTML = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy': "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
}

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

function page(status: number, title: string, text: string, extra = ''): Reply {
  const body = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="noindex"><title>${escape(title)}</title></head>
<body><main><h1>${escape(title)}</h1><p>${escape(text)}</p>${extra}</main></body></html>
`
  return reply(status, body, HTML)
}

const tokenOf = (request: IRequest) => new URL(request.url).searchParams.get('token') ?? ''

const EXPIRED_LINK = page(410, 'This link has expired', 'The confirmation link has expired. Sign up again to get a new one.')
const INVALID_LINK = page(400, 'This link is not valid', 'The link is incomplete or was altered. Copy the whole link from the mail, or sign up again.')

export function leadLinkRoutes(mail: LeadMail): Route[] {
  function confirmPage(request: IRequest, ctx: RequestContext): Reply {
    const token = tokenOf(request)
    const state = mail.checkConfirm(token, new Date(ctx.now))
    if (state === 'invalid') return INVALID_LINK
    if (state === 'expired') return EXPIRED_LINK
    const action = `confirm?token=${encodeURIComponent(token)}`
    const button = `<form method="post" action="${escape(action)}"><button type="submit">Confirm my subscription</button></form>`
    return page(200, 'Confirm your subscription', 'Press the button to confirm that you want to receive the newsletter at this address.', button)
  }

  async function confirm(request: IRequest, ctx: RequestContext): Promise<Reply> {
    const outcome = await mail.confirm(tokenOf(request), new Date(ctx.now), ctx.clientAddress)
    if (outcome === 'confirmed') return page(200, 'Subscription confirmed', 'Thank you: you are subscribed to the newsletter. Every mail carries a link to unsubscribe.')
    if (outcome === 'already') return page(200, 'Subscription confirmed', 'This subscription was already confirmed.')
    if (outcome === 'expired') return EXPIRED_LINK
    if (outcome === 'gone') return page(410, 'This subscription has ended', 'This subscription was cancelled or has expired. Sign up again to subscribe.')
    return INVALID_LINK
  }

  function unsubscribePage(request: IRequest): Reply {
    const token = tokenOf(request)
    if (!mail.checkUnsubscribe(token)) return INVALID_LINK
    // Relative to this page: right under whatever path prefix a proxy serves the API at.
    const action = `unsubscribe?token=${encodeURIComponent(token)}`
    const button = `<form method="post" action="${escape(action)}"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`
    return page(200, 'Unsubscribe from the newsletter', 'Press the button to stop receiving the newsletter at this address.', button)
  }

  async function unsubscribe(request: IRequest, ctx: RequestContext): Promise<Reply> {
    const outcome = await mail.unsubscribe(tokenOf(request), new Date(ctx.now))
    if (outcome === 'invalid') return INVALID_LINK
    return page(200, 'You are unsubscribed', outcome === 'unsubscribed' ? 'You will receive no more newsletter mail at this address.' : 'This address was already unsubscribed.')
  }

  return [
    { method: 'GET', path: '/leads/confirm', handler: confirmPage, doc: confirmPageDoc },
    { method: 'POST', path: '/leads/confirm', handler: confirm, doc: confirmDoc },
    { method: 'GET', path: '/leads/unsubscribe', handler: unsubscribePage, doc: unsubscribePageDoc },
    { method: 'POST', path: '/leads/unsubscribe', handler: unsubscribe, doc: unsubscribeDoc },
  ]
}

const TokenQuery = v.object({ token: v.pipe(v.string(), v.description('The signed token from the mail (not a credential: it names one subscription for one purpose).')) })
const TAGS = ['Lead capture']
const html = (description: string) => ({ description, mediaType: 'text/html' })

const confirmPageDoc: OperationDoc = {
  operationId: 'showConfirmSubscription',
  summary: 'The confirmation page (the link in the confirmation mail): a button that posts the confirmation',
  description: 'Changes nothing (mail scanners open links): the button does.',
  tags: TAGS,
  scopes: null,
  query: TokenQuery,
  responses: { 200: html('The page with its button.'), 400: html('The token is not genuine.'), 410: html('The link has expired.') },
}

const confirmDoc: OperationDoc = {
  operationId: 'confirmNewsletterSubscription',
  summary: 'Confirm a newsletter subscription (the button of the confirmation page)',
  description: 'Records the time, the client address and the consent version. No credentials; any body is ignored. Idempotent: confirming again changes nothing.',
  tags: TAGS,
  scopes: null,
  query: TokenQuery,
  responses: {
    200: html('Confirmed (now or before).'),
    400: html('The token is not genuine.'),
    410: html('The link has expired, or the subscription was cancelled or expired.'),
  },
}

const unsubscribePageDoc: OperationDoc = {
  operationId: 'showUnsubscribe',
  summary: 'The unsubscribe page: a button that posts the one-click unsubscribe',
  description: 'Changes nothing (link scanners open links): the button does.',
  tags: TAGS,
  scopes: null,
  query: TokenQuery,
  responses: { 200: html('The page with its button.'), 400: html('The token is not genuine.') },
}

const unsubscribeDoc: OperationDoc = {
  operationId: 'unsubscribeNewsletter',
  summary: 'Unsubscribe (RFC 8058 one-click)',
  description:
    'No credentials or cookies. The body `List-Unsubscribe=One-Click` (application/x-www-form-urlencoded), as a mailbox provider sends it, or no body at all. The subscriber leaves the list at once; a later signup of the address is a new consent. Idempotent.',
  tags: TAGS,
  scopes: null,
  query: TokenQuery,
  responses: { 200: html('Unsubscribed (now or before).'), 400: html('The token is not genuine.') },
}
