// Every product route of the OpenAPI document (not lead capture or health; discovery, the console
// and the MCP transport are other surfaces) has a method in both clients: the TypeScript client's
// ROUTE_TABLE and the Python client's route_table(), each `call` a function on a client made with
// a dummy key. A new route without a client method fails here.
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { ROUTE_TABLE, Steward } from '../../clients/typescript/src/index.ts'
import { clientOperations } from '../support/client-types.ts'

const operations = clientOperations()
const routeKey = (entry: { method: string; path: string }) => `${entry.method.toUpperCase()} ${entry.path}`

t.ok(operations.length > 50, `${operations.length} product routes`)
t.ok(operations.some((op) => routeKey(op) === 'POST /policies/apply'), 'policies as code is among them')
t.notOk(operations.some((op) => op.path === '/health' || op.path.startsWith('/leads/confirm')), 'health and lead capture are not')

function resolve(root: unknown, call: string): unknown {
  let value: any = root
  for (const part of call.split('.')) value = value?.[part]
  return value
}

function check(name: string, table: readonly { method: string; path: string; call: string; callable?: boolean }[], isFunction: (entry: { call: string; callable?: boolean }) => boolean) {
  t.test(`${name} client covers every product route`, async (t) => {
    const covered = new Map(table.map((entry) => [routeKey(entry), entry]))
    const missing = operations.filter((op) => !covered.has(routeKey(op))).map((op) => `${routeKey(op)} (${op.operationId})`)
    t.same(missing, [], 'routes without a method')
    const notCallable = table.filter((entry) => !isFunction(entry)).map((entry) => `${routeKey(entry)} → ${entry.call}`)
    t.same(notCallable, [], 'calls that are not functions')
    const known = new Set(operations.map(routeKey))
    const stale = table.filter((entry) => !known.has(routeKey(entry))).map(routeKey)
    t.same(stale, [], 'entries naming no route')
  })
}

const steward = new Steward({ apiKey: 'x', baseUrl: 'http://127.0.0.1:1' })
check('TypeScript', ROUTE_TABLE, (entry) => typeof resolve(steward, entry.call) === 'function')

const PYTHON = `
import json
from steward_client._routes import route_table
from steward_client import Steward
client = Steward(api_key="x", base_url="http://127.0.0.1:1")
out = []
for entry in route_table():
    target = client
    try:
        for part in entry["call"].split("."):
            target = getattr(target, part)
        ok = callable(target)
    except AttributeError:
        ok = False
    out.append(dict(entry, callable=ok))
print(json.dumps(out))
`
const python = spawnSync('python3', ['-c', PYTHON], { env: { ...process.env, PYTHONPATH: 'clients/python' }, encoding: 'utf8' })
t.equal(python.status, 0, `python3 ran: ${python.stderr.slice(-500)}`)
const table = python.status === 0 ? (JSON.parse(python.stdout) as { method: string; path: string; call: string; callable: boolean }[]) : []
check('Python', table, (entry) => entry.callable === true)
