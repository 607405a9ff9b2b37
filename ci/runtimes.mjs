// The runtime matrix for CI: every runtime (Node, Bun, Deno) × every database (embedded PGlite;
// PostgreSQL when TEST_DATABASE_URL is set) — seed, start the real server, replay every contract
// fixture against it over HTTP, stop it with SIGTERM and require exit code 0.
//
//   node --import tsx ci/runtimes.mjs [--runtimes node,bun,deno] [--databases pglite,postgres]
//   ci/runtimes.sh                            (the same, for .ci/run)
//
// One line per combination, then "N passed, N failed"; exit 1 on any failure. Plain JavaScript
// run through tsx, which loads the TypeScript it imports: ci/ sits beside the product's floors,
// not among them.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseScriptArgs } from '../cli/command.ts'
import { createScratchDatabase, hasSeed, reachable, run, runtimeCommand, RUNTIMES, startServer, tsx } from '../bench/lib.ts'

// Strict: a mistyped option fails instead of silently running the whole matrix.
const values = parseScriptArgs({ runtimes: { type: 'string' }, databases: { type: 'string' } })
/** @type {import('../bench/lib.ts').Runtime[]} */
const runtimes = values.runtimes?.split(',') ?? RUNTIMES
const pgUrl = process.env.TEST_DATABASE_URL || ''
const wanted = values.databases?.split(',') ?? ['pglite', 'postgres']
/** @type {Array<'pglite' | 'postgres'>} */
const databases = []
if (wanted.includes('pglite')) databases.push('pglite')
if (wanted.includes('postgres')) {
  if (!pgUrl) console.log('# PostgreSQL skipped: TEST_DATABASE_URL is not set')
  else if (!(await reachable(pgUrl))) {
    console.log(`not ok - postgres: TEST_DATABASE_URL is set but unreachable`)
    process.exitCode = 1
  } else databases.push('postgres')
}

const LIMITS = { LEAD_RATE_LIMIT: '1000000/60', API_RATE_LIMIT: '1000000/60', LOGIN_RATE_LIMIT: '1000000/60' }
let passed = 0
let failed = 0

/**
 * One runtime on one database: seed, start, replay the fixtures, SIGTERM.
 * @param {import('../bench/lib.ts').Runtime} runtime
 * @param {'pglite' | 'postgres'} database
 * @returns {Promise<string | null>} what went wrong, or null
 */
async function combination(runtime, database) {
  const work = mkdtempSync(join(tmpdir(), `steward-rt-${runtime}-`))
  const scratch = database === 'postgres' ? await createScratchDatabase(pgUrl) : null
  const env = scratch
    ? { DATABASE_URL: scratch.url, DATA_DIR: join(work, 'data') }
    : { DATABASE_URL: '', DATA_DIR: join(work, 'data') }
  const started = Date.now()
  /** @type {Awaited<ReturnType<typeof startServer>> | null} */
  let server = null
  try {
    const replayArgs = []
    if (hasSeed()) {
      // PGlite allows one process per data dir: seed (which migrates) before the server opens it.
      const vars = join(work, 'vars.json')
      const seeded = await tsx('fixtures/seed.ts', ['--out', vars], env)
      if (seeded.code !== 0) return `seed failed: ${seeded.output.slice(-500)}`
      replayArgs.push('--vars', vars)
    }
    server = await startServer(runtime, { ...env, ...LIMITS })
    const replay = await tsx('fixtures/replay.ts', ['--url', server.url, ...replayArgs], {}, 180_000)
    const summary = /(\d+) passed, (\d+) failed/.exec(replay.output)
    // The TypeScript client, on this same runtime, against this server (clients/typescript).
    const client = replayArgs.length > 0 ? await clientFixture(runtime, server.url, replayArgs[1]) : null
    const stopped = await server.stop()
    const ms = Date.now() - started
    const problems = []
    if (replay.code !== 0 || !summary) {
      const lines = replay.output.trim().split('\n')
      const failures = lines.filter((l) => l.startsWith('not ok')).slice(0, 3).map((l) => l.slice(0, 220))
      problems.push(`replay ${lines.at(-1)}: ${failures.join(' | ')}`)
    }
    if (client && (client.code !== 0 || !client.output.includes('client fixture ok'))) problems.push(`TypeScript client: ${client.output.trim().slice(-400)}`)
    if (stopped.code !== 0) problems.push(`SIGTERM exit: code ${stopped.code}, signal ${stopped.signal} after ${stopped.ms} ms\n${server.output().slice(-800)}`)
    if (problems.length > 0) return problems.join('; ')
    console.log(`ok - ${runtime} + ${database}: fixtures ${summary?.[1]} passed, ${summary?.[2]} failed; ${client ? 'TypeScript client ok; ' : ''}SIGTERM exit 0 in ${stopped.ms} ms; ${(ms / 1000).toFixed(1)} s`)
    return null
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  } finally {
    if (server) await server.stop(3000).catch(() => {})
    await scratch?.drop().catch((e) => console.log(`# could not drop ${scratch.name}: ${e.message}`))
    rmSync(work, { recursive: true, force: true })
  }
}

/**
 * clients/typescript/test/runtime-fixture.ts on `runtime` with the seeded Manager key.
 * @param {import('../bench/lib.ts').Runtime} runtime
 * @param {string} url
 * @param {string} varsFile
 */
async function clientFixture(runtime, url, varsFile) {
  const vars = JSON.parse(readFileSync(varsFile, 'utf8'))
  const [cmd, args] = runtimeCommand(runtime, 'clients/typescript/test/runtime-fixture.ts')
  return run(cmd, args, { STEWARD_BASE_URL: url, STEWARD_API_KEY: vars.MANAGER_KEY_A }, 60_000)
}

for (const database of databases) {
  for (const runtime of runtimes) {
    const problem = await combination(runtime, database)
    if (problem === null) passed++
    else {
      failed++
      console.log(`not ok - ${runtime} + ${database}: ${problem}`)
    }
  }
}
if (!hasSeed()) console.log('# fixtures/seed.ts not present yet: replayed without seeded organizations and keys')
console.log(`${passed} passed, ${failed} failed`)
if (failed > 0) process.exitCode = 1
