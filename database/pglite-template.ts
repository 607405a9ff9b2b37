// A new embedded data directory starts as a copy of a template: the output of PostgreSQL's
// initdb, made once and kept under node_modules/.cache/steward/. Running initdb costs seconds and a
// second WebAssembly instance of PostgreSQL; copying the files costs a tenth of a second, and the
// new directory then opens like any existing one. The cache key is the PGlite version and the
// settings, so an upgrade of PGlite (maybe a new PostgreSQL major) never reuses an old template.
// Migrations still run on top as usual.
import { createHash, randomBytes } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const CACHE_DIR = join(ROOT, 'node_modules', '.cache', 'steward')

/** Marks a data directory whose first opening has not finished yet. */
const INIT_MARKER = '.steward-initializing'

/**
 * initdb settings. 1 MB WAL segments instead of 16 MB: a new directory holds 1 MB of WAL, not
 * 16 MB of zeros to write. It is fixed for the life of the directory, and harmless at our volume.
 */
const INITDB_PARAMS: readonly string[] = ['--wal-segsize=1']

function pgliteVersion(): string {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', '@electric-sql', 'pglite', 'package.json'), 'utf8')).version
  } catch {
    return 'unknown'
  }
}

export function templateDir(startParams: readonly string[]): string {
  const key = createHash('sha256').update(JSON.stringify([pgliteVersion(), startParams, INITDB_PARAMS])).digest('hex').slice(0, 16)
  return join(CACHE_DIR, `pglite-template-${key}`)
}

/**
 * What database/build-template.ts puts into the migrated template besides the migrations. Part of
 * the template's key: a template made by an earlier build (without the decision log's partitions)
 * is then never used, and the next `npm install` makes the current one.
 */
const MIGRATED_TEMPLATE_CONTENT = 'migrations+decision-partitions'

/**
 * The template with every migration applied, made by `npm install` (database/build-template.ts).
 * Keyed also by the migration names, so a checkout with a new migration never copies a schema
 * that lacks it: it falls back to the initdb template and migrates as usual.
 */
export function migratedTemplateDir(startParams: readonly string[], migrationNames: readonly string[]): string {
  const key = createHash('sha256').update(JSON.stringify([pgliteVersion(), startParams, INITDB_PARAMS, migrationNames, MIGRATED_TEMPLATE_CONTENT])).digest('hex').slice(0, 16)
  return join(CACHE_DIR, `pglite-migrated-${key}`)
}

/**
 * Fills an empty `dataDir` with a new database: a copy of the migrated template when the install
 * made one for these migrations (then nothing is left to migrate), else a copy of the initdb
 * template, made first if missing (in a worker thread). When the cache cannot be written (a
 * read-only install), initdb runs straight into `dataDir`.
 */
export async function createFromTemplate(dataDir: string, startParams: readonly string[], migrationNames: readonly string[] = []): Promise<void> {
  const migrated = migratedTemplateDir(startParams, migrationNames)
  if (existsSync(join(migrated, 'PG_VERSION'))) {
    cpSync(migrated, dataDir, { recursive: true })
    return
  }
  await copyInitdbTemplate(dataDir, startParams)
}

/** Copies (making it first if missing) the plain initdb template into `dataDir`. */
export async function copyInitdbTemplate(dataDir: string, startParams: readonly string[]): Promise<void> {
  const template = templateDir(startParams)
  if (!existsSync(join(template, 'PG_VERSION'))) {
    const partial = `${template}.${process.pid}.${randomBytes(4).toString('hex')}`
    try {
      mkdirSync(partial, { recursive: true })
    } catch {
      return runInitdbWorker(dataDir, startParams)
    }
    try {
      await runInitdbWorker(partial, startParams)
      // Rename when complete: a concurrent start never copies a half-made template.
      renameSync(partial, template)
    } catch (error) {
      rmSync(partial, { recursive: true, force: true })
      // Another process finished the same template first: use theirs.
      if (!existsSync(join(template, 'PG_VERSION'))) throw error
    }
  }
  cpSync(template, dataDir, { recursive: true })
}

function runInitdbWorker(dataDir: string, startParams: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(join(ROOT, 'database', 'pglite-initdb.worker.mjs'), {
      workerData: { dataDir, startParams: [...startParams], initDbStartParams: [...INITDB_PARAMS] },
    })
    let failure: Error | null = null
    worker.once('error', (error) => (failure = error))
    worker.once('exit', (code) => {
      if (failure) reject(failure)
      else if (code !== 0 || !existsSync(join(dataDir, 'PG_VERSION'))) reject(new Error(`initdb failed (worker exit code ${code})`))
      else resolve()
    })
  })
}

// What PostgreSQL keeps at the top of a data directory. Anything else (a lock file, an operator's
// own files) is never touched.
const POSTGRES_ENTRY = /^(PG_VERSION|base|global|pg_[a-z_]+|postgresql\.(auto\.)?conf|postmaster\.(pid|opts))$/

/**
 * Called before opening a data directory. Returns true when it holds no database yet. A directory
 * with our marker was being created when the process died: no request was ever served from it,
 * so its PostgreSQL files may be incomplete and hold no data; they are removed and the database
 * is created again, rather than opened half-written.
 */
export function prepareNewDataDir(dataDir: string): boolean {
  const marker = join(dataDir, INIT_MARKER)
  if (existsSync(marker)) {
    for (const name of readdirSync(dataDir)) {
      if (POSTGRES_ENTRY.test(name)) rmSync(join(dataDir, name), { recursive: true, force: true })
    }
  }
  if (existsSync(join(dataDir, 'PG_VERSION'))) return false
  writeFileSync(marker, '')
  return true
}

/** The first opening finished: the directory is a database from now on. */
export function finishNewDataDir(dataDir: string): void {
  rmSync(join(dataDir, INIT_MARKER), { force: true })
}
