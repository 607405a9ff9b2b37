// Shared by the bench scenarios that drive servers over HTTP (pipeline.ts, decision-pair.ts):
// alternating measurement rounds, medians of what they saw, and the Markdown they print.
import { median } from './lib.ts'
import type { Latency, Throughput } from './load.ts'

/** A whole number with thousands separators from 100 up, two decimals below. */
export const fmt = (n: number | null | undefined): string => (n === null || n === undefined ? '—' : n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(2))

/** "**1.08** ✓" when `value` meets the goal (at least, or at most), "✗" when not. */
export function verdict(value: number | null, goal: number, atLeast = true): string {
  if (value === null || !Number.isFinite(value)) return 'not measured'
  return `**${value.toFixed(2)}** ${(atLeast ? value >= goal : value <= goal) ? '✓' : '✗'}`
}

export const ratio = (a: number | null, b: number | null): number | null => (a !== null && b !== null && b > 0 ? a / b : null)

/**
 * Measures each key once per round, in alternating order (forward, reversed, forward…), after a
 * warm-up of each: neighbours in time share whatever the machine was doing, which a shared
 * two-core machine changes from second to second.
 */
export async function alternatingRounds<K extends string>(
  keys: readonly K[],
  rounds: number,
  measure: (key: K, warmUp: boolean) => Promise<Throughput>,
  onRound: (round: number) => void = () => {},
): Promise<Map<K, Throughput[]>> {
  const samples = new Map<K, Throughput[]>(keys.map((key) => [key, []]))
  for (const key of keys) await measure(key, true)
  for (let round = 0; round < rounds; round++) {
    for (const key of round % 2 === 0 ? keys : [...keys].reverse()) samples.get(key)!.push(await measure(key, false))
    onRound(round)
  }
  return samples
}

/** The median requests per second of a key's rounds; null when it was not measured. */
export const medianRps = (list: readonly Throughput[] | undefined): number | null => (list?.length ? median(list.map((r) => r.rps)) : null)

/** The median server CPU per request (µs) of a key's rounds; null when /proc could not tell. */
export function medianCpu(list: readonly Throughput[] | undefined): number | null {
  const values = (list ?? []).map((r) => r.cpuMicros).filter((v): v is number => typeof v === 'number')
  return values.length ? median(values) : null
}

/** Every status a key's rounds saw, with counts ("200×51234 errors×2"). */
export function statusesOf(list: readonly Throughput[] | undefined): string {
  const all: Record<string, number> = {}
  let errors = 0
  for (const r of list ?? []) {
    for (const [status, count] of Object.entries(r.statuses)) all[status] = (all[status] ?? 0) + count
    errors += r.errors
  }
  return Object.entries(all).map(([status, count]) => `${status}×${count}`).join(' ') + (errors ? ` errors×${errors}` : '')
}

/** The median of several probes' medians (ms), and of their 99th percentiles. */
export function medianLatency(probes: readonly Latency[]): { p50: number; p99: number; errors: number } {
  return { p50: median(probes.map((p) => p.p50)), p99: median(probes.map((p) => p.p99)), errors: probes.reduce((sum, p) => sum + p.errors, 0) }
}
