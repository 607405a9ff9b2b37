// Operator commands of the product API (PRODUCT.md "Provisioning"): a human creates an
// organization with its first Owner, adds users, and creates, rotates, revokes and lists keys.
//
// Passwords never need to be argv (visible in `ps` and shell history): they come from the
// STEWARD_PASSWORD environment variable, or from standard input (prompted on a terminal).
// --owner-password / --password exist for throwaway setups and print a warning.
import { createInterface } from 'node:readline'
import type { DatabaseHandle } from '../storage/connect.ts'
import { notifyCredentialChange } from '../storage/revocations.ts'
import { createApiKey, findApiKeyById, listApiKeys, revokeApiKey, rotateApiKey } from '../storage/keys.ts'
import { createOrganization, findOrganization } from '../storage/organizations.ts'
import { hashPassword } from '../storage/passwords.ts'
import type { Role } from '../storage/schema.ts'
import { createUserUnlessExists, findUserByEmail, setMembership } from '../storage/users.ts'
import { ROLES, UUID } from '../routes/access.ts'
import { isValidEmail } from '../routes/email.ts'
import { stringFlag, UsageError, type Command, type Io, type ParsedArgs } from './command.ts'
import { withDatabase } from './database.ts'

const MIN_PASSWORD = 12

function uuidFlag(args: ParsedArgs, name: string): string {
  const value = stringFlag(args, name)
  if (!UUID.test(value)) throw new UsageError(`--${name} must be a UUID`)
  return value.toLowerCase()
}

function roleFlag(args: ParsedArgs): Role {
  const role = stringFlag(args, 'role') as Role
  if (!(ROLES as readonly Role[]).includes(role)) throw new UsageError(`--role must be one of ${ROLES.join(', ')}`)
  return role
}

function emailFlag(args: ParsedArgs, name: string): string {
  const email = stringFlag(args, name).trim()
  if (!isValidEmail(email)) throw new UsageError(`--${name} must be an email address`)
  return email
}

async function readLine(io: Io, prompt: string): Promise<string> {
  const stdin = io.stdin ?? process.stdin
  if (stdin.isTTY) io.stderr.write(prompt)
  const lines = createInterface({ input: stdin, terminal: false })
  try {
    for await (const line of lines) return line
    return ''
  } finally {
    lines.close()
  }
}

/** The password from the flag (warned), STEWARD_PASSWORD, or standard input, in that order. */
async function readPassword(args: ParsedArgs, flag: string, io: Io): Promise<string> {
  let password: string
  const given = args.flags[flag]
  if (typeof given === 'string') {
    io.stderr.write(`warning: --${flag} is visible to other local users (ps, shell history); prefer STEWARD_PASSWORD or stdin\n`)
    password = given
  } else if ((io.env ?? process.env).STEWARD_PASSWORD) {
    // The operator command line is the process edge: this secret is deliberately not configuration.
    password = (io.env ?? process.env).STEWARD_PASSWORD!
  } else {
    password = await readLine(io, 'password: ')
  }
  if (password.length < MIN_PASSWORD) throw new UsageError(`the password must have at least ${MIN_PASSWORD} characters`)
  if (password.length > 1024) throw new UsageError('the password is longer than 1024 characters')
  return password
}

function daysFlag(args: ParsedArgs, now: number): Date | null {
  const raw = args.flags['expires-in-days']
  if (raw === undefined) return null
  if (typeof raw !== 'string' || !/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 3650) throw new UsageError('--expires-in-days must be a whole number from 1 to 3650')
  return new Date(now + Number(raw) * 86_400_000)
}

const orgCreate: Command = {
  name: 'org create',
  usage: 'org create --name NAME --owner-email EMAIL   (password: STEWARD_PASSWORD or stdin)',
  summary: 'create an organization and its first Owner; prints the organization id',
  async run(args, config, io) {
    const name = stringFlag(args, 'name').trim()
    if (name === '' || name.length > 200) throw new UsageError('--name must have 1 to 200 characters')
    const email = emailFlag(args, 'owner-email')
    const password = await readPassword(args, 'owner-password', io)
    const hash = await hashPassword(password, config.passwordHashCost)
    return withDatabase(config, async ({ db }) => {
      const now = new Date()
      const result = await db.transaction().execute(async (trx) => {
        const org = await createOrganization(trx, name, now)
        const { user, created } = await createUserUnlessExists(trx, email, hash, now)
        await setMembership(trx, user.id, org.id, 'owner', now)
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
  usage: 'user add --org ID --email EMAIL --role ROLE   (new users: password from STEWARD_PASSWORD or stdin)',
  summary: 'add a user to an organization (or change their role)',
  async run(args, config, io) {
    const orgId = uuidFlag(args, 'org')
    const email = emailFlag(args, 'email')
    const role = roleFlag(args)
    return withDatabase(config, async ({ db }) => {
      if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
      const now = new Date()
      let user = await findUserByEmail(db, email)
      if (!user) {
        const password = await readPassword(args, 'password', io)
        user = (await createUserUnlessExists(db, email, await hashPassword(password, config.passwordHashCost), now)).user
      }
      await setMembership(db, user.id, orgId, role, now)
      // A changed role also caps the keys this user created: servers drop cached lookups at once.
      await notifyRevocation(db, user.id)
      io.stdout.write(`${email} is ${role} of ${orgId}\n`)
      return 0
    })
  },
}

const keyCreate: Command = {
  name: 'key create',
  usage: 'key create --org ID --role ROLE [--name NAME] [--expires-in-days D]',
  summary: 'create an API key; prints the secret once (stdout)',
  async run(args, config, io) {
    const orgId = uuidFlag(args, 'org')
    const role = roleFlag(args)
    const name = stringFlag(args, 'name', 'API key').trim()
    const expiresAt = daysFlag(args, Date.now())
    return withDatabase(config, async ({ db }) => {
      if (!(await findOrganization(db, orgId))) throw new UsageError(`no organization ${orgId}`)
      const { key, secret } = await createApiKey(db, { organizationId: orgId, name, role, createdByUserId: null, createdByKeyId: null, expiresAt }, new Date())
      io.stderr.write(`created key ${key.key_id} (${role}${expiresAt ? `, expires ${expiresAt.toISOString()}` : ''}); the secret below is shown once\n`)
      io.stdout.write(`${secret}\n`)
      return 0
    })
  },
}

const keyRotate: Command = {
  name: 'key rotate',
  usage: 'key rotate --key ID [--grace-seconds S]',
  summary: 'replace a key; the old one stops at once (or after the grace); prints the new secret once',
  async run(args, config, io) {
    const keyId = uuidFlag(args, 'key')
    const rawGrace = args.flags['grace-seconds']
    if (rawGrace !== undefined && (typeof rawGrace !== 'string' || !/^\d+$/.test(rawGrace) || Number(rawGrace) > 604_800)) {
      throw new UsageError('--grace-seconds must be a whole number up to 604800')
    }
    const grace = rawGrace === undefined ? 0 : Number(rawGrace)
    return withDatabase(config, async ({ db }) => {
      const old = await findApiKeyById(db, keyId)
      if (!old || old.revoked_at) throw new UsageError(`no active key ${keyId}`)
      const now = Date.now()
      const rotated = await rotateApiKey(db, old.organization_id, keyId, { userId: null, keyId: null }, grace > 0 ? new Date(now + grace * 1000) : null, new Date(now))
      if (!rotated) throw new UsageError(`no active key ${keyId}`)
      // Servers on PostgreSQL drop cached lookups of the old key at once.
      await notifyRevocation(db, keyId)
      io.stderr.write(`key ${keyId} replaced by ${rotated.key.key_id}; the secret below is shown once\n`)
      io.stdout.write(`${rotated.secret}\n`)
      return 0
    })
  },
}

const keyRevoke: Command = {
  name: 'key revoke',
  usage: 'key revoke --key ID',
  summary: 'revoke a key and every token minted from it',
  async run(args, config, io) {
    const keyId = uuidFlag(args, 'key')
    return withDatabase(config, async ({ db }) => {
      const key = await findApiKeyById(db, keyId)
      if (!key) throw new UsageError(`no key ${keyId}`)
      const changed = await revokeApiKey(db, key.organization_id, keyId, new Date())
      await notifyRevocation(db, keyId)
      io.stdout.write(changed ? `revoked ${keyId}\n` : `${keyId} was already revoked\n`)
      return 0
    })
  },
}

const keyList: Command = {
  name: 'key list',
  usage: 'key list --org ID',
  summary: "list an organization's keys (never their secrets)",
  async run(args, config, io) {
    const orgId = uuidFlag(args, 'org')
    return withDatabase(config, async ({ db }) => {
      const keys = await listApiKeys(db, orgId)
      io.stdout.write('key_id\tprefix\trole\tname\tstate\n')
      const now = Date.now()
      for (const key of keys) {
        const state = key.revoked_at ? 'revoked' : key.expires_at && key.expires_at.getTime() <= now ? 'expired' : 'active'
        io.stdout.write(`${key.key_id}\t${key.prefix}\t${key.role}\t${key.name.replace(/[\t\n\r]/g, ' ')}\t${state}\n`)
      }
      return 0
    })
  },
}

/** Tells servers on PostgreSQL to forget cached lookups of a key, or of a user's sessions and keys. */
async function notifyRevocation(db: DatabaseHandle['db'], id: string): Promise<void> {
  // Best effort: on PGlite there is no other process to tell.
  await notifyCredentialChange(db, id).catch(() => {})
}

export const provisionCommands: readonly Command[] = [orgCreate, userAdd, keyCreate, keyRotate, keyRevoke, keyList]
