// Frozen in time: never import application code here.
// Invitations (members join by accepting a one-time secret, stored only as SHA-256), the issuing
// lineage of API keys (revoking a key revokes the keys it issued), and the indexes the caps and
// the session sweep count with.
import { sql, type Kysely } from 'kysely'

const ROLES = sql`('owner', 'admin', 'manager', 'member', 'viewer')`

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('invitations')
    .addColumn('id', 'uuid', (col) => col.primaryKey())
    .addColumn('organization_id', 'uuid', (col) => col.notNull().references('organizations.id').onDelete('cascade'))
    .addColumn('email', 'text', (col) => col.notNull())
    .addColumn('email_normalized', 'text', (col) => col.notNull())
    .addColumn('role', 'text', (col) => col.notNull().check(sql`role in ${ROLES}`))
    .addColumn('secret_hash', 'text', (col) => col.notNull().unique())
    .addColumn('invited_by', 'text', (col) => col.notNull())
    .addColumn('created_at', 'timestamptz', (col) => col.notNull())
    .addColumn('expires_at', 'timestamptz', (col) => col.notNull())
    .addColumn('accepted_at', 'timestamptz')
    .addColumn('accepted_user_id', 'uuid', (col) => col.references('users.id').onDelete('set null'))
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('failed_attempts', 'integer', (col) => col.notNull().defaultTo(0))
    .execute()
  await db.schema.createIndex('invitations_organization').on('invitations').columns(['organization_id', 'created_at']).execute()
  // At most one open invitation per email and organization.
  await sql`create unique index invitations_open on invitations (organization_id, email_normalized) where accepted_at is null and revoked_at is null`.execute(db)

  // The key whose revocation revokes this one: the key that issued it, or, once that key was
  // rotated, its successor. Null for keys issued by a user session or the operator.
  await db.schema.alterTable('api_keys').addColumn('issuer_key_id', 'uuid').execute()
  await db.schema.createIndex('api_keys_issuer').on('api_keys').column('issuer_key_id').execute()
  // Existing keys: the issuer is the creating key, followed along its rotations to the current one.
  await sql`
    with recursive chain(start_id, cur_id) as (
      select id, created_by_key_id from api_keys where created_by_key_id is not null
      union
      select c.start_id, p.replaced_by from chain c join api_keys p on p.id = c.cur_id where p.replaced_by is not null
    )
    update api_keys k set issuer_key_id = c.cur_id
    from chain c join api_keys head on head.id = c.cur_id and head.replaced_by is null
    where k.id = c.start_id and c.cur_id <> k.id
  `.execute(db)

  await db.schema.createIndex('token_families_user').on('token_families').columns(['user_id', 'created_at']).execute()
  await db.schema.createIndex('token_families_created').on('token_families').column('created_at').execute()
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('token_families_created').execute()
  await db.schema.dropIndex('token_families_user').execute()
  await db.schema.dropIndex('api_keys_issuer').execute()
  await db.schema.alterTable('api_keys').dropColumn('issuer_key_id').execute()
  await db.schema.dropTable('invitations').execute()
}
