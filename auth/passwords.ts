// Password hashing: scrypt N=2^17, r=8, p=1 (OWASP Password Storage cheat sheet), asynchronous
// on libuv's thread pool so the event loop never blocks.
//
// A server hashes through a `PasswordHasher`, which bounds the work: a few hashes at a time (so a
// login flood cannot take every pool thread from the rest of the server), a bounded queue, and a
// fair share per client and per account. Each client and each account may have only a few hashes
// running or waiting (past that: refused at once, without hashing), the queue serves waiting
// clients in turn, and when it is full a newcomer takes the place of the last job of the client
// holding the most, so a flood from a few addresses cannot lock anyone else out of signing in.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'

const KEY_LENGTH = 32
const R = 8
const P = 1

/**
 * The hasher refused the work. `share`: this client or account already has its share running or
 * waiting (the caller should answer 429); `overload`: every share is in use by other clients (503).
 */
export class HashingBusyError extends Error {
  override name = 'HashingBusyError'
  readonly reason: 'share' | 'overload'
  constructor(reason: 'share' | 'overload') {
    super(reason === 'share' ? 'this client or account has too many password checks in progress' : 'too many password checks in progress')
    this.reason = reason
  }
}

export interface HashingLimits {
  /** Hashes computed at once. */
  readonly concurrency: number
  /** Hashes waiting at most, over all clients. */
  readonly queue: number
  /** Hashes one client may have running or waiting. */
  readonly perClient: number
  /** Hashes one account may have running or waiting, from every client together. */
  readonly perAccount: number
}

/** Whose share a hash uses: the client (rate-limit key) and, when known, the account (normalized email). */
export interface HashOwner {
  readonly client: string
  readonly account: string | null
}

export interface PasswordHasher {
  /** A new hash of `password` at the configured cost, for storage. */
  hash(password: string, owner: HashOwner): Promise<string>
  /**
   * Whether `password` matches `stored`. With `stored` null (no such account) a hash is still
   * computed, at the configured cost, and the answer is false: an unknown email takes the same
   * time as a wrong password (no user enumeration by timing).
   */
  verify(password: string, stored: string | null, owner: HashOwner): Promise<boolean>
}

function derive(password: string, salt: Buffer, log2N: number): Promise<Buffer> {
  const N = 2 ** log2N
  return new Promise<Buffer>((resolve, reject) =>
    // Node refuses N=2^17 at its default 32 MiB maxmem: 128·N·r bytes are needed.
    scrypt(password.normalize('NFC'), salt, KEY_LENGTH, { N, r: R, p: P, maxmem: 256 * N * R }, (error, key) => (error ? reject(error) : resolve(key))),
  )
}

/**
 * `scrypt$<log2 N>$<r>$<p>$<salt b64>$<key b64>`. Not bounded: for operator commands and fixtures,
 * which run outside the server; the server hashes through a `PasswordHasher`.
 */
export async function hashPassword(password: string, log2N: number): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, log2N)
  return `scrypt$${log2N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

interface Parsed {
  log2N: number
  salt: Buffer
  key: Buffer
}

function parseHash(stored: string): Parsed | null {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null
  const log2N = Number(parts[1])
  if (!Number.isInteger(log2N) || log2N < 10 || log2N > 20) return null
  return { log2N, salt: Buffer.from(parts[4]!, 'base64'), key: Buffer.from(parts[5]!, 'base64') }
}

interface Job {
  readonly owner: HashOwner
  readonly run: () => Promise<unknown>
  readonly resolve: (value: unknown) => void
  readonly reject: (error: unknown) => void
}

export function createPasswordHasher(log2N: number, limits: HashingLimits): PasswordHasher {
  let running = 0
  let queued = 0
  /** Waiting jobs per client; the Map's order is the turn order of clients. */
  const waiting = new Map<string, Job[]>()
  /** Running + waiting per client and per account. */
  const perClient = new Map<string, number>()
  const perAccount = new Map<string, number>()

  function add(counts: Map<string, number>, key: string, delta: number): void {
    const next = (counts.get(key) ?? 0) + delta
    if (next <= 0) counts.delete(key)
    else counts.set(key, next)
  }

  function hold(owner: HashOwner, delta: number): void {
    add(perClient, owner.client, delta)
    if (owner.account !== null) add(perAccount, owner.account, delta)
  }

  /** The client with the most jobs waiting, when it has more than `than`. */
  function heaviestAbove(than: number): string | null {
    let heaviest: string | null = null
    let most = than
    for (const [client, jobs] of waiting) {
      if (jobs.length > most) {
        heaviest = client
        most = jobs.length
      }
    }
    return heaviest
  }

  function evictLastOf(client: string): void {
    const jobs = waiting.get(client)!
    const job = jobs.pop()!
    if (jobs.length === 0) waiting.delete(client)
    queued--
    hold(job.owner, -1)
    job.reject(new HashingBusyError('share'))
  }

  function start(job: Job): void {
    running++
    job
      .run()
      .then(job.resolve, job.reject)
      .finally(() => {
        running--
        hold(job.owner, -1)
        next()
      })
  }

  /** Starts the first job of the client whose turn it is; that client goes to the back of the line. */
  function next(): void {
    while (running < limits.concurrency && queued > 0) {
      const [client, jobs] = waiting.entries().next().value!
      const job = jobs.shift()!
      waiting.delete(client)
      if (jobs.length > 0) waiting.set(client, jobs)
      queued--
      start(job)
    }
  }

  function schedule<T>(owner: HashOwner, run: () => Promise<T>): Promise<T> {
    if ((perClient.get(owner.client) ?? 0) >= limits.perClient) return Promise.reject(new HashingBusyError('share'))
    if (owner.account !== null && (perAccount.get(owner.account) ?? 0) >= limits.perAccount) return Promise.reject(new HashingBusyError('share'))
    if (running >= limits.concurrency && queued >= limits.queue) {
      // Full: make room only at the expense of a client that would still hold more than this one.
      const mine = waiting.get(owner.client)?.length ?? 0
      const victim = heaviestAbove(mine + 1)
      if (victim === null) return Promise.reject(new HashingBusyError('overload'))
      evictLastOf(victim)
    }
    return new Promise<T>((resolve, reject) => {
      const job: Job = { owner, run, resolve: resolve as (value: unknown) => void, reject }
      hold(owner, 1)
      if (running < limits.concurrency) return start(job)
      const jobs = waiting.get(owner.client)
      if (jobs) jobs.push(job)
      else waiting.set(owner.client, [job])
      queued++
    })
  }

  // Hashed against when the account does not exist: the same cost as a real check. Its key is
  // random, so no password matches it.
  const dummy: Parsed = { log2N, salt: randomBytes(16), key: randomBytes(KEY_LENGTH) }

  return {
    hash(password, owner) {
      return schedule(owner, () => hashPassword(password, log2N))
    },
    async verify(password, stored, owner) {
      const parsed = stored === null ? dummy : parseHash(stored)
      if (parsed === null) return false
      const key = await schedule(owner, () => derive(password, parsed.salt, parsed.log2N))
      return stored !== null && key.length === parsed.key.length && timingSafeEqual(key, parsed.key)
    },
  }
}

/** The hasher the PASSWORD_HASH_* settings describe. */
export function passwordHasherFor(settings: {
  readonly passwordHashCost: number
  readonly passwordHashConcurrency: number
  readonly passwordHashQueue: number
  readonly passwordHashPerClient: number
  readonly passwordHashPerAccount: number
}): PasswordHasher {
  return createPasswordHasher(settings.passwordHashCost, {
    concurrency: settings.passwordHashConcurrency,
    queue: settings.passwordHashQueue,
    perClient: settings.passwordHashPerClient,
    perAccount: settings.passwordHashPerAccount,
  })
}
