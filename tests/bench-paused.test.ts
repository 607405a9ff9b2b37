// The bench's latency probes run with every other server of the run stopped (withPaused in
// bench/load.ts). A process left stopped would hang the rest of the run, and a child left running
// (a runtime started through a wrapper) would make the pause a no-op: both are checked here, on
// real processes, through the state Linux reports for them. The probe itself runs on the first
// core (withProbePinned): a thread of it left unpinned would make that a no-op, a server pinned
// with it would share its core, and cores not given back would halve every later measurement.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import { Worker } from 'node:worker_threads'
import t, { type Test } from 'tap'
import { statFields } from '../bench/lib.ts'
import { withPaused, withProbePinned } from '../bench/load.ts'

const linux = existsSync('/proc/self/stat')

/** The one-letter state of a process (R, S, T for stopped…), from /proc. */
const state = (pid: number): string => statFields(pid)[0]!

/**
 * The state once it satisfies `wanted`, or the last one seen after 2 s: a signal is delivered
 * asynchronously, so a process on the other core may still read R for a moment after SIGSTOP.
 */
async function settledState(pid: number, wanted: (state: string) => boolean): Promise<string> {
  const deadline = Date.now() + 2000
  let seen = state(pid)
  while (!wanted(seen) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5))
    seen = state(pid)
  }
  return seen
}
const stopped = (s: string) => s === 'T'
const running = (s: string) => s !== 'T'

/** A node process that starts a child node process and prints the child's pid; both idle. */
async function parentWithChild(t: Test): Promise<{ parent: ChildProcess; child: number }> {
  const script = `
    const { spawn } = require('node:child_process')
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    console.log(child.pid)
    setInterval(() => {}, 1000)
    process.on('SIGTERM', () => { child.kill('SIGKILL'); process.exit(0) })`
  const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  t.teardown(() => {
    parent.kill('SIGCONT')
    parent.kill('SIGTERM')
  })
  const child = await new Promise<number>((resolve, reject) => {
    parent.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())))
    parent.once('exit', () => reject(new Error('the parent exited before printing its child')))
  })
  return { parent, child }
}

t.test('stops the process and its children during the work, and resumes them after', { skip: !linux && 'needs /proc' }, async (t) => {
  const { parent, child } = await parentWithChild(t)
  const seen = await withPaused([parent.pid!], async () => [await settledState(parent.pid!, stopped), await settledState(child, stopped)])
  t.same(seen, ['T', 'T'], 'both stopped while the work runs')
  t.not(await settledState(parent.pid!, running), 'T', 'the parent runs again')
  t.not(await settledState(child, running), 'T', 'the child runs again')
})

t.test('resumes them when the work fails, and passes the failure on', { skip: !linux && 'needs /proc' }, async (t) => {
  const { parent, child } = await parentWithChild(t)
  await t.rejects(
    withPaused([parent.pid!], async () => {
      throw new Error('probe failed')
    }),
    { message: 'probe failed' },
  )
  t.not(await settledState(parent.pid!, running), 'T')
  t.not(await settledState(child, running), 'T')
})

t.test('a process that does not exist is no reason to fail', async (t) => {
  // Above Linux's largest pid (2^22), so it can never name a live process.
  t.equal(await withPaused([2 ** 22 + 1], async () => 'done'), 'done')
})

/** The cores each thread of a process may run on (Linux's Cpus_allowed_list, such as "0-1"), one entry per thread. */
function allowedCores(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((task) => /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8'))![1]!)
}
const cores = os.availableParallelism()
const canPin = linux && cores >= 2 && spawnSync('taskset', ['--version']).status === 0
const every = `0-${cores - 1}`

t.test('puts every thread of the probe, a worker started inside included, on the first core, leaves the servers on all, then gives all cores back', { skip: !canPin && 'needs Linux, taskset and two cores' }, async (t) => {
  const { parent, child } = await parentWithChild(t)
  t.ok(allowedCores(process.pid).length > 1, 'the probe has several threads (V8 and libuv start some)')
  const { pinned, result } = await withProbePinned(async () => {
    // The probe's pacing thread starts inside the work, as fixedRateLatency starts it.
    const worker = new Worker("require('node:worker_threads').parentPort.postMessage(require('node:fs').readFileSync('/proc/thread-self/status', 'utf8'))", { eval: true })
    const status = await new Promise<string>((resolve) => worker.once('message', resolve))
    await worker.terminate()
    return { probe: allowedCores(process.pid), worker: /Cpus_allowed_list:\s*(\S+)/.exec(status)![1], server: allowedCores(parent.pid!), child: allowedCores(child) }
  })
  t.equal(pinned, true)
  t.same(new Set(result.probe), new Set(['0']), 'every thread of the probe on the first core')
  t.equal(result.worker, '0', 'and a thread started during the probe')
  t.same(new Set([...result.server, ...result.child]), new Set([every]), 'the servers, started before, keep every core')
  t.same(new Set(allowedCores(process.pid)), new Set([every]), 'all cores given back')
})

t.test('gives the cores back when the work fails, and passes the failure on', { skip: !canPin && 'needs Linux, taskset and two cores' }, async (t) => {
  await t.rejects(withProbePinned(async () => {
    throw new Error('probe failed')
  }), { message: 'probe failed' })
  t.same(new Set(allowedCores(process.pid)), new Set([every]))
})
