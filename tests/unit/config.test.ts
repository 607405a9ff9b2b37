// config.ts: parsed once, validated, frozen. Bad values stop the server at start-up with a
// ConfigError naming the variable, never at the first request.
import t from 'tap'
import { ConfigError, loadConfig } from '../../config.ts'

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 8080)
  t.equal(config.host, '0.0.0.0')
  t.equal(config.databaseUrl, null)
  t.equal(config.dataDir, './data')
  t.equal(config.baseUrl, 'http://localhost:8080')
  t.equal(config.productApiUrl, 'http://localhost:8080')
  t.equal(config.appUrl, 'http://localhost:8080')
  t.equal(config.corsOrigins, '*')
  t.equal(config.bodyLimitBytes, 16 * 1024)
  t.same(config.leadRateLimit, { limit: 20, windowSeconds: 60 })
  t.equal(config.lifecycle.routes['/waitlist']?.deprecation.toISOString(), '2025-12-31T23:59:59.000Z')
  t.equal(config.lifecycle.routes['/waitlist']?.sunset?.toISOString(), '2027-01-31T23:59:59.000Z')
})

t.test('the result is frozen, down to nested values', async (t) => {
  const config = loadConfig({ CORS_ORIGINS: 'https://a.example.com', TRUST_PROXY: '10.0.0.1' })
  t.ok(Object.isFrozen(config))
  t.ok(Object.isFrozen(config.leadRateLimit))
  t.ok(Object.isFrozen(config.lifecycle))
  t.ok(Object.isFrozen(config.lifecycle.routes))
  t.ok(Object.isFrozen(config.lifecycle.routes['/waitlist']))
  t.ok(Object.isFrozen(config.corsOrigins))
  t.ok(Object.isFrozen(config.trustProxy))
  t.throws(() => {
    ;(config as { port: number }).port = 1
  }, TypeError)
})

t.test('PORT', async (t) => {
  t.equal(loadConfig({ PORT: '0' }).port, 0, '0 asks the system for a free port')
  t.equal(loadConfig({ PORT: '65535' }).port, 65535)
  for (const port of ['abc', '-1', '65536', '80.5', '1e3', ' 80', '0x50']) {
    t.throws(() => loadConfig({ PORT: port }), ConfigError, `PORT=${port}`)
  }
  t.throws(() => loadConfig({ PORT: 'abc' }), { message: 'PORT must be a whole number, got "abc"' })
})

t.test('OpenTelemetry: the OTLP encoding and the sampler', async (t) => {
  const defaults = loadConfig({})
  t.same([defaults.otelSampler, defaults.otelSamplerRatio], ['parentbased_always_on', 1], 'the OpenTelemetry defaults')
  const set = loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' })
  t.same([set.otelSampler, set.otelSamplerRatio], ['parentbased_traceidratio', 0.25])
  t.throws(() => loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }), { message: 'OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf, the one OTLP encoding Steward sends' })
  t.throws(() => loadConfig({ OTEL_TRACES_SAMPLER: 'jaeger_remote' }), { message: /^OTEL_TRACES_SAMPLER must be one of always_on, / })
  for (const ratio of ['1.5', '-0.1', 'half', 'NaN']) t.throws(() => loadConfig({ OTEL_TRACES_SAMPLER_ARG: ratio }), ConfigError, `OTEL_TRACES_SAMPLER_ARG=${ratio}`)
})

t.test('public URLs', async (t) => {
  const config = loadConfig({ BASE_URL: 'https://api.example.com/', APP_URL: 'https://app.example.com//' })
  t.equal(config.baseUrl, 'https://api.example.com', 'trailing slash removed')
  t.equal(config.appUrl, 'https://app.example.com')
  for (const name of ['BASE_URL', 'PRODUCT_API_URL', 'APP_URL']) {
    for (const url of ['not a url', 'example.com', 'ftp://example.com', 'https://example.com/?a=1', 'https://example.com/#x', 'javascript:alert(1)']) {
      t.throws(() => loadConfig({ [name]: url }), ConfigError, `${name}=${url}`)
    }
  }
})

t.test('DATABASE_URL', async (t) => {
  t.equal(loadConfig({ DATABASE_URL: 'postgres://u@h/db' }).databaseUrl, 'postgres://u@h/db')
  t.equal(loadConfig({ DATABASE_URL: 'postgresql://u@h/db' }).databaseUrl, 'postgresql://u@h/db')
  t.equal(loadConfig({ DATABASE_URL: 'memory://' }).databaseUrl, 'memory://')
  for (const url of ['mysql://u@h/db', 'sqlite:./x.db', './data', 'http://h/db']) {
    t.throws(() => loadConfig({ DATABASE_URL: url }), ConfigError, url)
  }
})

t.test('rate limits, CORS origins, body limit, log level and TLS files', async (t) => {
  t.same(loadConfig({ LEAD_RATE_LIMIT: '3/60' }).leadRateLimit, { limit: 3, windowSeconds: 60 })
  for (const value of ['3', '0/60', '3/0', 'three/60', '3/60/1', '-3/60']) {
    t.throws(() => loadConfig({ LEAD_RATE_LIMIT: value }), ConfigError, `LEAD_RATE_LIMIT=${value}`)
  }
  t.same(loadConfig({ CORS_ORIGINS: 'https://a.example.com, http://localhost:3000' }).corsOrigins, ['https://a.example.com', 'http://localhost:3000'])
  t.equal(loadConfig({ CORS_ORIGINS: 'https://a.example.com,*' }).corsOrigins, '*')
  for (const origin of ['https://a.example.com/', 'https://a.example.com/path', 'a.example.com', 'ftp://a.example.com']) {
    t.throws(() => loadConfig({ CORS_ORIGINS: origin }), ConfigError, `CORS_ORIGINS=${origin}`)
  }
  t.throws(() => loadConfig({ BODY_LIMIT_BYTES: '100' }), ConfigError)
  t.throws(() => loadConfig({ LOG_LEVEL: 'verbose' }), ConfigError)
  t.throws(() => loadConfig({ TLS_CERT_FILE: '/x.pem' }), ConfigError, 'a certificate without a key')
})

t.test('lifecycle', async (t) => {
  const routes = (entry: Record<string, unknown>) => JSON.stringify({ routes: { '/waitlist': entry } })
  t.throws(
    () => loadConfig({ LIFECYCLE: routes({ deprecation: '2027-01-01T00:00:00Z', sunset: '2026-01-01T00:00:00Z' }) }),
    ConfigError,
    'a sunset before its deprecation is refused',
  )
  t.throws(() => loadConfig({ LIFECYCLE: routes({ deprecation: '2027-01-01T00:00:00Z', sunset: '2026-01-01T00:00:00Z' }) }), {
    message: 'lifecycle.routes["/waitlist"]: sunset (2026-01-01T00:00:00.000Z) precedes deprecation (2027-01-01T00:00:00.000Z)',
  })
  t.throws(() => loadConfig({ LIFECYCLE: JSON.stringify({ versions: { v1: { deprecation: '2027-01-02', sunset: '2027-01-01' } } }) }), ConfigError)
  const same = loadConfig({ LIFECYCLE: routes({ deprecation: '2027-01-01T00:00:00Z', sunset: '2027-01-01T00:00:00Z' }) })
  t.equal(same.lifecycle.routes['/waitlist']?.sunset?.toISOString(), '2027-01-01T00:00:00.000Z', 'equal dates are allowed')
  const noSunset = loadConfig({ LIFECYCLE: routes({ deprecation: '2027-01-01T00:00:00Z' }) })
  t.equal(noSunset.lifecycle.routes['/waitlist']?.sunset, null)
  for (const bad of ['{', '[]', '"x"', routes({ deprecation: 'soon' }), routes({ sunset: '2027-01-01' })]) {
    t.throws(() => loadConfig({ LIFECYCLE: bad }), ConfigError, bad)
  }
  t.throws(() => loadConfig({ LIFECYCLE: '{}', LIFECYCLE_FILE: '/nonexistent' }), ConfigError, 'not both')
  t.throws(() => loadConfig({ LIFECYCLE_FILE: '/nonexistent/lifecycle.json' }), ConfigError)
})
