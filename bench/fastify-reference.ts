// Benchmark peer, not part of the product: the endpoints the benchmark drives, written the way a
// Node user would with Fastify + pg — same pool settings, same SQL, same validation rules, same
// key format check (no database work for a malformed key), key looked up per request. Every
// answer (routes, 404, errors) carries the headers Steward sends (security, CORS, a fresh request
// id; Cache-Control: no-store on /health and /policies), and a 400 for a body that is not JSON
// keeps the connection open as Steward's does.
//   DATABASE_URL=postgres://… PORT=0 node --import tsx bench/fastify-reference.ts
import Fastify, { type FastifyError, type FastifyReply } from 'fastify'
import { createPostgresPool } from '../database/connect.ts'
import { silentLogger } from '../log.ts'
import { isValidEmail, MAX_EMAIL_LENGTH } from '../domain/email.ts'
import { BEARER } from '../services/credentials.ts'
import { FIELD_LIMITS } from '../routes/leads.ts'
import { hashSecret, secretKind } from '../auth/secrets.ts'

const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL (postgres://…) is required')
const pool = await createPostgresPool(url, silentLogger, 10)
const BODY_LIMIT = 16 * 1024
const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT })

const EXPOSED = 'Retry-After, Deprecation, Sunset, Link, Location, RateLimit, RateLimit-Policy, X-Request-Id'
const CSP = "default-src 'none'; frame-ancestors 'none'"
// Steward's product surface (here /health and /policies) answers no-store on every status.
const NO_STORE = new Set(['/health', '/policies'])
app.addHook('onSend', (request, reply, payload, done) => {
  if (NO_STORE.has(request.routeOptions.url ?? '')) reply.header('cache-control', 'no-store')
  reply.header('x-content-type-options', 'nosniff')
  reply.header('content-security-policy', CSP)
  reply.header('x-request-id', crypto.randomUUID())
  reply.header('access-control-allow-origin', '*')
  reply.header('access-control-expose-headers', EXPOSED)
  done(null, payload)
})

app.setNotFoundHandler((request, reply) => {
  const query = request.url.indexOf('?')
  return reply.code(404).send({ error: `No resource at ${query < 0 ? request.url : request.url.slice(0, query)}` })
})

/**
 * Fastify marks the connection to be closed when its body parser fails, in case the client is
 * still sending. Its JSON parser has read the whole body by then, so only a body over the limit
 * (left unread) needs that; otherwise keep the connection open, as Steward does. (Overwritten,
 * not removed: removing it on the Node response would also drop the Connection header Node adds.)
 */
function bodyError(error: FastifyError, reply: FastifyReply): FastifyReply | null {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send({ error: `Request body is larger than ${BODY_LIMIT} bytes` })
  if (reply.getHeader('connection') === 'close') reply.header('connection', 'keep-alive')
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return reply.code(400).send({ error: 'Request body is empty; send a JSON object' })
  if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return reply.code(400).send({ error: 'Request body is not valid JSON' })
  return null
}

app.setErrorHandler((error: FastifyError, _request, reply) => {
  const status = error.statusCode ?? 500
  return bodyError(error, reply) ?? (status >= 500 ? reply.code(500).send({ error: 'Internal server error' }) : reply.code(status).send({ error: error.message }))
})

app.get('/health', async (_request, reply) => {
  try {
    await pool.query('select 1')
    return { status: 'ok', database: 'ok', time: new Date().toISOString() }
  } catch {
    return reply.code(503).header('Retry-After', '5').send({ status: 'Service Unavailable', error: 'Database unavailable' })
  }
})

const text = (max: number) => ({ type: 'string', maxLength: max })
app.post(
  '/demo-request',
  {
    schema: {
      body: {
        type: 'object',
        required: ['first_name', 'last_name', 'email', 'company', 'linkedin'],
        properties: {
          first_name: text(FIELD_LIMITS.first_name),
          last_name: text(FIELD_LIMITS.last_name),
          email: text(MAX_EMAIL_LENGTH),
          company: text(FIELD_LIMITS.company),
          linkedin: text(FIELD_LIMITS.linkedin),
          phone: text(FIELD_LIMITS.phone),
          source: text(FIELD_LIMITS.source),
          analytics_distinct_id: text(FIELD_LIMITS.analytics_distinct_id),
        },
      },
    },
    errorHandler: (error: FastifyError, _request, reply) => bodyError(error, reply) ?? reply.code(400).send({ error: 'Missing required fields' }),
  },
  async (request, reply) => {
    const b = request.body as Record<string, string | undefined>
    const email = b.email!.trim()
    if (!isValidEmail(email)) return reply.code(400).send({ error: 'Invalid email' })
    const { rows } = await pool.query(
      `insert into demo_requests (email, email_normalized, first_name, last_name, company, linkedin, phone, source, analytics_distinct_id, received_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) on conflict (email_normalized) do nothing returning id`,
      [email, email.toLowerCase(), b.first_name!.trim(), b.last_name!.trim(), b.company!.trim(), b.linkedin!.trim(), b.phone || null, b.source || null, b.analytics_distinct_id || null, new Date()],
    )
    return rows.length > 0 ? reply.code(200).send({ message: 'OK' }) : reply.code(409).send({ message: 'Already registered' })
  },
)

// No WWW-Authenticate on a 401: Steward sends none (clients read its protected-resource metadata).
app.get('/policies', async (request, reply) => {
  const header = request.headers.authorization ?? ''
  const token = BEARER.exec(header)?.[1]
  if (!token || secretKind(token) !== 'key') return reply.code(401).send({ status: 'Unauthorized', error: 'Invalid or expired token' })
  const keys = await pool.query(
    'select id, organization_id, role from api_keys where secret_hash = $1 and revoked_at is null and (expires_at is null or expires_at > $2)',
    [hashSecret(token), new Date()],
  )
  const key = keys.rows[0]
  if (!key) return reply.code(401).send({ status: 'Unauthorized', error: 'Invalid or expired token' })
  const organizationId = (request.query as Record<string, string>).organization_id
  if (!organizationId) return reply.code(400).send({ status: 'Bad Request', error: 'organization_id is required' })
  if (organizationId !== key.organization_id) return reply.code(403).send({ status: 'Forbidden', error: 'Not your organization' })
  const { rows } = await pool.query('select * from policies where organization_id = $1 order by created_at, policy_id limit 51', [organizationId])
  const page = rows.slice(0, 50)
  return reply.send({
    policies: page.map((row) => ({ ...row, version: Number(row.version), created_at: new Date(row.created_at).toISOString(), updated_at: new Date(row.updated_at).toISOString() })),
    next_cursor: rows.length > 50 ? 'more' : null,
  })
})

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
console.log(JSON.stringify({ msg: 'listening', url: address.replace('localhost', '127.0.0.1') }))
process.once('SIGTERM', () => {
  void app.close().then(() => pool.end()).then(() => process.exit(0))
})
