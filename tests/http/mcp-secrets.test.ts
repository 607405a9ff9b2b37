// Secrets at rest for the MCP gateway: the box (auth/secret-box.ts), where its key comes from
// (services/secrets.ts, config.ts), and the upstream lookups the gateway uses
// (services/mcp-servers.ts): headers opened, disabled servers absent, changes seen at once, in
// this process and, on PostgreSQL, in another.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createSecretBox, newSecretsKey, parseSecretsKey, SecretBoxError } from '../../auth/secret-box.ts'
import { ConfigError, loadConfig } from '../../config.ts'
import { silentLogger } from '../../log.ts'
import { createMcpServerService, type McpServerService } from '../../services/mcp-servers.ts'
import { createSecrets, KEY_FILE, NO_SECRETS_KEY, secretsSource } from '../../services/secrets.ts'
import { BY_OPERATOR } from '../../storage/audit.ts'
import { DATABASE_KIND, openTestDatabase, testConfig, TEST_DATABASE_URL } from '../support/helpers.ts'
import { jsonOf, productApp } from '../support/product-support.ts'
import { seedWorld } from '../../fixtures/seed.ts'

const KEY = newSecretsKey()
const WRITER = { by: BY_OPERATOR, createdBy: 'operator' }
const NOW = new Date('2026-11-22T12:00:00Z')

t.test('the box: seal and open, bound to a context, refusing anything altered', async (t) => {
  const box = createSecretBox(parseSecretsKey(KEY)!)
  const sealed = box.seal('{"authorization":"Bearer x"}', 'ctx-1')
  t.match(sealed, /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/)
  t.not(box.seal('{"authorization":"Bearer x"}', 'ctx-1'), sealed, 'a fresh nonce each time')
  t.equal(box.open(sealed, 'ctx-1'), '{"authorization":"Bearer x"}')
  t.throws(() => box.open(sealed, 'ctx-2'), SecretBoxError, 'another context')
  t.throws(() => createSecretBox(parseSecretsKey(newSecretsKey())!).open(sealed, 'ctx-1'), SecretBoxError, 'another key')
  const [v, iv, body] = sealed.split('.') as [string, string, string]
  const flipped = `${body.slice(0, 5)}${body[5] === 'A' ? 'B' : 'A'}${body.slice(6)}`
  for (const bad of [`${v}.${iv}.${flipped}`, `v2.${iv}.${body}`, `${v}.${iv}`, `${v}.${iv}.${body}.x`, `${v}.AAAA.${body}`, 'plain text']) {
    t.throws(() => box.open(bad, 'ctx-1'), SecretBoxError, bad.slice(0, 20))
  }
  t.equal(box.derive('steward mcp request-state v1').length, 32)
  t.same(box.derive('a'), createSecretBox(parseSecretsKey(KEY)!).derive('a'), 'derived keys are stable for one key')
  t.notSame(box.derive('a'), box.derive('b'), 'and distinct per label')
  t.throws(() => box.derive('steward seal v1'), RangeError, 'the sealing key is not handed out')
  t.throws(() => createSecretBox(new Uint8Array(16)), RangeError)
})

t.test('SECRETS_KEY and the other MCP settings', async (t) => {
  t.equal(parseSecretsKey('short'), null)
  t.equal(parseSecretsKey(KEY)!.length, 32)
  const standard = parseSecretsKey(KEY)!.toString('base64')
  t.same(parseSecretsKey(standard), parseSecretsKey(KEY), 'standard base64 with padding, as openssl writes it')
  const defaults = loadConfig({})
  t.same(
    [defaults.mcpAllowPrivate, defaults.secretsKey, defaults.mcpUpstreamTimeoutMs, defaults.mcpApprovalHoldSeconds, defaults.maxMcpServersPerOrg, defaults.mcpAllowedOrigins],
    [false, null, 30_000, 50, 50, []],
  )
  const set = loadConfig({ MCP_ALLOW_PRIVATE: 'true', SECRETS_KEY: ` ${standard} `, MCP_UPSTREAM_TIMEOUT_MS: '500', MCP_APPROVAL_HOLD_SECONDS: '0', MAX_MCP_SERVERS_PER_ORG: '7', MCP_ALLOWED_ORIGINS: 'https://a.example.com, http://localhost:3000' })
  t.same(
    [set.mcpAllowPrivate, set.secretsKey, set.mcpUpstreamTimeoutMs, set.mcpApprovalHoldSeconds, set.maxMcpServersPerOrg, set.mcpAllowedOrigins],
    [true, standard, 500, 0, 7, ['https://a.example.com', 'http://localhost:3000']],
  )
  t.ok(Object.isFrozen(set.mcpAllowedOrigins))
  const wrong = `${KEY.slice(0, 20)}!${KEY.slice(21)}`
  t.throws(() => loadConfig({ SECRETS_KEY: wrong }), { name: 'ConfigError', message: 'SECRETS_KEY must be 32 random bytes in base64url (43 characters), e.g. from: openssl rand -base64 32' })
  t.throws(() => loadConfig({ SECRETS_KEY: KEY.slice(1) }), ConfigError)
  t.throws(() => loadConfig({ MCP_UPSTREAM_TIMEOUT_MS: '99' }), { message: 'MCP_UPSTREAM_TIMEOUT_MS must be between 100 and 600000, got 99' })
  t.throws(() => loadConfig({ MCP_APPROVAL_HOLD_SECONDS: '3601' }), ConfigError)
  t.throws(() => loadConfig({ MAX_MCP_SERVERS_PER_ORG: '0' }), ConfigError)
  t.throws(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'https://a.example.com/path' }), { message: 'MCP_ALLOWED_ORIGINS entries must be origins like https://example.com, got "https://a.example.com/path"' })
  t.throws(() => loadConfig({ MCP_ALLOWED_ORIGINS: '*' }), ConfigError, 'no wildcard: it would switch the check off')
})

t.test('where the key comes from', async (t) => {
  t.equal(secretsSource({ secretsKey: KEY, databaseUrl: 'postgres://u@h/db' }), 'env')
  t.equal(secretsSource({ secretsKey: null, databaseUrl: null }), 'file')
  t.equal(secretsSource({ secretsKey: null, databaseUrl: 'memory://' }), 'process')
  t.equal(secretsSource({ secretsKey: null, databaseUrl: 'postgres://u@h/db' }), 'missing')
  t.equal(createSecrets({ secretsKey: null, databaseUrl: 'postgresql://u@h/db', dataDir: '/nonexistent' }).box(), null)

  const dataDir = mkdtempSync(join(tmpdir(), 'steward-secrets-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const first = createSecrets({ secretsKey: null, databaseUrl: null, dataDir })
  const sealed = first.box()!.seal('v', 'c')
  const path = join(dataDir, KEY_FILE)
  t.equal(statSync(path).mode & 0o777, 0o600, 'the key file is the owner\'s only')
  t.ok(parseSecretsKey(readFileSync(path, 'utf8')), 'it holds a key')
  t.equal(createSecrets({ secretsKey: null, databaseUrl: null, dataDir }).box()!.open(sealed, 'c'), 'v', 'the next start reads the same key')
  t.equal(createSecrets({ secretsKey: null, databaseUrl: 'memory://', dataDir }).box()!.open(createSecrets({ secretsKey: null, databaseUrl: 'memory://', dataDir }).box()!.seal('p', 'c'), 'c'), 'p', 'one key per process in memory')
  t.equal(createSecrets({ secretsKey: KEY, databaseUrl: null, dataDir }).box()!.open(createSecretBox(parseSecretsKey(KEY)!).seal('e', 'c'), 'c'), 'e', 'SECRETS_KEY wins over the file')
  writeFileSync(path, 'not a key\n')
  t.throws(() => createSecrets({ secretsKey: null, databaseUrl: null, dataDir }).box(), { message: new RegExp(`^${path.replaceAll('/', '\\/')} does not hold a secrets key`) })
})

async function service(t: Parameters<typeof openTestDatabase>[0], env: Record<string, string> = {}, listenUrl: string | null = null) {
  const database = await openTestDatabase(t)
  const vars = await seedWorld(database.db, NOW.getTime())
  const config = testConfig({ MCP_ALLOW_PRIVATE: 'true', ...env })
  const servers = createMcpServerService({ db: database.db, logger: silentLogger, clock: () => NOW.getTime(), config, secrets: createSecrets(config), listenUrl })
  return { database, vars, config, servers }
}

const upstream = (name: string, headers: Record<string, string> = {}, enabled = true) => ({ name, url: `http://127.0.0.1:9/${name}`, headers, resource_argument: null, enabled })

t.test('the gateway\'s lookups: enabled servers of the organization, headers opened, changes seen at once', async (t) => {
  const { vars, servers, database } = await service(t)
  const org = vars.ORG_A!
  const changes: string[] = []
  servers.onChange((id) => changes.push(id))
  const billing = await servers.create(org, upstream('billing', { Authorization: 'Bearer b' }), WRITER, NOW)
  await servers.create(org, upstream('crm', {}, false), WRITER, NOW)
  await servers.create(org, { ...upstream('docs'), resource_argument: 'path' }, WRITER, NOW)
  t.same(changes, [org, org, org], 'each change is told')
  t.same(await servers.enabledUpstreams(org), [
    { serverId: billing.id, organizationId: org, name: 'billing', url: 'http://127.0.0.1:9/billing', headers: { authorization: 'Bearer b' }, resourceArgument: null },
    { serverId: (await servers.list(org, { after: null, limit: 10 }))[2]!.id, organizationId: org, name: 'docs', url: 'http://127.0.0.1:9/docs', headers: {}, resourceArgument: 'path' },
  ])
  t.equal(await servers.findUpstream(org, 'crm'), null, 'a disabled server is not there')
  t.equal(await servers.findUpstream(org, 'nope'), null)
  t.equal(await servers.findUpstream(vars.ORG_B!, 'billing'), null, "another organization's is not there")
  t.same(await servers.enabledUpstreams(vars.ORG_B!), [])

  await servers.update(org, billing.id, { enabled: false }, WRITER, NOW)
  t.equal(await servers.findUpstream(org, 'billing'), null, 'disabled: gone at once, though it was cached')
  await servers.update(org, billing.id, { enabled: true, url: 'http://127.0.0.1:9/moved', headers: { 'X-Extra': '1' } }, WRITER, NOW)
  t.match(await servers.findUpstream(org, 'billing'), { url: 'http://127.0.0.1:9/moved', headers: { authorization: 'Bearer b', 'x-extra': '1' } })
  await servers.remove(org, billing.id, WRITER, NOW)
  t.equal(await servers.findUpstream(org, 'billing'), null, 'deleted: gone at once')

  // Sealed headers are bound to their row: copied into another server's row they do not open.
  const a = await servers.create(org, upstream('one', { authorization: 'Bearer one' }), WRITER, NOW)
  const b = await servers.create(org, upstream('two', { authorization: 'Bearer two' }), WRITER, NOW)
  await database.db.updateTable('mcp_servers').set({ headers_sealed: a.headers_sealed }).where('id', '=', b.id).execute()
  await servers.update(org, a.id, { enabled: true }, WRITER, NOW)
  t.equal((await servers.findUpstream(org, 'two'))!.headers, null, 'an upstream whose headers do not open has headers null: it must not be called')
  t.same((await servers.findUpstream(org, 'one'))!.headers, { authorization: 'Bearer one' })
})

t.test('another SECRETS_KEY: the stored headers do not open, and can only be cleared', async (t) => {
  const first = await productApp(t, { env: { SECRETS_KEY: KEY } })
  const made = await first.call('POST', '/mcp/servers', { token: first.vars.ADMIN_KEY_A, json: { name: 'billing', url: 'https://1.1.1.1/mcp', headers: { authorization: 'Bearer b' } } })
  const id = (await jsonOf(made)).server_id
  const second = await productApp(t, { env: { SECRETS_KEY: newSecretsKey() }, database: first.database })
  const merge = await second.call('PATCH', `/mcp/servers/${id}`, { token: first.vars.ADMIN_KEY_A, json: { headers: { 'x-more': '1' } } })
  t.equal(merge.status, 409)
  t.same(await jsonOf(merge), { status: 'Conflict', error: 'The stored headers of this server do not open with the current SECRETS_KEY; send "headers": null to clear them, then set them again' })
  const clear = await second.call('PATCH', `/mcp/servers/${id}`, { token: first.vars.ADMIN_KEY_A, json: { headers: null } })
  t.equal(clear.status, 200)
  const reset = await second.call('PATCH', `/mcp/servers/${id}`, { token: first.vars.ADMIN_KEY_A, json: { headers: { authorization: 'Bearer new' } } })
  t.same((await jsonOf(reset)).header_names, ['authorization'])
})

t.test('PostgreSQL without SECRETS_KEY: servers without headers only', async (t) => {
  const app = await productApp(t, { env: { DATABASE_URL: 'postgres://steward@db.example.com/steward' } })
  const withHeaders = await app.call('POST', '/mcp/servers', { token: app.vars.ADMIN_KEY_A, json: { name: 'billing', url: 'https://1.1.1.1/mcp', headers: { authorization: 'Bearer b' } } })
  t.equal(withHeaders.status, 400)
  t.same(await jsonOf(withHeaders), { status: 'Bad Request', error: NO_SECRETS_KEY })
  const without = await app.call('POST', '/mcp/servers', { token: app.vars.ADMIN_KEY_A, json: { name: 'billing', url: 'https://1.1.1.1/mcp' } })
  t.equal(without.status, 201)
  const id = (await jsonOf(without)).server_id
  const patch = await app.call('PATCH', `/mcp/servers/${id}`, { token: app.vars.ADMIN_KEY_A, json: { headers: { authorization: 'Bearer b' } } })
  t.same(await jsonOf(patch), { status: 'Bad Request', error: NO_SECRETS_KEY })
})

t.test('on PostgreSQL a change made by one process reaches the others', { skip: DATABASE_KIND !== 'postgres' && 'PostgreSQL only (TEST_DATABASE_URL)' }, async (t) => {
  const { database, vars, config, servers: here } = await service(t, {}, TEST_DATABASE_URL)
  const there: McpServerService = createMcpServerService({ db: database.db, logger: silentLogger, clock: () => NOW.getTime(), config, secrets: createSecrets(config), listenUrl: TEST_DATABASE_URL })
  here.start()
  there.start()
  t.teardown(async () => {
    await here.close()
    await there.close()
  })
  const org = vars.ORG_A!
  const server = await here.create(org, upstream('billing'), WRITER, NOW)
  t.ok(await there.findUpstream(org, 'billing'), 'read (and cached once the feed is up)')
  // Let the other process's LISTEN come up, then cache the entry there.
  const heard = new Promise<string>((resolve) => there.onChange(resolve))
  await new Promise((resolve) => setTimeout(resolve, 300))
  await there.findUpstream(org, 'billing')
  await here.update(org, server.id, { enabled: false }, WRITER, NOW)
  t.equal(await Promise.race([heard, new Promise((resolve) => setTimeout(() => resolve('timeout'), 5000))]), org, 'the other process hears of the change')
  t.equal(await there.findUpstream(org, 'billing'), null, 'and no longer offers the server')
})
