// DATA_DIR made and checked before anything opens it: an unusable directory fails at once with
// its name instead of hanging inside the embedded database.
import { randomBytes } from 'node:crypto'
import { accessSync, constants, existsSync, mkdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

/** DATA_DIR cannot be used: the message names it and what to do. */
export class DataDirError extends Error {
  override name = 'DataDirError'
}

/**
 * Creates DATA_DIR if needed (owner-only) and checks it is a writable directory, so that an
 * unusable one fails at once with its name instead of hanging inside the embedded database.
 */
export function prepareDataDir(dataDir: string): void {
  const fail = (why: string): never => {
    throw new DataDirError(`DATA_DIR ${dataDir} is not usable: ${why}; set DATA_DIR to a directory this user can create and write`)
  }
  try {
    makeDirectories(resolve(dataDir))
  } catch (error) {
    fail(`cannot create it (${(error as NodeJS.ErrnoException).code ?? String(error)})`)
  }
  let isDirectory = false
  try {
    isDirectory = statSync(dataDir).isDirectory()
  } catch (error) {
    fail(`cannot read it (${(error as NodeJS.ErrnoException).code ?? String(error)})`)
  }
  if (!isDirectory) fail('it is a file, not a directory')
  try {
    accessSync(dataDir, constants.R_OK | constants.W_OK | constants.X_OK)
  } catch (error) {
    fail(`it is not writable (${(error as NodeJS.ErrnoException).code ?? String(error)})`)
  }
  // access(2) says yes on some read-only mounts (procfs, root on a read-only bind): try a write.
  const probe = join(dataDir, `.steward-write-test-${process.pid}-${randomBytes(4).toString('hex')}`)
  try {
    writeFileSync(probe, '')
    unlinkSync(probe)
  } catch (error) {
    fail(`it is not writable (${(error as NodeJS.ErrnoException).code ?? String(error)})`)
  }
}

/**
 * mkdir -p, one level at a time. Node's recursive mkdirSync spins forever where mkdir(2) answers
 * ENOENT under an existing parent (/proc/x): here that is an error like any other.
 */
function makeDirectories(path: string): void {
  const missing: string[] = []
  let current = path
  while (!existsSync(current)) {
    missing.unshift(current)
    const parent = dirname(current)
    if (parent === current) break
    current = parent
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir, { mode: 0o700 })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
  }
}
