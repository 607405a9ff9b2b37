import { spawn } from 'node:child_process'
import autocannon from 'autocannon'
import { createScratchDatabase, ROOT } from './lib.ts'
// Profiles Steward on Node under load: node --import tsx bench/profile.ts bad400|badkey|health|notfound|dup [cpu-prof-dir]
const [route] = process.argv.slice(2)
const scratch = await createScratchDatabase(process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test', 'steward_prof')
const port = 18000 + Math.floor(Math.random() * 1000)
const child = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${process.argv[3] ?? '/tmp/steward-prof'}`, '--import', 'tsx', 'server.ts', 'start'], {
  cwd: ROOT, stdio: 'inherit',
  env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATABASE_URL: scratch.url, LOG_LEVEL: 'warn', LEAD_RATE_LIMIT: '100000000/60', API_RATE_LIMIT: '100000000/60' },
})
for (let i = 0; i < 300; i++) { try { await fetch(`http://127.0.0.1:${port}/`); break } catch { await new Promise((r) => setTimeout(r, 100)) } }
const specs: Record<string, any> = {
  bad400: { method: 'POST', path: '/demo-request', headers: { 'content-type': 'application/json' }, body: '{"email":"x"}' },
  badkey: { method: 'GET', path: '/policies?organization_id=00000000-0000-0000-0000-000000000000', headers: { authorization: 'Bearer stw_key_notavalidkeyatall' } },
  health: { method: 'GET', path: '/health' },
  notfound: { method: 'GET', path: '/nope' },
  dup: { method: 'POST', path: '/demo-request', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ first_name: 'A', last_name: 'B', email: 'prof-dup@example.com', company: 'C', linkedin: 'x' }) },
}
const r = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 10, duration: 5, requests: [specs[route ?? "bad400"]] })
console.log(route, Math.round(r.requests.average), 'req/s', JSON.stringify(r.statusCodeStats))
child.kill('SIGTERM')
await new Promise((r) => child.once('exit', r))
await scratch.drop()
