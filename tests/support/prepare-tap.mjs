// tap builds its plugin set on first use, but that first run still loads the default plugins,
// including the TypeScript loader that crashes with TypeScript 7. So build once, before the
// first run after an install, and remember it (node_modules/.steward-tap-build).
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'

const pkg = JSON.parse(readFileSync('package.json', 'utf8'))
const tapVersion = JSON.parse(readFileSync('node_modules/tap/package.json', 'utf8')).version
const stamp = createHash('sha256').update(JSON.stringify([pkg.tap, tapVersion])).digest('hex')
const file = 'node_modules/.steward-tap-build'
if (!existsSync(file) || readFileSync(file, 'utf8') !== stamp) {
  execFileSync(process.execPath, ['node_modules/tap/dist/esm/run.mjs', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  writeFileSync(file, stamp)
}
