// Webhook delivery throughput: 1,000 audit events to 5 endpoints on loopback (5,000 signed
// deliveries), from the events' commit until every receiver has acknowledged all of them.
//   node --import tsx bench/webhooks.ts             (in-memory PGlite)
//   BENCH_DATABASE_URL=postgres://… node --import tsx bench/webhooks.ts   (a scratch database on it)
// Goal: ≤ 5 s on either database.
import { createServer } from 'node:http'
import { loadConfig } from '../config.ts'
import { silentLogger } from '../log.ts'
import { createWebhookWorker } from '../jobs/webhook-delivery.ts'
import { recordEvents } from '../storage/audit.ts'
import { openDatabase } from '../database/connect.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { createOrganization } from '../storage/organizations.ts'
import { createWebhook } from '../storage/webhooks.ts'
import { createScratchDatabase, reachable } from './lib.ts'

const EVENTS = 1000
const ENDPOINTS = 5

async function measure(databaseUrl: string): Promise<number> {
  const database = await openDatabase({ databaseUrl, dataDir: '', logger: silentLogger })
  try {
    await migrateToLatest(database.db)
    const org = await createOrganization(database.db, 'Bench', new Date())
    let received = 0
    const server = createServer((request, response) => {
      request.resume()
      request.on('end', () => {
        received++
        response.writeHead(204).end()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const port = (server.address() as { port: number }).port
    const change = { actor: { type: 'operator' as const, id: null }, requestId: null, now: new Date() }
    for (let i = 0; i < ENDPOINTS; i++) {
      await createWebhook(database.db, { organizationId: org.id, url: `http://127.0.0.1:${port}/e${i}`, eventTypes: ['key.created'], description: '', secret: `whsec_${Buffer.alloc(32, i).toString('base64')}`, createdBy: 'operator' }, change)
    }
    // The events, committed in transactions of 10.
    for (let i = 0; i < EVENTS; i += 10) {
      await database.db.transaction().execute((trx) =>
        recordEvents(
          trx,
          Array.from({ length: 10 }, (_, j) => ({ organizationId: org.id, actor: { type: 'system' as const, id: null }, type: 'key.created' as const, target: { type: 'key', id: crypto.randomUUID() }, data: { name: `k${i + j}` }, occurredAt: new Date() })),
        ),
      )
    }
    const config = loadConfig({ DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE: 'true', LOG_LEVEL: 'warn' })
    const worker = createWebhookWorker(config, { db: database.db, clock: Date.now, logger: silentLogger })
    const started = performance.now()
    while (received < EVENTS * ENDPOINTS && performance.now() - started < 60_000) await worker.tick()
    const elapsed = performance.now() - started
    await worker.close()
    server.closeAllConnections()
    server.close()
    if (received !== EVENTS * ENDPOINTS) throw new Error(`only ${received} of ${EVENTS * ENDPOINTS} delivered`)
    return elapsed
  } finally {
    await database.close()
  }
}

const report = (name: string, ms: number) =>
  console.log(`${name}: ${EVENTS} events × ${ENDPOINTS} endpoints = ${EVENTS * ENDPOINTS} deliveries in ${(ms / 1000).toFixed(2)} s (${Math.round((EVENTS * ENDPOINTS) / (ms / 1000))} deliveries/s) ${ms <= 5000 ? '≤ 5 s: ok' : '> 5 s: MISSED'}`)

report('PGlite (in memory)', await measure('memory://'))
const adminUrl = [process.env.BENCH_DATABASE_URL, process.env.TEST_DATABASE_URL].find(Boolean)
if (adminUrl && (await reachable(adminUrl))) {
  const scratch = await createScratchDatabase(adminUrl, 'steward_hooks')
  try {
    report('PostgreSQL', await measure(scratch.url))
  } finally {
    await scratch.drop()
  }
} else {
  console.log('# PostgreSQL: set BENCH_DATABASE_URL to measure it too')
}
