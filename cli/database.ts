// The database an operator command works on: the configured one, migrated, closed afterwards.
import type { Config } from '../config.ts'
import { createJsonLogger } from '../routes/deps.ts'
import { openDatabase, type DatabaseHandle } from '../storage/connect.ts'
import { migrateToLatest } from '../storage/migrate.ts'

/** Opens the configured database, migrated, for one command; closes it afterwards. */
export async function withDatabase<T>(config: Config, work: (handle: DatabaseHandle, applied: string[]) => Promise<T>): Promise<T> {
  const handle = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger: createJsonLogger('warn') })
  try {
    const applied = await migrateToLatest(handle.db)
    return await work(handle, applied)
  } finally {
    await handle.close()
  }
}
