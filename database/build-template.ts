// Run by `npm install` (the postinstall script): makes the migrated PGlite template, so that the
// first start on a new data directory copies a ready database instead of running initdb and every
// migration (seconds, and a second WebAssembly PostgreSQL in the server's memory). A failure here
// never fails the install: the server then makes what it needs on first start, only slower.
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { pgliteStartParams, fromPglite } from './connect.ts'
import { ensureDecisionPartitions } from './partitions.ts'
import { migrateToLatest } from './migrate.ts'
import { migrations } from './migrations/index.ts'
import { copyInitdbTemplate, migratedTemplateDir, templateDir } from './pglite-template.ts'

export async function buildMigratedTemplate(): Promise<string> {
  const { PGlite } = await import('@electric-sql/pglite')
  const startParams = pgliteStartParams(PGlite.defaultStartParams)
  const target = migratedTemplateDir(startParams, Object.keys(migrations))
  if (existsSync(join(target, 'PG_VERSION'))) return target
  const partial = `${target}.${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  await copyInitdbTemplate(partial, startParams)
  const pglite = await PGlite.create({ dataDir: partial, startParams })
  const handle = fromPglite(pglite)
  try {
    await migrateToLatest(handle.db)
    // The decision log's partitions of this month and the next: a first start in the month of the
    // install then only checks for them (about 0.3 s less; in a later month it makes its own).
    await ensureDecisionPartitions(handle.db, new Date())
    // A clean checkpoint: a copy then opens without crash recovery.
    await pglite.exec('CHECKPOINT')
  } finally {
    await handle.close()
  }
  renameSync(partial, target)
  // Templates of other PGlite versions, settings or migration sets are of no further use.
  const keep = new Set([target, templateDir(startParams)].map((path) => path.split('/').pop()))
  for (const name of readdirSync(dirname(target))) {
    if (/^pglite-(template|migrated)-[0-9a-f]{16}$/.test(name) && !keep.has(name)) rmSync(join(dirname(target), name), { recursive: true, force: true })
  }
  return target
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = performance.now()
  buildMigratedTemplate().then(
    (path) => console.log(`steward: embedded database template ready (${Math.round(performance.now() - started)} ms): ${path}`),
    (error: Error) => console.warn(`steward: could not prepare the embedded database template (${error.message}); the first start will make one`),
  )
}
