// The text of lead mail: the notification of a new lead (every field, plain text) and the
// confirmation a newsletter subscriber must follow. Pure: the links come in made.
import type { NewDemoRequest, NewSubscription } from '../storage/leads.ts'

/** Control characters (line breaks included) become spaces: a subject is one line. */
function oneLine(text: string, max = 150): string {
  // oxlint-disable-next-line no-control-regex
  const flat = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/**
 * A field's value in a body: its further lines indented under the first, so a value holding line
 * breaks cannot pass for another field (`Email: someone-else@…`).
 */
const shown = (value: string | null | undefined) =>
  value === null || value === undefined || value === '' ? '(none)' : value.replace(/\r\n|[\r\n\u2028\u2029\u0085]/g, `\n${' '.repeat(14)}`)

export interface RenderedMail {
  subject: string
  body: string
}

export function demoNotification(lead: NewDemoRequest, receivedAt: Date): RenderedMail {
  const name = oneLine(`${lead.first_name} ${lead.last_name}`, 100)
  return {
    subject: oneLine(`New demo request: ${name}, ${oneLine(lead.company, 80)}`),
    body: [
      `A new demo request arrived at ${receivedAt.toISOString()}.`,
      '',
      `First name:   ${shown(lead.first_name)}`,
      `Last name:    ${shown(lead.last_name)}`,
      `Email:        ${shown(lead.email)}`,
      `Company:      ${shown(lead.company)}`,
      `LinkedIn:     ${shown(lead.linkedin)}`,
      `Phone:        ${shown(lead.phone)}`,
      `Source:       ${shown(lead.source)}`,
      `Analytics id: ${shown(lead.analytics_distinct_id)}`,
      '',
      `Reply to this mail to write to ${lead.email}.`,
      '',
    ].join('\n'),
  }
}

export function subscriptionNotification(lead: NewSubscription, receivedAt: Date, status: 'pending' | 'active'): RenderedMail {
  return {
    subject: oneLine(`New newsletter subscription: ${lead.email}`),
    body: [
      `A new newsletter subscription arrived at ${receivedAt.toISOString()}.`,
      '',
      `Email:        ${shown(lead.email)}`,
      `Status:       ${status === 'pending' ? 'pending (waiting for the subscriber to confirm)' : 'active'}`,
      `Posted to:    ${shown(lead.via)}`,
      `Source:       ${shown(lead.source)}`,
      `Analytics id: ${shown(lead.analytics_distinct_id)}`,
      '',
    ].join('\n'),
  }
}

export function confirmationMail(email: string, confirmUrl: string, unsubscribeUrl: string, consentText: string | null, ttlSeconds: number): RenderedMail {
  const hours = Math.max(1, Math.round(ttlSeconds / 3600))
  return {
    subject: 'Confirm your newsletter subscription',
    body: [
      `Someone, hopefully you, asked to subscribe ${email} to our newsletter.`,
      '',
      ...(consentText ? [consentText, ''] : []),
      `To confirm, open this link within ${hours} hour${hours === 1 ? '' : 's'}:`,
      '',
      confirmUrl,
      '',
      'If you did not ask for this, ignore this mail: without confirmation you are not subscribed, and the address is forgotten.',
      `To stop it at once: ${unsubscribeUrl}`,
      '',
    ].join('\n'),
  }
}

/** RFC 8058: the one-click unsubscribe pair on every mail that goes to a subscriber. */
export function unsubscribeHeaders(unsubscribeUrl: string): Record<string, string> {
  return { 'List-Unsubscribe': `<${unsubscribeUrl}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' }
}
