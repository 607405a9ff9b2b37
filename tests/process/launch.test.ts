// `npm start` runs cli/launch.mjs, which loads the server from one esbuild bundle (.build/) that
// it rebuilds whenever an input changed, and falls back to the TypeScript sources through tsx.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { freePort } from '../../bench/lib.ts'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const META = join(ROOT, '.build', 'server.meta.json')
const BUNDLE = join(ROOT, '.build', 'server.mjs')

function launch(args: string[], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, ['cli/launch.mjs', ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 })
}

t.test('the bundle answers like the sources', async (t) => {
  const bundled = launch(['--help'])
  const source = launch(['--help'], { STEWARD_FROM_SOURCE: '1' })
  t.equal(bundled.status, 0, bundled.stderr)
  t.equal(source.status, 0, source.stderr)
  t.equal(bundled.stdout, source.stdout)
  t.match(bundled.stdout, /^usage: /)
  t.equal(bundled.stderr, '', 'no fallback notice: the bundle was used')
  t.ok(existsSync(BUNDLE))
  const meta = JSON.parse(readFileSync(META, 'utf8'))
  t.equal(meta.node, process.version)
  t.ok(Array.isArray(meta.inputs['server.ts']), 'server.ts is an input')
  t.ok(Array.isArray(meta.inputs['database/connect.ts']), 'storage is bundled')
  t.ok(Array.isArray(meta.inputs['package-lock.json']), 'dependency versions count as an input')
  t.notOk(Object.keys(meta.inputs).some((file) => file.startsWith('node_modules/@electric-sql/pglite/')), 'PGlite stays outside the bundle')
  t.ok(Array.isArray(meta.inputs['node_modules/.package-lock.json']), 'an npm install counts as an input')
  t.notOk(
    Object.keys(meta.inputs).some((file) => file.startsWith('node_modules/') && file !== 'node_modules/.package-lock.json'),
    'the bundled dependency files stand behind the install record',
  )
})

t.test('a changed input makes the next launch rebuild; an unchanged one does not', async (t) => {
  t.equal(launch(['--prepare']).status, 0)
  const before = statSync(BUNDLE).mtimeMs
  t.equal(launch(['--help']).status, 0)
  t.equal(statSync(BUNDLE).mtimeMs, before, 'fresh: not rebuilt')
  // Touch an input (same content, new modification time): the bundle is stale.
  const input = join(ROOT, 'config.ts')
  const stat = statSync(input)
  utimesSync(input, stat.atime, new Date(stat.mtimeMs + 1000))
  t.teardown(() => utimesSync(input, stat.atime, stat.mtime))
  const { bundleIsFresh } = await import('../../cli/launch.mjs')
  t.equal(bundleIsFresh(), false)
  t.equal(launch(['--help']).status, 0)
  t.equal(bundleIsFresh(), true, 'rebuilt on launch')
  t.ok(statSync(BUNDLE).mtimeMs > before)

  // An install (npm rewrites node_modules/.package-lock.json) makes it stale too.
  const installed = join(ROOT, 'node_modules', '.package-lock.json')
  const installedStat = statSync(installed)
  utimesSync(installed, installedStat.atime, new Date(installedStat.mtimeMs + 1000))
  t.teardown(() => utimesSync(installed, installedStat.atime, installedStat.mtime))
  t.equal(bundleIsFresh(), false, 'stale after an install')
})

t.test('the bundled server serves files it finds relative to its sources (the console) and health', async (t) => {
  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'steward-launch-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const child = spawn(process.execPath, ['cli/launch.mjs', 'start'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: '', DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  t.teardown(() => child.kill('SIGKILL'))
  let health: Response | null = null
  for (let i = 0; i < 600 && !health; i++) {
    health = await fetch(`http://127.0.0.1:${port}/health`).catch(() => null)
    if (!health) await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(health?.status, 200, stderr)
  const page = await fetch(`http://127.0.0.1:${port}/console/`)
  t.equal(page.status, 200)
  t.match(page.headers.get('content-type'), /^text\/html/)
  t.match(await page.text(), /<html/)
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM exits 0')
  t.equal(stderr, '', 'the bundle ran (no fallback notice, no error)')
})
