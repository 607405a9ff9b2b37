// What writing the audit event costs a change: policy create and key create, measured two ways
// against a baseline copy of the code in a temporary directory, run on the same database, same
// schema. Alternating rounds, a fresh organization per variant, creates interleaved one at a time,
// medians. Goal: audit adds at most 10 %.
// - storage: the storage functions the routes call (with their caps, so with the organization
//   lock): the change's statements alone, the strictest reading.
// - request: POST /policies and POST /keys through the in-process handler with an admin key, what
//   a change costs its caller (authentication, validation, the statements, the JSON answer).
//   Only with the `removed` baseline, whose copy holds the whole server.
//
//   node --import tsx bench/audit.ts [--ops 300] [--rounds 6] [--baseline removed|REV]
//   DATABASE_URL=postgres://… node --import tsx bench/audit.ts
//
// Baselines:
// - `removed` (the default): this checkout's storage code with the event write taken out (the copy's
//   storage/audit.ts returns before inserting any event; the change's own statements are the same).
//   This is the cost of writing the event and nothing else.
// - REV, a commit (`first` stands for the parent of the commit that added the policy events, found
//   with git log -S AuditBy): the code as it was then. This also counts everything else that
//   changed in those functions since (columns, checks), in either direction.
import { execFileSync } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseScriptArgs } from '../cli/command.ts'
import { silentLogger } from '../log.ts'
import { sql } from 'kysely'
import { createHandler, type Steward } from '../server.ts'
import { BY_OPERATOR } from '../storage/audit.ts'
import { openDatabase } from '../database/connect.ts'
import * as keys from '../storage/keys.ts'
import { migrateToLatest } from '../database/migrate.ts'
import { createOrganization } from '../storage/organizations.ts'
import * as policies from '../storage/policies.ts'
import { testConfig } from '../tests/support/helpers.ts'
import { median } from './lib.ts'

const ROOT = resolve(import.meta.dirname, '..')
const args = parseScriptArgs({ ops: { type: 'string' }, rounds: { type: 'string' }, baseline: { type: 'string' } })
const OPS = Number(args.ops ?? 300)
const ROUNDS = Math.max(2, Number(args.rounds ?? 6))
const url = process.env.DATABASE_URL ?? 'memory://'

function git(...argv: string[]): string {
  return execFileSync('git', argv, { cwd: ROOT, encoding: 'utf8' }).trim()
}

const baseline = args.baseline ?? 'removed'
// The first commit that passed an AuditBy to the policy storage functions; its parent wrote no event.
const rev = baseline === 'first' ? `${git('log', '--format=%H', '-S', 'AuditBy', '--reverse', '--', 'storage/policies.ts').split('\n')[0]}^` : baseline
// The copy holds the whole server (the request-level comparison needs it), not the tests, the
// benchmarks or what an install or a run leaves behind.
const LEFT_OUT = new Set(['node_modules', 'tests', 'bench', 'ci', 'data'])
const baseDir = mkdtempSync(join(tmpdir(), 'steward-bench-audit-base-'))
if (baseline === 'removed') {
  for (const entry of readdirSync(ROOT)) if (!entry.startsWith('.') && !LEFT_OUT.has(entry)) cpSync(join(ROOT, entry), join(baseDir, entry), { recursive: true })
  // Every event goes through these two functions; the copy returns before writing any.
  const auditFile = join(baseDir, 'storage', 'audit.ts')
  const anchors = ['  if (events.length === 0) return\n', '  if (events.length === 0) return run(query.sql, query.parameters)\n']
  let text = readFileSync(auditFile, 'utf8')
  for (const anchor of anchors) {
    if (!text.includes(anchor)) throw new Error(`storage/audit.ts changed: cannot take the event write out at ${JSON.stringify(anchor)}`)
    text = text.replace(anchor, anchor.replace('events.length === 0', 'events.length >= 0'))
  }
  writeFileSync(auditFile, text)
} else {
  execFileSync('sh', ['-c', `git archive ${rev} | tar -x -C ${baseDir}`], { cwd: ROOT })
}
symlinkSync(join(ROOT, 'node_modules'), join(baseDir, 'node_modules'))
const basePolicies = await import(pathToFileURL(join(baseDir, 'storage/policies.ts')).href)
const baseKeys = await import(pathToFileURL(join(baseDir, 'storage/keys.ts')).href)

const handle = await openDatabase({ databaseUrl: url, dataDir: '', logger: silentLogger })
const CAP = { limit: 1_000_000, what: 'bench', setting: 'BENCH' }
const fields = (i: number) => ({
  name: `policy ${i}`,
  description: 'bench',
  effect: 'deny' as const,
  agents: ['*'],
  actions: [`svc${i}.*`],
  resources: ['*'],
  condition: null,
  approval: null,
  mode: 'enforce' as const,
  enabled: true,
})
const keyInput = (org: string, i: number) => ({ organizationId: org, name: `key ${i}`, role: 'admin' as const, createdByUserId: null, createdByKeyId: null, expiresAt: null })

type Variant = 'without audit' | 'with audit'
const VARIANTS: Variant[] = ['without audit', 'with audit']
type Op = 'policy create' | 'key create'
/** One create, in a variant's organization (with, for requests, that organization's admin key). */
type Create = (org: Organization, i: number) => Promise<unknown>
interface Organization {
  readonly id: string
  readonly adminKey: string
}
/** The baseline's key create. The old commit's functions took no AuditBy; the copy with the write taken out takes the same one. */
const baseCreateKey = (input: ReturnType<typeof keyInput>) =>
  baseline === 'removed' ? baseKeys.createApiKey(handle.db, input, new Date(), BY_OPERATOR, CAP) : baseKeys.createApiKey(handle.db, input, new Date(), CAP)
const STORAGE: Record<Op, Record<Variant, Create>> = {
  'policy create': {
    'without audit': (org, i) =>
      baseline === 'removed'
        ? basePolicies.createPolicy(handle.db, org.id, fields(i), 'operator', new Date(), BY_OPERATOR, CAP)
        : basePolicies.createPolicy(handle.db, org.id, fields(i), 'operator', new Date(), CAP),
    'with audit': (org, i) => policies.createPolicy(handle.db, org.id, fields(i), 'operator', new Date(), BY_OPERATOR, CAP),
  },
  'key create': {
    'without audit': (org, i) => baseCreateKey(keyInput(org.id, i)),
    'with audit': (org, i) => keys.createApiKey(handle.db, keyInput(org.id, i), new Date(), BY_OPERATOR, CAP),
  },
}

// Request level: this checkout's handler and the copy's, on the same database, same config. No
// sealing during the run (its interval an hour): the seal is measured by bench/audit-seal.ts.
const config = testConfig({
  DATABASE_URL: url,
  LOG_LEVEL: 'silent',
  API_RATE_LIMIT: '100000000/60',
  API_ORG_RATE_LIMIT: '100000000/60',
  MAX_KEYS_PER_ORG: '1000000',
  MAX_POLICIES_PER_ORG: '1000000',
  AUDIT_SEAL_INTERVAL_MS: '3600000',
})
const handlers: Record<Variant, Steward> | null =
  baseline === 'removed'
    ? {
        'without audit': (await import(pathToFileURL(join(baseDir, 'server.ts')).href)).createHandler(config, { db: handle.db, clock: Date.now, logger: silentLogger, listenUrl: null }),
        'with audit': createHandler(config, { db: handle.db, clock: Date.now, logger: silentLogger, listenUrl: null }),
      }
    : null
async function post(variant: Variant, org: Organization, path: string, json: unknown): Promise<void> {
  const request = new Request(`http://localhost${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(json),
  })
  const response = await handlers![variant].fetch(request, { remoteAddress: '127.0.0.1' })
  const text = await response.text()
  if (response.status !== 201) throw new Error(`${variant} POST ${path}: ${response.status} ${text}`)
}
/** The same request to each variant's handler. */
const toBoth = (path: string, body: (org: Organization, i: number) => unknown): Record<Variant, Create> => ({
  'without audit': (org, i) => post('without audit', org, path, body(org, i)),
  'with audit': (org, i) => post('with audit', org, path, body(org, i)),
})
const REQUEST: Record<Op, Record<Variant, Create>> = {
  'policy create': toBoth('/policies', (org, i) => ({ organization_id: org.id, name: `policy ${i}`, effect: 'deny', actions: [`svc${i + 100}.*`] })),
  'key create': toBoth('/keys', (_org, i) => ({ role: 'member', name: `key ${i}` })),
}

/** A fresh organization and its admin key, made without an audit event (the copy's function). */
async function freshOrganization(): Promise<Organization> {
  const id = (await createOrganization(handle.db, `audit bench ${crypto.randomUUID().slice(0, 8)}`, new Date())).id
  const { secret } = await baseCreateKey({ ...keyInput(id, -1), name: 'bench admin' })
  return { id, adminKey: secret }
}

/**
 * Both variants, interleaved one operation at a time (A B, then B A, …), each on its own fresh
 * organization: on a shared machine both see the same load. Returns each variant's per-operation
 * times in ms.
 */
async function measurePair(creates: Record<Variant, Create>, label: string): Promise<Record<Variant, number[]>> {
  const orgs = { 'without audit': await freshOrganization(), 'with audit': await freshOrganization() }
  const times: Record<Variant, number[]> = { 'without audit': [], 'with audit': [] }
  for (let i = -20; i < OPS; i++) {
    for (const variant of i % 2 ? VARIANTS : [...VARIANTS].reverse()) {
      const started = performance.now()
      await creates[variant](orgs[variant], i)
      if (i >= 0) times[variant].push(performance.now() - started) // the first 20: warm-up
    }
  }
  // The baseline must write no event and the measured code one per create, or the ratio means nothing.
  for (const variant of VARIANTS) {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from audit_events where organization_id = ${orgs[variant].id}`.execute(handle.db)
    const want = variant === 'with audit' ? OPS + 20 : 0
    if (rows[0]!.n !== want) throw new Error(`${label}, ${variant}: ${rows[0]!.n} audit events, expected ${want}`)
  }
  return times
}


/** The table rows of one level: per operation, ROUNDS pairs; cost = median of the rounds' ratios − 1. */
async function measureLevel(level: string, operations: Record<Op, Record<Variant, Create>>): Promise<string[]> {
  const lines: string[] = []
  for (const op of Object.keys(operations) as Op[]) {
    const medians: Record<Variant, number[]> = { 'without audit': [], 'with audit': [] }
    const ratios: number[] = []
    for (let round = 0; round < ROUNDS; round++) {
      const times = await measurePair(operations[op], `${level} ${op}`)
      const without = median(times['without audit'])
      const withAudit = median(times['with audit'])
      medians['without audit'].push(without)
      medians['with audit'].push(withAudit)
      ratios.push(withAudit / without)
    }
    const ratio = median(ratios)
    const cost = (ratio - 1) * 100
    const ms = (variant: Variant) => median(medians[variant])
    lines.push(`| ${op} | ${level} | ${ms('without audit').toFixed(3)} | ${ms('with audit').toFixed(3)} | ${ratio.toFixed(3)} | ${cost.toFixed(1)} % ${cost <= 10 ? '✓' : '✗'} |`)
  }
  return lines
}

try {
  await migrateToLatest(handle.db)
  for (const handler of Object.values(handlers ?? {})) handler.start()
  const lines = [
    `Baseline: ${baseline === 'removed' ? 'the same code with the event write taken out' : `the storage functions at ${git('rev-parse', '--short', rev)} (no audit event)`}, same database and schema. ${OPS} creates of each variant per round, interleaved one at a time, each variant on its own fresh organization; ${ROUNDS} rounds; per round the median time of one create; cost = median over rounds of (with ÷ without) − 1. Storage: the storage function the route calls; request: the route through the in-process handler, with an admin key.`,
    '',
    '| operation | measured at | without audit (median ms) | with audit (median ms) | with ÷ without | audit cost (goal ≤ 10 %) |',
    '|---|---|---:|---:|---:|---:|',
  ]
  lines.push(...(await measureLevel('storage', STORAGE)))
  if (handlers) lines.push(...(await measureLevel('request', REQUEST)))
  console.log(lines.join('\n'))
} finally {
  for (const handler of Object.values(handlers ?? {})) await handler.close()
  await handle.close()
  rmSync(baseDir, { recursive: true, force: true })
}
