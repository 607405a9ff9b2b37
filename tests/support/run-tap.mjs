// `npm test`: tap over tests/**/*.test.ts (after `pretest` prepared tap's plugin set).
// With TEST_DATABASE_URL set (the PostgreSQL run), the files below are left out: they never use
// that database (pure engine code, the command line on an embedded data directory, spawned
// servers on PGlite, configuration), so the PGlite run has already run them exactly as they would
// run here. Arguments are passed to tap unchanged, and naming files runs exactly those.
import { spawnSync } from 'node:child_process'

export const DATABASE_INDEPENDENT = [
  // Unit tests never open a database.
  'tests/unit/*.test.ts',
  'tests/bench/bench-*.test.ts',
  // The MCP gateway scenario runs on PGlite only (--databases pglite).
  'tests/bench/mcp-bench.test.ts',
  'tests/http/health.test.ts',
  'tests/process/launch.test.ts',
  'tests/storage/pglite-array-types.test.ts',
  'tests/storage/pglite-template.test.ts',
  'tests/cli/policy-cli.test.ts',
  'tests/process/process.test.ts',
  'tests/process/tls.test.ts',
  'tests/cli/approvals-cli.test.ts',
  'tests/cli/governance-cli.test.ts',
  'tests/cli/product-cli.test.ts',
  // Their PostgreSQL cases are in process-lock-postgres and process-start-postgres.
  'tests/process/process-lock.test.ts',
  'tests/process/process-start.test.ts',
]

const args = process.argv.slice(2)
const namesFiles = args.some((arg) => arg.endsWith('.ts'))
const exclude = process.env.TEST_DATABASE_URL && !namesFiles ? DATABASE_INDEPENDENT.flatMap((glob) => ['--exclude', glob]) : []
if (exclude.length > 0) console.log(`# PostgreSQL run: ${DATABASE_INDEPENDENT.length} database-independent file patterns ran on the PGlite run and are left out here`)
const result = spawnSync('tap', [...exclude, ...args], { stdio: 'inherit' })
if (result.error) {
  console.error(`cannot run tap: ${result.error.message}`)
  process.exit(1)
}
process.exit(result.status ?? 1)
