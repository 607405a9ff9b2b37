// Keeps Node's event loop turning while a command or the server starts.
//
// Node runs its event loop only while something there keeps it alive: a timer, a socket, a file
// operation. Opening the embedded database awaits V8's WebAssembly compilation, which is none of
// those, and every handle Steward holds at that point is unref'd on purpose (the data-directory
// lock, background timers), so the loop runs dry. Node then waits for all of V8's background work
// before it polls sockets again, and that includes the optimizing compilations of PGlite's
// WebAssembly that nothing is waiting for: on the machine Steward is measured on, the server's
// first request waited 100–200 ms after it was listening. A timer held while starting keeps the
// loop alive, so the compilations run beside the start instead of in front of the first request.
// (bench/startup.ts measures start-up; bench/RESULTS.md has the figures before and after.)

/** Runs `work` with a ref'd timer holding the event loop open; the timer never fires. */
export async function holdingEventLoop<T>(work: () => Promise<T>): Promise<T> {
  const hold = setInterval(() => {}, 2 ** 30)
  try {
    return await work()
  } finally {
    clearInterval(hold)
  }
}
