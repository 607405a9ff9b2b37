// Benchmark peer, not part of the product: the endpoints the benchmark drives, written the way a
// Node user would with Fastify + pg — same pool settings, same SQL, same validation rules, same
// key format check (no database work for a malformed key), key looked up per request.
//   DATABASE_URL=postgres://… PORT=0 node --import tsx bench/fastify-reference.ts
import Fastify from 'fastify'
import { createPostgresPool } from '../storage/connect.ts'
import { silentLogger } from '../log.ts'
import { isValidEmail } from '../domain/email.ts'
import { FIELD_LIMITS } from '../routes/leads.ts'
import { hashSecret, secretKind } from '../storage/secrets.ts'

const url = process.env.DATABASE_URL
if (!url) throw new Error('DATABASE_URL (postgres://…) is required')
const pool = await createPostgresPool(url, silentLogger, 10)
const app = Fastify({ logger: false, bodyLimit: 16 * 1024 })

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
          email: text(254),
          company: text(FIELD_LIMITS.company),
          linkedin: text(FIELD_LIMITS.linkedin),
          phone: text(FIELD_LIMITS.phone),
          source: text(FIELD_LIMITS.source),
          analytics_distinct_id: text(FIELD_LIMITS.analytics_distinct_id),
        },
      },
    },
    errorHandler: (_error, _request, reply) => reply.code(400).send({ error: 'Missing required fields' }),
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

app.get('/policies', async (request, reply) => {
  const header = request.headers.authorization ?? ''
  const token = /^bearer +([^\s]+) *$/i.exec(header)?.[1]
  if (!token || secretKind(token) !== 'key') return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ status: 'Unauthorized', error: 'Invalid or expired token' })
  const keys = await pool.query(
    'select id, organization_id, role from api_keys where secret_hash = $1 and revoked_at is null and (expires_at is null or expires_at > $2)',
    [hashSecret(token), new Date()],
  )
  const key = keys.rows[0]
  if (!key) return reply.code(401).header('WWW-Authenticate', 'Bearer').send({ status: 'Unauthorized', error: 'Invalid or expired token' })
  const organizationId = (request.query as Record<string, string>).organization_id
  if (!organizationId) return reply.code(400).send({ status: 'Bad Request', error: 'organization_id is required' })
  if (organizationId !== key.organization_id) return reply.code(403).send({ status: 'Forbidden', error: 'Not your organization' })
  const { rows } = await pool.query('select * from policies where organization_id = $1 order by created_at, policy_id limit 51', [organizationId])
  const page = rows.slice(0, 50)
  return reply.header('Cache-Control', 'no-store').send({
    policies: page.map((row) => ({ ...row, version: Number(row.version), created_at: new Date(row.created_at).toISOString(), updated_at: new Date(row.updated_at).toISOString() })),
    next_cursor: rows.length > 50 ? 'more' : null,
  })
})

const address = await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
console.log(JSON.stringify({ msg: 'listening', url: address.replace('localhost', '127.0.0.1') }))
process.once('SIGTERM', () => {
  void app.close().then(() => pool.end()).then(() => process.exit(0))
})
