// A strict parser of the Prometheus text exposition format (version 0.0.4), for the metrics tests:
// no parser of it is installed, so this one follows the format's description and throws on
// anything it does not allow — a malformed line, a name or label outside the grammar, a bad
// escape, a sample before its family's TYPE or apart from its family, a series given twice, a
// negative counter, a histogram whose buckets are not cumulative or whose +Inf bucket differs
// from its _count.

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Family {
  readonly name: string
  readonly type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped'
  readonly help: string
  readonly samples: Sample[]
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped'])

function parseValue(text: string, line: number): number {
  if (text === 'NaN') return NaN
  if (text === '+Inf' || text === 'Inf') return Infinity
  if (text === '-Inf') return -Infinity
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`line ${line}: bad value ${JSON.stringify(text)}`)
  return Number(text)
}

/** The labels of `{…}` starting at text[0] === '{'; returns them and the rest after '}'. */
function parseLabels(text: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {}
  let i = 1
  for (;;) {
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) }
    const eq = text.indexOf('=', i)
    if (eq < 0) throw new Error(`line ${line}: label without =`)
    const name = text.slice(i, eq)
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw new Error(`line ${line}: bad label name ${JSON.stringify(name)}`)
    if (name in labels) throw new Error(`line ${line}: label ${name} twice`)
    if (text[eq + 1] !== '"') throw new Error(`line ${line}: label value not quoted`)
    let value = ''
    let j = eq + 2
    for (;;) {
      const c = text[j]
      if (c === undefined) throw new Error(`line ${line}: unterminated label value`)
      if (c === '"') break
      if (c === '\\') {
        const next = text[j + 1]
        if (next === '\\') value += '\\'
        else if (next === '"') value += '"'
        else if (next === 'n') value += '\n'
        else throw new Error(`line ${line}: bad escape \\${next}`)
        j += 2
        continue
      }
      if (c === '\n') throw new Error(`line ${line}: newline in label value`)
      value += c
      j++
    }
    labels[name] = value
    i = j + 1
    if (text[i] === ',') i++
    else if (text[i] !== '}') throw new Error(`line ${line}: expected , or } after label ${name}`)
  }
}

/** The family a sample name belongs to, given the family's type. */
function familyOf(sampleName: string, families: Map<string, Family>): Family | undefined {
  const exact = families.get(sampleName)
  if (exact) return exact
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue
    const family = families.get(sampleName.slice(0, -suffix.length))
    if (family && (family.type === 'histogram' || (family.type === 'summary' && suffix !== '_bucket'))) return family
  }
  return undefined
}

export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('the exposition must end with a newline')
  const families = new Map<string, Family>()
  const helps = new Map<string, string>()
  const seen = new Set<string>()
  let current: Family | null = null
  const closed = new Set<string>()
  text.split('\n').forEach((raw, index) => {
    const line = index + 1
    if (raw === '') return
    if (raw.startsWith('#')) {
      const match = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(raw)
      if (!match) return
      const [, kind, name, rest] = match as unknown as [string, string, string, string]
      if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`)
      if (kind === 'HELP') {
        if (helps.has(name)) throw new Error(`line ${line}: HELP of ${name} twice`)
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`line ${line}: bad escape in HELP`)
        helps.set(name, rest)
        return
      }
      if (!TYPES.has(rest)) throw new Error(`line ${line}: bad type ${rest}`)
      if (families.has(name)) throw new Error(`line ${line}: TYPE of ${name} twice`)
      if (current) closed.add(current.name)
      current = { name, type: rest as Family['type'], help: helps.get(name) ?? '', samples: [] }
      families.set(name, current)
      return
    }
    const nameEnd = raw.search(/[{ ]/)
    if (nameEnd <= 0) throw new Error(`line ${line}: not a sample: ${raw}`)
    const name = raw.slice(0, nameEnd)
    if (!METRIC_NAME.test(name)) throw new Error(`line ${line}: bad metric name ${name}`)
    let labels: Record<string, string> = {}
    let rest = raw.slice(nameEnd)
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, line))
    const parts = rest.trim().split(/ +/)
    if (!rest.startsWith(' ') || parts.length < 1 || parts.length > 2) throw new Error(`line ${line}: bad sample tail ${JSON.stringify(rest)}`)
    if (parts.length === 2 && !/^-?\d+$/.test(parts[1]!)) throw new Error(`line ${line}: bad timestamp`)
    const value = parseValue(parts[0]!, line)
    const family = familyOf(name, families)
    if (!family) throw new Error(`line ${line}: sample ${name} before any TYPE of its family`)
    if (family !== current || closed.has(family.name)) throw new Error(`line ${line}: sample ${name} apart from its family`)
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`
    if (seen.has(key)) throw new Error(`line ${line}: series ${key} twice`)
    seen.add(key)
    if (family.type === 'counter' && !(value >= 0)) throw new Error(`line ${line}: counter ${name} is ${value}`)
    if (family.type === 'histogram' && name.endsWith('_bucket') && !('le' in labels)) throw new Error(`line ${line}: bucket without le`)
    family.samples.push({ name, labels, value })
  })
  for (const family of families.values()) if (family.type === 'histogram') checkHistogram(family)
  return families
}

function checkHistogram(family: Family): void {
  const series = new Map<string, { buckets: [number, number][]; count?: number; sum?: number }>()
  for (const sample of family.samples) {
    const { le, ...others } = sample.labels
    const key = JSON.stringify(Object.entries(others).sort())
    const entry = series.get(key) ?? { buckets: [] }
    series.set(key, entry)
    if (sample.name.endsWith('_bucket')) entry.buckets.push([parseValue(le!, 0), sample.value])
    else if (sample.name.endsWith('_count')) entry.count = sample.value
    else if (sample.name.endsWith('_sum')) entry.sum = sample.value
  }
  for (const [key, entry] of series) {
    const sorted = [...entry.buckets].sort((a, b) => a[0] - b[0])
    for (let i = 1; i < sorted.length; i++) if (sorted[i]![1] < sorted[i - 1]![1]) throw new Error(`${family.name}${key}: buckets not cumulative`)
    const inf = sorted.at(-1)
    if (!inf || inf[0] !== Infinity) throw new Error(`${family.name}${key}: no +Inf bucket`)
    if (entry.count !== inf[1]) throw new Error(`${family.name}${key}: _count ${entry.count} differs from the +Inf bucket ${inf[1]}`)
    if (entry.sum === undefined) throw new Error(`${family.name}${key}: no _sum`)
  }
}

/** The value of one series (undefined: absent); `labels` must match exactly. */
export function valueOf(families: Map<string, Family>, family: string, sampleName: string, labels: Record<string, string> = {}): number | undefined {
  const want = JSON.stringify(Object.entries(labels).sort())
  return families.get(family)?.samples.find((sample) => sample.name === sampleName && JSON.stringify(Object.entries(sample.labels).sort()) === want)?.value
}
