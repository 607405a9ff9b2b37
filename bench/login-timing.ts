// Login timing: an unknown email must cost about the same as a wrong password (OWASP: no user
// enumeration by timing). Not part of the test suite; run by hand:
//
//   npx tsx bench/login-timing.ts [--rounds 20] [--cost 17]
//
// Prints the median and p90 of each case and the ratio of the medians (1.00 is ideal).
import { parseScriptArgs } from '../cli/command.ts'
import { loadConfig } from '../config.ts'
import { seedWorld } from '../fixtures/seed.ts'
import { silentLogger } from '../log.ts'
import { createHandler } from '../server.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'

const values = parseScriptArgs({ rounds: { type: 'string', default: '20' }, cost: { type: 'string', default: '17' } })
const rounds = Number(values.rounds)
const cost = Number(values.cost)
const config = loadConfig({ DATABASE_URL: 'memory://', LOG_LEVEL: 'silent', PASSWORD_HASH_COST: String(cost), LOGIN_RATE_LIMIT: '100000/60' })
const handle = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger: silentLogger })
await migrateToLatest(handle.db)
const vars = await seedWorld(handle.db, Date.now(), { passwordHashCost: cost })
const app = createHandler(config, { db: handle.db, clock: Date.now, logger: silentLogger, listenUrl: null })

async function login(email: string, password: string): Promise<number> {
  const started = performance.now()
  const res = await app.fetch(
    new Request('http://localhost/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) }),
    { remoteAddress: '127.0.0.1' },
  )
  await res.text()
  if (res.status !== 400) throw new Error(`expected 400, got ${res.status}`)
  return performance.now() - started
}

const unknown: number[] = []
const wrong: number[] = []
// Warm-up (the dummy hash is computed on first use), then interleave so drift hits both.
await login('nobody@example.com', 'x')
await login(vars.USER_EMAIL_A!, 'x')
for (let i = 0; i < rounds; i++) {
  unknown.push(await login(`nobody-${i}@example.com`, 'not the password'))
  wrong.push(await login(vars.USER_EMAIL_A!, `wrong-${i}`))
}

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * q))]!
const row = (name: string, values: number[]) => `${name.padEnd(16)} median ${quantile(values, 0.5).toFixed(1).padStart(7)} ms   p90 ${quantile(values, 0.9).toFixed(1).padStart(7)} ms`
console.log(`scrypt N=2^${cost}, r=8, p=1; ${rounds} rounds each`)
console.log(row('unknown email', unknown))
console.log(row('wrong password', wrong))
console.log(`ratio unknown/wrong (medians): ${(quantile(unknown, 0.5) / quantile(wrong, 0.5)).toFixed(3)}`)
await app.close()
await handle.close()
