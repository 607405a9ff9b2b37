// An agent's handle: what policies match and what a decision names. Unique per organization.
export const HANDLE = /^[a-z0-9][a-z0-9._-]{0,63}$/
export const HANDLE_MESSAGE = 'must be 1 to 64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit'
