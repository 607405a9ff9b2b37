// One turn of the event loop, for background work between its statements. On PGlite the database
// runs on this process's thread, and it answers each statement as a promise that is already
// settled: statements awaited one after another never let the event loop turn, so a background
// chain of them (a sealing pass, a webhook pass, a housekeeping pass) held every request of the
// process until its last statement. Awaiting this between statements lets requests in. On
// PostgreSQL it costs a few microseconds.
export function turn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
