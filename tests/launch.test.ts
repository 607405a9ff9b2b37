// `npm start` runs cli/launch.mjs, which loads the server from one esbuild bundle (.build/) that
// it rebuilds whenever an input changed, and falls back to the TypeScript sources through tsx.
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, statSync, utimesSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
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
  t.ok(Array.isArray(meta.inputs['storage/connect.ts']), 'storage is bundled')
  t.ok(Array.isArray(meta.inputs['package-lock.json']), 'dependency versions count as an input')
  t.notOk(Object.keys(meta.inputs).some((file) => file.startsWith('node_modules/@electric-sql/pglite/')), 'PGlite stays outside the bundle')
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
  const { bundleIsFresh } = await import('../cli/launch.mjs')
  t.equal(bundleIsFresh(), false)
  t.equal(launch(['--help']).status, 0)
  t.equal(bundleIsFresh(), true, 'rebuilt on launch')
  t.ok(statSync(BUNDLE).mtimeMs > before)
})
