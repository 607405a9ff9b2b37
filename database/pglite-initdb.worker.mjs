// Runs PostgreSQL's initdb for an embedded data directory in a worker thread. initdb needs a
// second WebAssembly instance of PostgreSQL; in the server's own thread its memory (hundreds of
// MB) would stay mapped for the life of the process, whereas a worker's is released when it
// ends. Plain JavaScript: it needs no TypeScript loader, so it runs the same on Node, Bun and Deno.
import { workerData } from 'node:worker_threads'
import { PGlite } from '@electric-sql/pglite'

const pglite = await PGlite.create({
  dataDir: workerData.dataDir,
  startParams: workerData.startParams,
  initDbStartParams: workerData.initDbStartParams,
})
// A clean checkpoint: a copy of this directory then opens without crash recovery.
await pglite.exec('CHECKPOINT')
await pglite.close()
