// The identifier rule: every id is a UUID, compared without regard to case (RFC 9562 §4), kept
// in lower case.

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The id in its stored (lower-case) form, or null when `text` is not a UUID. */
export function readUuid(text: string): string | null {
  return UUID.test(text) ? text.toLowerCase() : null
}
