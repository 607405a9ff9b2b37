// `npm run lint`: oxlint over the whole repository (rules in .oxlintrc.json: correctness and
// import cycles), warnings are errors.
//
// oxlint ships a native binary per platform as optional dependencies, and the registry these
// machines use lacks the non-Linux ones, so a lock file listing it cannot be installed with
// `npm ci`. It is therefore not a devDependency: this script installs the pinned version into
// .runtimes/ (not committed; the same place Bun and Deno go) on first use, then runs it.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const OXLINT = 'oxlint@1.94.0'
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const PREFIX = join(ROOT, '.runtimes')
const BIN = join(PREFIX, 'node_modules', '.bin', 'oxlint')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function installedVersion() {
  const run = spawnSync(BIN, ['--version'], { encoding: 'utf8' })
  return run.status === 0 ? run.stdout.trim().replace(/^Version:\s*/, '') : null
}

if (!existsSync(BIN) || !installedVersion()?.includes(OXLINT.split('@')[1])) {
  mkdirSync(PREFIX, { recursive: true })
  // Its own package.json: without one, npm would climb to this project's and install there.
  if (!existsSync(join(PREFIX, 'package.json'))) writeFileSync(join(PREFIX, 'package.json'), '{ "private": true }\n')
  const install = spawnSync(npm, ['install', '--prefix', PREFIX, '--no-audit', '--no-fund', '--loglevel=error', OXLINT], { cwd: PREFIX, stdio: 'inherit' })
  if (install.status !== 0 || !existsSync(BIN)) {
    console.error(`lint: could not install ${OXLINT} into .runtimes/`)
    process.exit(1)
  }
}
const run = spawnSync(BIN, ['--deny-warnings', ...process.argv.slice(2), '.'], { cwd: ROOT, stdio: 'inherit' })
process.exit(run.status ?? 1)
