// CPU time of this process and of the local PostgreSQL server's processes (Linux /proc), for
// benches that report CPU per request beside throughput: steadier than req/s on a small, shared machine.
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { processTree, statFields } from './lib.ts'

const TICK_US = 1_000_000 / 100 // USER_HZ is 100 on Linux

/** Total user+system CPU of every process whose command is `postgres`, in µs (0 where /proc is missing). */
export function postgresCpu(): number {
  let ticks = 0
  let entries: string[]
  try {
    entries = readdirSync('/proc')
  } catch {
    return 0
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const close = stat.lastIndexOf(')')
      const name = stat.slice(stat.indexOf('(') + 1, close)
      if (name !== 'postgres') continue
      const fields = stat.slice(close + 2).split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone between listing and reading
    }
  }
  return ticks * TICK_US
}

/** CPU of this process and of PostgreSQL, in µs, at this moment. */
export function cpuNow(): { node: number; postgres: number } {
  const own = process.cpuUsage()
  return { node: own.user + own.system, postgres: postgresCpu() }
}

/** User+system CPU of a process and its descendants (a server started through a wrapper), in µs. */
export function treeCpu(root: number): number {
  let ticks = 0
  for (const pid of processTree(root)) {
    try {
      const fields = statFields(pid)
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone between listing and reading
    }
  }
  return ticks * TICK_US
}

/** Whether `taskset` is here to pin processes to a core (Linux, util-linux). */
export const canPin: boolean = (() => {
  try {
    execFileSync('taskset', ['-p', String(process.pid)], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
})()

/** Pins every thread of each process to `core` (a process that has just gone is skipped). */
export function pinTo(pids: readonly number[], core: number): void {
  for (const pid of pids) {
    try {
      execFileSync('taskset', ['-a', '-p', '-c', String(core), String(pid)], { stdio: 'ignore' })
    } catch {
      // gone
    }
  }
}

/** User+system CPU of these processes (not their children), in µs; those gone count nothing. */
export function pidsCpu(pids: readonly number[]): number {
  let ticks = 0
  for (const pid of pids) {
    try {
      const fields = statFields(pid)
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone: its CPU went with it
    }
  }
  return ticks * TICK_US
}
