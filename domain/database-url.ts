// The one test for "this DATABASE_URL names a PostgreSQL server" (else: embedded PGlite).

const POSTGRES_URL = /^postgres(ql)?:\/\//

export function isPostgresUrl(url: string | null | undefined): url is string {
  return typeof url === 'string' && POSTGRES_URL.test(url)
}
