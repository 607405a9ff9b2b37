// Frozen in time: never import application code here.
// The product API: organizations, users, memberships, API keys, token families, access and
// refresh tokens, policies. Secrets are stored only as SHA-256 hex digests (unique columns).
import { sql, type Kysely } from 'kysely'

const ROLES = sql`('owner', 'admin', 'manager', 'member', 'viewer')`

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('organizations')
    .addColumn('id', 'uuid', (col) => col.primaryKey())
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .execute()

  await db.schema
    .createTable('users')
    .addColumn('id', 'uuid', (col) => col.primaryKey())
    .addColumn('email', 'text', (col) => col.notNull())
    .addColumn('email_normalized', 'text', (col) => col.notNull().unique())
    .addColumn('password_hash', 'text', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .execute()

  await db.schema
    .createTable('memberships')
    .addColumn('user_id', 'uuid', (col) => col.notNull().references('users.id').onDelete('cascade'))
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ${ROLES}`))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addPrimaryKeyConstraint('memberships_pkey', ['organization_id', 'user_id'])
    .execute()
  await db.schema.createIndex('memberships_user').on('memberships').column('user_id').execute()

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ${ROLES}`))
    .addColumn('secret_hash', 'text', (col) => col.notNull().unique())
    .addColumn('display_prefix', 'text', (col) => col.notNull())
    .addColumn('created_by_user_id', 'uuid')
    .addColumn('created_by_key_id', 'uuid')
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('expires_at', 'timestamptz')
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('last_used_at', 'timestamptz')
    .addColumn('replaced_by', 'uuid')
    .execute()
  await db.schema.createIndex('api_keys_organization').on('api_keys').columns(['organization_id', 'created_at']).execute()

  // A family is one sign-in: every access and refresh token descending from it. Replaying a
  // spent refresh token revokes the whole family (RFC 9700 §4.14.2).
  await db.schema
    .createTable('token_families')
    .addColumn('id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('user_id', 'uuid', (col) => col.references('users.id').onDelete('cascade'))
    .addColumn('api_key_id', 'uuid', (col) => col.references('api_keys.id').onDelete('cascade'))
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ${ROLES}`))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .execute()

  await db.schema
    .createTable('access_tokens')
    .addColumn('token_hash', 'text', (col) => col.primaryKey())
    .addColumn('family_id', 'uuid', (col) => col.notNull().references('token_families.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('expires_at', 'timestamptz', (col) => col.notNull())
    .execute()
  await db.schema.createIndex('access_tokens_family').on('access_tokens').column('family_id').execute()

  await db.schema
    .createTable('refresh_tokens')
    .addColumn('token_hash', 'text', (col) => col.primaryKey())
    .addColumn('family_id', 'uuid', (col) => col.notNull().references('token_families.id').onDelete('cascade'))
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('expires_at', 'timestamptz', (col) => col.notNull())
    .addColumn('spent_at', 'timestamptz')
    .execute()
  await db.schema.createIndex('refresh_tokens_family').on('refresh_tokens').column('family_id').execute()

  await db.schema
    .createTable('policies')
    .addColumn('policy_id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('name', 'text', (col) => col.notNull())
    .addColumn('description', 'text', (col) => col.notNull())
    .addColumn('effect', 'text', (col) => col.notNull().check(sql`effect in ('allow', 'deny', 'require_approval')`))
    .addColumn('agents', 'jsonb', (col) => col.notNull())
    .addColumn('actions', 'jsonb', (col) => col.notNull())
    .addColumn('resources', 'jsonb', (col) => col.notNull())
    .addColumn('conditions', 'jsonb')
    .addColumn('mode', 'text', (col) => col.notNull().check(sql`mode in ('enforce', 'monitor')`))
    .addColumn('enabled', 'boolean', (col) => col.notNull())
    .addColumn('version', 'integer', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('updated_at', 'timestamptz', (col) => col.notNull())
    .addColumn('created_by', 'text', (col) => col.notNull())
    .execute()
  // Keyset pagination within one organization.
  await db.schema.createIndex('policies_page').on('policies').columns(['organization_id', 'created_at', 'policy_id']).execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['policies', 'refresh_tokens', 'access_tokens', 'token_families', 'api_keys', 'memberships', 'users', 'organizations']) {
    await db.schema.dropTable(table).execute()
  }
}
