// Password hashing: scrypt N=2^17, r=8, p=1 (OWASP Password Storage cheat sheet), asynchronous
// on libuv's thread pool so the event loop never blocks, with at most a few hashes at a time so
// a login flood cannot starve the pool (and the rest of the server) of threads.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'

const KEY_LENGTH = 32
const R = 8
const P = 1
/** Concurrent hashes allowed; further callers queue, and past the queue limit are refused. */
const MAX_CONCURRENT = 2
const MAX_QUEUED = 64

export class HashingBusyError extends Error {
  override name = 'HashingBusyError'
}

let running = 0
const waiting: Array<() => void> = []

async function withSlot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= MAX_CONCURRENT) {
    if (waiting.length >= MAX_QUEUED) throw new HashingBusyError('too many password checks in progress')
    await new Promise<void>((resolve) => waiting.push(resolve))
  } else running++
  try {
    return await work()
  } finally {
    const next = waiting.shift()
    if (next) next()
    else running--
  }
}

function derive(password: string, salt: Buffer, log2N: number): Promise<Buffer> {
  const N = 2 ** log2N
  return withSlot(
    () =>
      new Promise<Buffer>((resolve, reject) =>
        // Node refuses N=2^17 at its default 32 MiB maxmem: 128·N·r bytes are needed.
        scrypt(password.normalize('NFC'), salt, KEY_LENGTH, { N, r: R, p: P, maxmem: 256 * N * R }, (error, key) =>
          error ? reject(error) : resolve(key),
        ),
      ),
  )
}

/** `scrypt$<log2 N>$<r>$<p>$<salt b64>$<key b64>` */
export async function hashPassword(password: string, log2N: number): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, log2N)
  return `scrypt$${log2N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const log2N = Number(parts[1])
  if (!Number.isInteger(log2N) || log2N < 10 || log2N > 20) return false
  const expected = Buffer.from(parts[5]!, 'base64')
  const key = await derive(password, Buffer.from(parts[4]!, 'base64'), log2N)
  return key.length === expected.length && timingSafeEqual(key, expected)
}

const dummies = new Map<number, Promise<string>>()

/**
 * A hash to verify against when the email is unknown, at the same cost as real ones, so an
 * unknown email and a wrong password take the same time (OWASP: no user enumeration by timing).
 */
export function dummyPasswordHash(log2N: number): Promise<string> {
  let dummy = dummies.get(log2N)
  if (!dummy) {
    dummy = hashPassword(crypto.randomUUID(), log2N)
    dummies.set(log2N, dummy)
  }
  return dummy
}
