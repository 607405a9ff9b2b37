// Frozen in time: never import application code here.
// Rate-limit windows shared by every process on one database (storage/ratelimits.ts).
import type { Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('rate_limit_counters')
    .addColumn('limiter', 'text', (col) => col.notNull())
    .addColumn('key', 'text', (col) => col.notNull())
    .addColumn('window_start', 'bigint', (col) => col.notNull())
    .addColumn('count', 'integer', (col) => col.notNull())
    .addColumn('expires_at', 'bigint', (col) => col.notNull())
    .addPrimaryKeyConstraint('rate_limit_counters_pkey', ['limiter', 'key', 'window_start'])
    .execute()
  await db.schema.createIndex('rate_limit_counters_expires_at').on('rate_limit_counters').column('expires_at').execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('rate_limit_counters').execute()
}
