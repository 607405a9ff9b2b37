// Operator commands of the product API: a human creates an
// organization with its first Owner, adds users, and creates, rotates, revokes and lists keys.
//
// Passwords never need to be argv (visible in `ps` and shell history): they come from the
// STEWARD_PASSWORD environment variable, or from standard input (prompted on a terminal, without echo).
// --owner-password / --password exist for throwaway setups and print a warning.
import type { DatabaseHandle } from '../database/connect.ts'
import { notifyCredentialChange } from '../services/credential-feed.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { createApiKey, findApiKeyById, listApiKeys, revokeApiKey, rotateApiKey, type ApiKeyRow } from '../storage/keys.ts'
import { createOrganization, findOrganization } from '../storage/organizations.ts'
import { hashPassword } from '../auth/passwords.ts'
import type { Role } from '../database/schema.ts'
import { addOrChangeMembership, createUserUnlessExists, findUserByEmail, findUserEmails, setMembership } from '../storage/users.ts'
import { creatorString } from '../domain/creator.ts'
import { ROLES } from '../domain/roles.ts'
import { UUID } from '../domain/uuid.ts'
import { isValidEmail } from '../domain/email.ts'
import { CommandFailed, UsageError, type Command, type CommandContext, type Options, type OptionSpec } from './command.ts'
import { withDatabase } from './database.ts'
import { readPasswordInput } from './prompt.ts'

const MIN_PASSWORD = 12

const ORG: OptionSpec = { type: 'string', value: 'ID', description: "the organization's id, as org create prints it", required: true }
const ROLE: OptionSpec = { type: 'string', value: 'ROLE', description: 'the role granted', required: true, choices: ROLES }
const KEY: OptionSpec = { type: 'string', value: 'ID', description: "the key's id, as key list shows it", required: true }
const PASSWORD_NOTE = 'The password comes from the STEWARD_PASSWORD environment variable, or from standard input\n(the first line of a pipe; a terminal prompts for it twice, without echo). Never put it in argv.'

function text(options: Options, name: string): string {
  const value = options[name]
  return typeof value === 'string' ? value : ''
}

function uuidOption(options: Options, name: string): string {
  const value = text(options, name)
  if (!UUID.test(value)) throw new UsageError(`--${name} must be a UUID`)
  return value.toLowerCase()
}

function emailOption(options: Options, name: string): string {
  const email = text(options, name).trim()
  if (!isValidEmail(email)) throw new UsageError(`--${name} must be an email address`)
  return email
}

/** The password from the flag (warned), STEWARD_PASSWORD, or standard input, in that order. */
async function readPassword({ options, env, io }: CommandContext, flag: string): Promise<string> {
  let password: string | null
  const given = options[flag]
  if (typeof given === 'string') {
    io.stderr.write(`warning: --${flag} is visible to other local users (ps, shell history); prefer STEWARD_PASSWORD or stdin\n`)
    password = given
  } else if (env.STEWARD_PASSWORD) {
    // The operator command line is the process edge: this secret is deliberately not configuration.
    password = env.STEWARD_PASSWORD
  } else {
    password = await readPasswordInput(io.stdin ?? null, io.stderr)
  }
  if (!password) {
    throw new UsageError('no password was given: set STEWARD_PASSWORD, or write the password on standard input (a terminal prompts for it)')
  }
  if (password.length < MIN_PASSWORD) throw new UsageError(`the password must have at least ${MIN_PASSWORD} characters`)
  if (password.length > 1024) throw new UsageError('the password is longer than 1024 characters')
  return password
}

function expiryOption(options: Options, now: number): Date | null {
  const raw = options['expires-in-days']
  if (raw === undefined) return null
  if (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 3650) throw new UsageError('--expires-in-days must be a whole number from 1 to 3650')
  return new Date(now + Number(raw) * 86_400_000)
}

const orgCreate: Command = {
  name: 'org create',
  summary: 'create an organization and its first Owner; prints the organization id',
  options: {
    name: { type: 'string', value: 'NAME', description: "the organization's name (1 to 200 characters)", required: true },
    'owner-email': { type: 'string', value: 'EMAIL', description: "the first Owner's email; an existing account keeps its password", required: true },
    'owner-password': { type: 'string', value: 'PASSWORD', description: 'the Owner password (visible to other local users: for throwaway setups only)' },
  },
  notes: PASSWORD_NOTE,
  async run(context) {
    const { options, config, io, database } = context
    const name = text(options, 'name').trim()
    if (name === '' || name.length > 200) throw new UsageError('--name must have 1 to 200 characters')
    const email = emailOption(options, 'owner-email')
    const password = await readPassword(context, 'owner-password')
    const hash = await hashPassword(password, config.passwordHashCost)
    return withDatabase({ config, database }, async ({ db }) => {
      const now = new Date()
      const result = await db.transaction().execute(async (trx) => {
        const org = await createOrganization(trx, name, now)
        const { user, created } = await createUserUnlessExists(trx, email, hash, now)
        await setMembership(trx, user.id, org.id, 'owner', now, BY_OPERATOR)
        return { org, created }
      })
      if (!result.created) io.stderr.write(`note: ${email} already had an account; its password is unchanged\n`)
      io.stderr.write(`created organization "${name}" with owner ${email}\n`)
      io.stdout.write(`${result.org.id}\n`)
      return 0
    })
  },
}

const userAdd: Command = {
  name: 'user add',
  summary: 'add a user to an organization, or change their role there',
  options: {
    org: ORG,
    email: { type: 'string', value: 'EMAIL', description: "the user's email; a new account is created when it has none", required: true },
    role: ROLE,
    password: { type: 'string', value: 'PASSWORD', description: 'a new account\'s password (visible to other local users: for throwaway setups only)' },
  },
  notes: `${PASSWORD_NOTE}\nAn existing account keeps its password. The organization always keeps at least one Owner.`,
  async run(context) {
    const { options, config, io, database } = context
    const orgId = uuidOption(options, 'org')
    const email = emailOption(options, 'email')
    const role = options.role as Role
    return withDatabase({ config, database }, async ({ db }) => {
      if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
      const now = new Date()
      let user = await findUserByEmail(db, email)
      if (!user) {
        const password = await readPassword(context, 'password')
        user = (await createUserUnlessExists(db, email, await hashPassword(password, config.passwordHashCost), now)).user
      }
      // The rule the API keeps, checked by storage in the same transaction as the change.
      const outcome = await addOrChangeMembership(db, orgId, user.id, role, now, BY_OPERATOR)
      if (outcome === 'last-owner') {
        throw new CommandFailed(`${email} is the only Owner of ${orgId}; make another member Owner first (user add --role owner)`)
      }
      if (outcome === 'missing') throw new CommandFailed(`the membership of ${email} changed meanwhile; run the command again`)
      // A changed role also caps the keys this user created: servers drop cached lookups at once.
      await notifyRevocation(context, db, user.id)
      io.stdout.write(`${email} is ${role} of ${orgId}\n`)
      return 0
    })
  },
}

const keyCreate: Command = {
  name: 'key create',
  summary: 'create an API key; prints the secret once (stdout)',
  options: {
    org: ORG,
    role: ROLE,
    name: { type: 'string', value: 'NAME', description: 'a label shown in listings', default: 'API key' },
    'expires-in-days': { type: 'string', value: 'DAYS', description: 'stop the key after DAYS days (1 to 3650; default: never)' },
  },
  async run({ options, config, io, database }) {
    const orgId = uuidOption(options, 'org')
    const role = options.role as Role
    const name = text(options, 'name').trim()
    if (name === '' || name.length > 200) throw new UsageError('--name must have 1 to 200 characters')
    const expiresAt = expiryOption(options, Date.now())
    return withDatabase({ config, database }, async ({ db }) => {
      if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
      const { key, secret } = await createApiKey(db, { organizationId: orgId, name, role, createdByUserId: null, createdByKeyId: null, expiresAt }, new Date(), BY_OPERATOR)
      io.stderr.write(`created key ${key.id} (${role}${expiresAt ? `, expires ${expiresAt.toISOString()}` : ''}); the secret below is shown once\n`)
      io.stdout.write(`${secret}\n`)
      return 0
    })
  },
}

const keyRotate: Command = {
  name: 'key rotate',
  summary: 'replace a key; the old one stops at once (or after the grace); prints the new secret once',
  options: {
    key: KEY,
    'grace-seconds': { type: 'string', value: 'SECONDS', description: 'keep the old key working SECONDS more, up to 604800', default: '0' },
  },
  async run(context) {
    const { options, config, io, database } = context
    const keyId = uuidOption(options, 'key')
    const rawGrace = text(options, 'grace-seconds')
    if (!/^\d+$/.test(rawGrace) || Number(rawGrace) > 604_800) throw new UsageError('--grace-seconds must be a whole number up to 604800')
    const grace = Number(rawGrace)
    return withDatabase({ config, database }, async ({ db }) => {
      const old = await findApiKeyById(db, keyId)
      if (!old || old.revoked_at) throw new UsageError(`no active key ${keyId}`)
      const now = Date.now()
      const rotated = await rotateApiKey(db, old.organization_id, keyId, { userId: null, keyId: null }, grace > 0 ? new Date(now + grace * 1000) : null, new Date(now), BY_OPERATOR)
      if (!rotated) throw new UsageError(`no active key ${keyId}`)
      // Servers on PostgreSQL drop cached lookups of the old key at once.
      await notifyRevocation(context, db, keyId)
      io.stderr.write(`key ${keyId} replaced by ${rotated.key.id}; the secret below is shown once\n`)
      io.stdout.write(`${rotated.secret}\n`)
      return 0
    })
  },
}

const keyRevoke: Command = {
  name: 'key revoke',
  summary: 'revoke a key and every token minted from it',
  options: { key: KEY },
  async run(context) {
    const { options, config, io, database } = context
    const keyId = uuidOption(options, 'key')
    return withDatabase({ config, database }, async ({ db }) => {
      const key = await findApiKeyById(db, keyId)
      if (!key) throw new UsageError(`no key ${keyId}`)
      // Also revokes every key this one issued; servers drop cached lookups of each.
      const revoked = await revokeApiKey(db, key.organization_id, keyId, new Date(), BY_OPERATOR)
      for (const id of new Set([keyId, ...revoked])) await notifyRevocation(context, db, id)
      io.stdout.write(revoked.includes(keyId) ? `revoked ${keyId}${revoked.length > 1 ? ` and ${revoked.length - 1} key(s) it issued` : ''}\n` : `${keyId} was already revoked\n`)
      return 0
    })
  },
}

const keyList: Command = {
  name: 'key list',
  summary: "list an organization's keys: role, creator, expiry, last use, state (never their secrets)",
  options: {
    org: ORG,
    format: { type: 'string', value: 'FORMAT', description: 'aligned columns for people, or a JSON array for scripts', choices: ['table', 'json'], default: 'table' },
  },
  notes: 'State is active, rotating (stops AT) for a replaced key in its grace, expired, or revoked.\nCreator is the email of the user who made the key, key:ID for a key, or operator.',
  async run({ options, config, io, database }) {
    const orgId = uuidOption(options, 'org')
    return withDatabase({ config, database }, async ({ db }) => {
      if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
      const keys = await listApiKeys(db, orgId)
      const emails = await findUserEmails(db, keys.flatMap((key) => (key.created_by_key_id === null && key.created_by_user_id !== null ? [key.created_by_user_id] : [])))
      const rows = keys.map((key) => keyRow(key, emails, Date.now()))
      io.stdout.write(options.format === 'json' ? `${JSON.stringify(rows, null, 2)}\n` : table(rows))
      return 0
    })
  },
}

interface KeyRow {
  key_id: string
  prefix: string
  role: Role
  name: string
  /** "operator", "key:<id>", or the creating user's email ("user:<id>" once the account is gone). */
  creator: string
  created_at: string
  expires_at: string | null
  last_used_at: string | null
  /** "active", "rotating", "expired" or "revoked". */
  state: string
  /** When a rotating key stops working. */
  stops_at: string | null
  replaced_by: string | null
}

function keyRow(key: ApiKeyRow, emails: ReadonlyMap<string, string>, now: number): KeyRow {
  const createdBy = creatorString(key.created_by_user_id, key.created_by_key_id)
  const creator = createdBy.startsWith('user:') ? (emails.get(key.created_by_user_id!) ?? createdBy) : createdBy
  const expired = key.expires_at !== null && key.expires_at.getTime() <= now
  // A key rotated with a grace keeps working until its expiry, which the rotation shortened.
  const rotating = key.replaced_by !== null && !key.revoked_at && !expired
  return {
    key_id: key.id,
    prefix: key.display_prefix,
    role: key.role,
    name: key.name,
    creator,
    created_at: key.created_at.toISOString(),
    expires_at: key.expires_at?.toISOString() ?? null,
    last_used_at: key.last_used_at?.toISOString() ?? null,
    state: key.revoked_at ? 'revoked' : expired ? 'expired' : rotating ? 'rotating' : 'active',
    stops_at: rotating ? (key.expires_at?.toISOString() ?? null) : null,
    replaced_by: key.replaced_by,
  }
}

/** Aligned columns; a name cannot break the layout (control characters become spaces). */
function table(rows: readonly KeyRow[]): string {
  const when = (iso: string | null, none: string) => (iso ? iso.replace(/\.\d{3}Z$/, 'Z') : none)
  const cells = [
    ['key_id', 'prefix', 'role', 'name', 'creator', 'expires', 'last_used', 'state'],
    ...rows.map((row) => [
      row.key_id,
      row.prefix,
      row.role,
      row.name.replace(/[\u0000-\u001f\u007f]/g, ' '),
      row.creator,
      when(row.expires_at, 'never'),
      when(row.last_used_at, 'never'),
      row.state === 'rotating' ? `rotating (stops ${when(row.stops_at, '?')})` : row.state,
    ]),
  ]
  const widths = cells[0]!.map((_, column) => Math.max(...cells.map((line) => line[column]!.length)))
  return cells.map((line) => line.map((cell, column) => (column === line.length - 1 ? cell : cell.padEnd(widths[column]!))).join('  ')).join('\n') + '\n'
}

/**
 * Tells servers to forget cached lookups of a key, or of a user's sessions and keys: the running
 * server carrying out this command at once (before the command reports success), and servers on
 * PostgreSQL through the database.
 */
async function notifyRevocation(context: CommandContext, db: DatabaseHandle['db'], id: string): Promise<void> {
  context.credentialsChanged?.(id)
  // Best effort: on PGlite there is no other process to tell.
  await notifyCredentialChange(db, id).catch(() => {})
}

export const provisionCommands: readonly Command[] = [orgCreate, userAdd, keyCreate, keyRotate, keyRevoke, keyList]
