import { Migrator, sql, type Kysely, type MigrationResultSet } from 'kysely'
import { migrations } from './migrations/index.ts'

/** Brings the schema up to date. Safe to run from several processes at once (Kysely takes a lock). */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  if (await upToDate(db)) return []
  const migrator = new Migrator({ db, provider: { getMigrations: async () => ({ ...migrations }) } })
  const { error, results }: MigrationResultSet = await migrator.migrateToLatest()
  if (error) throw error
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/**
 * One query instead of the migrator's catalog introspection and locking, which cost a few hundred
 * ms on every embedded start. Exactly our list, applied: nothing to do. Anything else (no table
 * yet, missing, unknown or reordered names) goes through the migrator, which applies or reports.
 */
async function upToDate(db: Kysely<any>): Promise<boolean> {
  let applied: string[]
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db)
    applied = rows.map((row) => row.name)
  } catch {
    return false
  }
  const wanted = Object.keys(migrations).sort()
  return applied.length === wanted.length && applied.every((name, i) => name === wanted[i])
}
