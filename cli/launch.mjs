// The Node entry of `npm start` and `npm run steward`: runs the server from one bundled ES
// module instead of compiling some sixty TypeScript files through a loader on every start.
//
// Why: on Node, loading `server.ts` through tsx takes about a second (resolving and transforming
// each file); the same code bundled loads in about 0.1 s. Bun and Deno run the TypeScript as it
// is and do not use this file.
//
// How it stays correct: the bundle (`.build/server.mjs`, not committed) is rebuilt with esbuild
// whenever any of its input files changed (size or modification time, read from the metafile of
// the last build), when Node or esbuild changed, or when it is missing. A build is written under
// a temporary name and renamed into place, so parallel starts never load half a file. If esbuild
// is unavailable or a build fails, the server runs from source through tsx, as before, and says
// why on stderr. `STEWARD_FROM_SOURCE=1` skips the bundle.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import module, { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
// One folder below the root, like every source file: paths the sources compute from
// import.meta.url (`../console/`, `..` for the template cache) resolve the same in the bundle.
const BUILD_DIR = join(ROOT, '.build')
const BUNDLE = join(BUILD_DIR, 'server.mjs')
const META = join(BUILD_DIR, 'server.meta.json')
const ENTRY = join(ROOT, 'server.ts')
// Packages that must stay outside the bundle: PGlite loads its WebAssembly and data files from
// its own folder; pg has an optional native binding that bundlers cannot resolve.
// prom-client and the OpenTelemetry packages (optional dependencies) are imported only when
// metrics or tracing are on.
const EXTERNAL = ['@electric-sql/pglite', 'pg', 'pg-native', 'prom-client']
// Only the entry script may test whether it is the script being run: inside one bundle every
// module shares one import.meta, so another such test would fire too.
const ENTRY_GUARD = /isEntryPoint\(import\.meta\)|import\.meta\.url\)\s*===\s*process\.argv\[1\]/

function esbuildVersion() {
  try {
    return createRequire(import.meta.url)('esbuild/package.json').version
  } catch {
    return null
  }
}

/** True when the bundle on disk was built from exactly the files that are there now. */
export function bundleIsFresh(meta = readMeta()) {
  if (!meta || !existsSync(BUNDLE)) return false
  if (meta.node !== process.version || meta.esbuild !== esbuildVersion()) return false
  for (const [file, [size, mtimeMs]] of Object.entries(meta.inputs)) {
    try {
      const stat = statSync(join(ROOT, file))
      if (stat.size !== size || stat.mtimeMs !== mtimeMs) return false
    } catch {
      return false
    }
  }
  return true
}

function readMeta() {
  try {
    return JSON.parse(readFileSync(META, 'utf8'))
  } catch {
    return null
  }
}

/** Builds the bundle; throws when it cannot (the caller falls back to the sources). */
export async function buildBundle() {
  const esbuild = await import('esbuild')
  mkdirSync(BUILD_DIR, { recursive: true })
  const partial = `${BUNDLE}.${process.pid}.tmp`
  const result = await esbuild.build({
    entryPoints: [ENTRY],
    outfile: partial,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node.split('.')[0]}`,
    external: EXTERNAL,
    // Bundled CommonJS dependencies may call require(); give the ES module one.
    banner: { js: "import { createRequire as __stewardRequire } from 'node:module'; const require = __stewardRequire(import.meta.url);" },
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: ROOT,
  })
  const inputs = {}
  // npm rewrites node_modules/.package-lock.json on every install: it stands for the ~300 bundled
  // dependency files, so a start checks one file instead of each (about 10 ms of every start).
  // Another package manager: every file is checked.
  const installed = join(ROOT, 'node_modules', '.package-lock.json')
  const byInstall = existsSync(installed)
  if (byInstall) {
    const stat = statSync(installed)
    inputs['node_modules/.package-lock.json'] = [stat.size, stat.mtimeMs]
  }
  for (const file of Object.keys(result.metafile.inputs)) {
    if (byInstall && file.startsWith('node_modules/')) continue
    const stat = statSync(join(ROOT, file))
    inputs[file] = [stat.size, stat.mtimeMs]
    if (!file.startsWith('node_modules/') && file !== 'server.ts' && ENTRY_GUARD.test(readFileSync(join(ROOT, file), 'utf8'))) {
      rmSync(partial, { force: true })
      throw new Error(`${file} tests whether it is the script being run; only server.ts may, in a bundle`)
    }
  }
  // package-lock.json stands for every dependency's version.
  const lock = join(ROOT, 'package-lock.json')
  if (existsSync(lock)) {
    const stat = statSync(lock)
    inputs['package-lock.json'] = [stat.size, stat.mtimeMs]
  }
  renameSync(partial, BUNDLE)
  const metaPartial = `${META}.${process.pid}.tmp`
  writeFileSync(metaPartial, JSON.stringify({ node: process.version, esbuild: esbuildVersion(), inputs }))
  renameSync(metaPartial, META)
}

async function runFromSource(reason) {
  if (reason) process.stderr.write(`steward: running from source (${reason})\n`)
  const { register } = await import('tsx/esm/api')
  register()
  process.argv[1] = ENTRY
  await import(pathToFileURL(ENTRY).href)
}

async function main() {
  // `--prepare` (the postinstall script): build the bundle now, so the first start does not;
  // never fail an install over it.
  if (process.argv[2] === '--prepare') {
    try {
      if (!bundleIsFresh()) await buildBundle()
    } catch (error) {
      process.stderr.write(`steward: no bundle, starts will run from source (${error instanceof Error ? error.message : error})\n`)
    }
    return
  }
  if (process.env.STEWARD_FROM_SOURCE === '1') return runFromSource(null)
  if (!bundleIsFresh()) {
    try {
      await buildBundle()
    } catch (error) {
      return runFromSource(`no bundle: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`)
    }
  }
  // Node 22.1 and later keep the bundle's compiled code between starts, next to the bundle (not
  // in the shared temporary directory): a start then skips most of parsing and compiling it.
  // Node 20 has no such cache; a cache that cannot be written is skipped by Node itself.
  module.enableCompileCache?.(join(BUILD_DIR, 'compile-cache'))
  // The bundle's entry test compares import.meta.url with the script being run.
  process.argv[1] = BUNDLE
  await import(pathToFileURL(BUNDLE).href)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main()
