// Where the secrets key comes from (auth/secret-box.ts seals with it). SECRETS_KEY when set; else,
// for the embedded database in DATA_DIR, a key file beside it (DATA_DIR/secrets.key, owner-only),
// made on first use and read after; in memory, a random key of this process. On PostgreSQL without
// SECRETS_KEY there is none: several processes share that database and must share one key, which
// only the operator can give them all.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Config } from '../config.ts'
import { createSecretBox, newSecretsKey, parseSecretsKey, SECRETS_KEY_BYTES, type SecretBox } from '../auth/secret-box.ts'

/** Where the key comes from: SECRETS_KEY, DATA_DIR/secrets.key, this process, or nowhere. */
export type SecretsSource = 'env' | 'file' | 'process' | 'missing'

export const KEY_FILE = 'secrets.key'

/** Why nothing can be sealed: PostgreSQL without SECRETS_KEY. */
export const NO_SECRETS_KEY = 'SECRETS_KEY is not set: on PostgreSQL every Steward process must share one key to seal and open secrets; set SECRETS_KEY (32 random bytes in base64url) on each'

export interface Secrets {
  readonly source: SecretsSource
  /**
   * The box sealing with the key, or null when `source` is 'missing'. The first call may read or
   * create the key file (synchronously, once per process); a key file that cannot be read or
   * holds no key throws an Error naming the file.
   */
  box(): SecretBox | null
}

/** One key per process for in-memory databases: every handler of the process shares it. */
let processKey: Buffer | null = null

export function secretsSource(config: Pick<Config, 'secretsKey' | 'databaseUrl'>): SecretsSource {
  if (config.secretsKey !== null) return 'env'
  if (config.databaseUrl === null) return 'file'
  if (config.databaseUrl.startsWith('memory:')) return 'process'
  return 'missing'
}

/** The key file's key, made (mode 0600, exclusively: a racing process's file wins) when missing. */
function keyFromFile(dataDir: string): Buffer {
  const path = join(dataDir, KEY_FILE)
  const read = (): Buffer => {
    const key = parseSecretsKey(readFileSync(path, 'utf8'))
    if (!key) throw new Error(`${path} does not hold a secrets key (32 bytes in base64url); restore it from a backup, or remove it only if nothing was sealed with it`)
    return key
  }
  try {
    return read()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  try {
    writeFileSync(path, `${newSecretsKey()}\n`, { flag: 'wx', mode: 0o600 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
  }
  return read()
}

export function createSecrets(config: Pick<Config, 'secretsKey' | 'databaseUrl' | 'dataDir'>): Secrets {
  const source = secretsSource(config)
  let box: SecretBox | null = null
  return {
    source,
    box() {
      if (box || source === 'missing') return box
      let key: Buffer
      if (source === 'env') key = parseSecretsKey(config.secretsKey!)!
      else if (source === 'file') key = keyFromFile(config.dataDir)
      else key = processKey ??= randomBytes(SECRETS_KEY_BYTES)
      box = createSecretBox(key)
      return box
    },
  }
}
