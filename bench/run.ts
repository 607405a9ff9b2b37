// `npm run bench`: the measurements that tell a user what Steward costs, on this machine, in one
// run, written to bench/RESULTS.md. Each section runs as its own script, one after the other, so
// no server of one section is up during another:
//   pipeline   bench/pipeline.ts       404, 400, 401 and /health vs Fastify and a bare fetch function
//   decisions  bench/decision-pair.ts  POST /decisions vs a new lead's POST /demo-request, PGlite and PostgreSQL
//   mcp        bench/mcp-gateway.ts    an MCP tools/call through the gateway vs POST /decisions and vs the upstream alone
//   budgets    bench/budgets.ts        POST /decisions with a count and a spend limit vs without, contended and spread
//   observability bench/observability.ts, observability-http.ts  POST /decisions with metrics and tracing on vs off, in-process and over HTTP
//   engine     bench/engine.ts         one decision over 1,000 policies vs cedar-wasm
//   replay     bench/replay.ts         100,000 logged decisions replayed, PGlite and PostgreSQL
//   audit      bench/audit.ts          what the audit event costs a policy or key create
//   approvals  bench/approvals.ts      approval wake-up latency, held waiters
//   startup    bench/startup.ts        time to the first /health 200 and memory
//   reports    bench/reports.ts        the decisions-over-time report on 1,000,000 logged decisions, PostgreSQL
// BENCH_ONLY=pipeline,decisions (any of the names) runs those alone and prints them; they are
// written only to BENCH_OUT (a file name under bench/) if set, never to RESULTS.md.
// BENCH_SECONDS and BENCH_ROUNDS shorten or lengthen the throughput windows of the first three.
// PostgreSQL: BENCH_DATABASE_URL, else TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test.
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import os from 'node:os'
import { createScratchDatabase, findPostgres, ROOT, tsx } from './lib.ts'
import { measureStartup, startupMarkdown } from './startup.ts'

const SECTIONS = ['pipeline', 'decisions', 'mcp', 'budgets', 'observability', 'engine', 'replay', 'audit', 'approvals', 'reports', 'startup'] as const
type Section = (typeof SECTIONS)[number]
const only = process.env.BENCH_ONLY?.split(',').filter(Boolean) ?? null
for (const name of only ?? []) {
  if (!(SECTIONS as readonly string[]).includes(name)) {
    console.error(`BENCH_ONLY: unknown section '${name}' (${SECTIONS.join(', ')})`)
    process.exit(2)
  }
}
const wanted = (section: Section) => only === null || only.includes(section)
const windows = [...(process.env.BENCH_SECONDS ? ['--seconds', process.env.BENCH_SECONDS] : []), ...(process.env.BENCH_ROUNDS ? ['--rounds', process.env.BENCH_ROUNDS] : [])]
const started = Date.now()
const log = (line: string) => console.error(`# ${line} (${((Date.now() - started) / 1000).toFixed(0)} s)`)
const adminUrl = await findPostgres()

/** A section script's Markdown, or what went wrong with it. */
async function script(title: string, file: string, args: readonly string[], env: Record<string, string>, timeoutMs: number): Promise<string> {
  log(`${title}: ${file} ${args.join(' ')}`)
  const result = await tsx(file, args, env, timeoutMs)
  if (result.code === 0) return result.output.trim()
  return `## ${title}\n\n${file} failed (exit ${result.code}):\n\n    ${result.output.trim().slice(-1500).split('\n').join('\n    ')}`
}

/** Runs `body` with a scratch database on the PostgreSQL found (its URL), or with '' when there is none. */
async function withScratch<T>(body: (url: string) => Promise<T>): Promise<T> {
  if (!adminUrl) return body('')
  const scratch = await createScratchDatabase(adminUrl, 'steward_bench')
  try {
    return await body(scratch.url)
  } finally {
    await scratch.drop().catch(() => {})
  }
}

/** The same script on in-memory PGlite and on a scratch PostgreSQL database, one subsection each. */
async function onBothDatabases(title: string, file: string, args: readonly string[], timeoutMs: number): Promise<string> {
  const parts = [`## ${title}`, '']
  for (const [name, url] of [['PGlite (in memory)', 'memory://'], ['PostgreSQL', null]] as const) {
    const body = async (databaseUrl: string) => (databaseUrl ? `### ${name}\n\n${await script(`${title}, ${name}`, file, args, { DATABASE_URL: databaseUrl }, timeoutMs)}\n` : `### ${name}\n\nNo PostgreSQL answered: not measured.\n`)
    parts.push(url ? await body(url) : await withScratch(body))
  }
  return parts.join('\n')
}

const postgres: Record<string, string> = adminUrl ? { BENCH_DATABASE_URL: adminUrl } : {}
const run: Record<Section, () => Promise<string>> = {
  pipeline: () => script('HTTP pipeline', 'bench/pipeline.ts', windows, postgres, 900_000),
  decisions: () => script('Decisions over HTTP', 'bench/decision-pair.ts', windows, postgres, 900_000),
  mcp: () => script('MCP gateway', 'bench/mcp-gateway.ts', windows, postgres, 900_000),
  budgets: () => onBothDatabases('Budgets: POST /decisions with one count and one spend limit ÷ the same without limits (bench/budgets.ts; goal ≥ 0.8)', 'bench/budgets.ts', windows, 900_000),
  observability: async () =>
    [
      await onBothDatabases('Observability: POST /decisions with metrics and tracing on ÷ both off, in-process handler (bench/observability.ts; goal ≥ 0.95)', 'bench/observability.ts', windows, 900_000),
      `## Observability over HTTP: two servers, on and off (bench/observability-http.ts; goal ≥ 0.95)\n\n${await script('Observability over HTTP', 'bench/observability-http.ts', windows, postgres, 900_000)}`,
    ].join('\n\n'),
  engine: () => script('Policy engine', 'bench/engine.ts', ['--evaluations', '50000', '--cedar', '1000', '--replay', '100000'], {}, 300_000),
  replay: () => onBothDatabases('Replay of 100,000 logged decisions through the database (bench/replay.ts; goal ≤ 5 s)', 'bench/replay.ts', ['--runs', '2'], 300_000),
  audit: () => onBothDatabases('Audit writing: policy and key create with and without the event (bench/audit.ts)', 'bench/audit.ts', [], 600_000),
  approvals: () => script('Approvals', 'bench/approvals.ts', [], { BENCH_QUIET: '1', TRIALS: process.env.TRIALS ?? '100', ...postgres }, 900_000),
  reports: () =>
    withScratch(async (url) => {
      const title = 'Reports: decisions over time on 1,000,000 logged decisions, PostgreSQL (bench/reports.ts; goal ≤ 200 ms)'
      if (!url) return `## ${title}\n\nNo PostgreSQL answered: not measured.`
      const out = await script(title, 'bench/reports.ts', [], { DATABASE_URL: url }, 900_000)
      return out.startsWith('## ') ? out : `## ${title}\n\n${out}`
    }),
  startup: async () => {
    log('startup: bench/startup.ts')
    // Two starts per row, not three: the section is the longest of the run.
    return startupMarkdown(await measureStartup({ adminUrl, repeat: 2, log: (line) => console.error(`# ${line}`) }), 2).join('\n').trim()
  },
}

const sections: string[] = []
for (const section of SECTIONS) if (wanted(section)) sections.push(await run[section]())
const seconds = Math.round((Date.now() - started) / 1000)

let commit = 'unknown'
try {
  commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim()
  if (execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim()) commit += ' with uncommitted changes'
} catch {
  // Not a git checkout (an unpacked archive): the commit stays unknown.
}
// The goal rows of the HTTP sections (three cells: goal, target, verdict), gathered at the top.
const goals = sections.flatMap((text) => text.split('\n')).filter((line) => /^\|[^|]+\|[^|]+\| \*\*[^|]+ (✓|✗)[^|]*\|$/.test(line))
const header = [
  only ? `# Benchmark results: ${only.join(', ')} only` : '# Benchmark results',
  '',
  `\`npm run bench\` (bench/run.ts) at commit ${commit}, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, in ${Math.floor(seconds / 60)} min ${seconds % 60} s. ` +
    `${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}), ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average at the end ${os.loadavg().map((n) => n.toFixed(1)).join(' ')}; ` +
    `PostgreSQL ${adminUrl ? 'local, over loopback' : 'not reachable (PGlite only)'}.`,
  '',
  '## How to read these numbers',
  '',
  '- Ratios are the results: each compares two things measured in the same run, in alternating rounds, on the same two cores. Absolute figures are this machine\'s, and on a shared machine they move by a fifth or more from run to run.',
  '- Throughput is capped by whichever runs out of its share of the two cores first, the server or the load generator; CPU time per request is what a request cost the server, whatever else ran.',
  '- Latency figures are medians at a modest fixed rate. A 99th percentile on two shared cores measures the machine\'s stalls more than the server: two identical servers read up to twice each other\'s.',
  '- POST /decisions ÷ POST /demo-request depends on how many requests are in flight: concurrent decisions share one commit (group commit), a lead commits alone. At ten connections each a decision costs the server about what a new lead costs; at two it costs more (the few-connections row). A figure from another instrument compares with these only at the same connection count on both routes, with requests that differ from one another as users\' do: one decision body sent over and over is cheaper for the server, and for a load generator sharing the two cores.',
  '- Earlier runs, and what each change measured, are in the history of this file (git log -p bench/RESULTS.md).',
  '',
  '## Goals',
  '',
  '| goal | target | reached |',
  '|---|---|---|',
  ...goals,
  '',
  'The engine, replay, audit, approvals and start-up sections state their own goals beside their figures.',
  '',
]
const text = [...header, ...sections.flatMap((s) => [s, ''])].join('\n')
if (only === null) writeFileSync(resolve(ROOT, 'bench', 'RESULTS.md'), text)
else if (process.env.BENCH_OUT) writeFileSync(resolve(ROOT, 'bench', process.env.BENCH_OUT), text)
console.log(text)
