// Charts drawn by hand in SVG through DOM calls (createElementNS): no charting library, nothing
// parsed from a string, so they work under the console's Trusted Types policy. Every chart is an
// image with a title and a description, a single Tab stop whose arrow keys walk through the bars
// (each read out in a live line under it), a legend in words, and its numbers in a table one click
// away: what the picture shows can be read without seeing it.
import { h, uid } from './dom.js'

const SVG = 'http://www.w3.org/2000/svg'
const WIDTH = 640
const HEIGHT = 240
const PAD = { top: 12, right: 12, bottom: 32, left: 44 }

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attrs)) if (value !== null && value !== undefined) el.setAttribute(name, String(value))
  for (const child of children.flat()) if (child) el.append(child instanceof Node ? child : document.createTextNode(String(child)))
  return el
}

/** 1, 2 or 5 times a power of ten, at least `value` (and at least 1). */
export function niceCeiling(value) {
  if (!(value > 0)) return 1
  const power = 10 ** Math.floor(Math.log10(value))
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power
  return 10 * power
}

export const formatNumber = (n) => new Intl.NumberFormat().format(n)

/** A table of the chart's numbers, behind a disclosure so it takes no room until asked for. */
function numbers(caption, headers, rows) {
  return h(
    'details',
    { class: 'chart-numbers' },
    h('summary', { text: `Show the numbers: ${caption}` }),
    h(
      'div',
      { class: 'table-wrap' },
      h(
        'table',
        {},
        h('caption', { class: 'visually-hidden', text: caption }),
        h('thead', {}, h('tr', {}, headers.map((text) => h('th', { scope: 'col', text })))),
        h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((text, i) => (i === 0 ? h('th', { scope: 'row', text }) : h('td', { text })))))),
      ),
    ),
  )
}

/** Arrow keys (and the pointer) move through `items`; each one is read out in `readout`. */
function explore(svg, marks, items, readout, hint) {
  let index = -1
  const select = (next) => {
    if (items.length === 0) return
    index = Math.max(0, Math.min(items.length - 1, next))
    marks.forEach((mark, i) => mark.classList.toggle('active', i === index))
    readout.textContent = items[index]
  }
  svg.addEventListener('keydown', (event) => {
    const moves = { ArrowRight: index + 1, ArrowDown: index + 1, ArrowLeft: index - 1, ArrowUp: index - 1, Home: 0, End: items.length - 1 }
    if (!(event.key in moves)) return
    event.preventDefault()
    // The first key pressed starts at an end: the last column for End or a step back, else the first.
    if (index < 0) select(['End', 'ArrowLeft', 'ArrowUp'].includes(event.key) ? items.length - 1 : 0)
    else select(moves[event.key])
  })
  svg.addEventListener('focus', () => {
    if (index < 0) readout.textContent = hint
  })
  marks.forEach((mark, i) => mark.addEventListener('pointerenter', () => select(i)))
}

function frame(title, description, width = WIDTH) {
  const titleId = uid('chart-title')
  const descId = uid('chart-desc')
  const svg = s(
    'svg',
    { viewBox: `0 0 ${width} ${HEIGHT}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`, tabindex: '0', class: 'chart-svg' },
    s('title', { id: titleId }, title),
    s('desc', { id: descId }, description),
  )
  const readout = h('p', { class: 'chart-readout', 'aria-live': 'polite' })
  return { svg, readout }
}

/**
 * Columns over time, stacked by series: `buckets` are [{ label, long, values: { key: n } }],
 * `series` are [{ key, label }] in stacking order (bottom first).
 */
export function stackedColumns({ title, description, buckets, series, noun = 'decisions' }) {
  const totals = buckets.map((b) => series.reduce((sum, one) => sum + (b.values[one.key] ?? 0), 0))
  const max = niceCeiling(Math.max(0, ...totals))
  const { svg, readout } = frame(title, description)
  const plotW = WIDTH - PAD.left - PAD.right
  const plotH = HEIGHT - PAD.top - PAD.bottom
  const y = (n) => PAD.top + plotH - (n / max) * plotH
  // Whole-number gridlines, about four of them.
  const tickStep = Math.max(1, niceCeiling(max / 4))
  for (let value = 0; value <= max; value += tickStep) {
    svg.append(s('line', { class: 'grid', x1: PAD.left, x2: WIDTH - PAD.right, y1: y(value), y2: y(value) }), s('text', { class: 'axis', x: PAD.left - 6, y: y(value) + 4, 'text-anchor': 'end' }, formatNumber(value)))
  }
  const step = plotW / Math.max(1, buckets.length)
  const barW = Math.max(2, Math.min(48, step * 0.7))
  const every = Math.ceil(buckets.length / 12)
  const marks = buckets.map((bucket, i) => {
    const x = PAD.left + i * step + (step - barW) / 2
    let base = 0
    const column = s('g', { class: 'column' })
    // A transparent full-height target, so a thin or empty column is still easy to point at.
    column.append(s('rect', { class: 'hit', x: PAD.left + i * step, y: PAD.top, width: step, height: plotH }))
    for (const one of series) {
      const n = bucket.values[one.key] ?? 0
      if (n > 0) column.append(s('rect', { class: `bar s-${one.key}`, x, y: y(base + n), width: barW, height: Math.max(1, y(base) - y(base + n)) }))
      base += n
    }
    if (i % every === 0) column.append(s('text', { class: 'axis', x: x + barW / 2, y: HEIGHT - PAD.bottom + 16, 'text-anchor': 'middle' }, bucket.label))
    svg.append(column)
    return column
  })
  const items = buckets.map((bucket, i) => `${bucket.long}: ${totals[i]} ${noun}${totals[i] ? ` (${series.filter((one) => bucket.values[one.key]).map((one) => `${bucket.values[one.key]} ${one.label}`).join(', ')})` : ''}`)
  explore(svg, marks, items, readout, 'Use the left and right arrow keys to read each column.')
  const legend = h('ul', { class: 'legend' }, series.map((one) => h('li', {}, h('span', { class: `swatch s-${one.key}`, 'aria-hidden': 'true' }), one.label)))
  const table = numbers(title, ['Period', ...series.map((one) => one.label), 'Total'], buckets.map((bucket, i) => [bucket.long, ...series.map((one) => formatNumber(bucket.values[one.key] ?? 0)), formatNumber(totals[i])]))
  return h('figure', { class: 'chart' }, svg, legend, readout, table)
}

/** Horizontal bars, longest first as given: `rows` are [{ label, value, key? }]. */
export function bars({ title, description, rows, unit = '', labelHeader = 'Name', valueText = (n) => formatNumber(n) }) {
  // Narrower than the columns: bar charts sit side by side, and their text should stay readable.
  const width = 440
  const rowH = 28
  const height = PAD.top + rows.length * rowH + 4
  const labelW = 170
  const max = Math.max(1, ...rows.map((r) => r.value))
  const { svg, readout } = frame(title, description, width)
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`)
  const plotW = width - labelW - 60
  const marks = rows.map((row, i) => {
    const y = PAD.top + i * rowH
    const text = row.label.length > 22 ? `${row.label.slice(0, 21)}…` : row.label
    const g = s(
      'g',
      { class: 'column' },
      s('rect', { class: 'hit', x: 0, y, width, height: rowH }),
      s('text', { class: 'label', x: labelW - 8, y: y + 18, 'text-anchor': 'end' }, text),
      s('rect', { class: `bar ${row.key ? `s-${row.key}` : 's-default'}`, x: labelW, y: y + 5, width: Math.max(row.value > 0 ? 2 : 0, (row.value / max) * plotW), height: rowH - 10 }),
      s('text', { class: 'value', x: labelW + (row.value / max) * plotW + 6, y: y + 18 }, valueText(row.value)),
    )
    svg.append(g)
    return g
  })
  explore(svg, marks, rows.map((row) => `${row.label}: ${valueText(row.value)}${unit ? ` ${unit}` : ''}`), readout, 'Use the up and down arrow keys to read each bar.')
  const table = numbers(title, [labelHeader, unit || 'Count'], rows.map((row) => [row.label, valueText(row.value)]))
  return h('figure', { class: 'chart' }, svg, readout, table)
}

/** Bucket labels in the report's time zone: short under the column, long when read out. */
export function bucketLabels(t, bucket, tz) {
  const date = new Date(t)
  const zone = { timeZone: tz || 'UTC' }
  if (bucket === 'hour') {
    return {
      label: new Intl.DateTimeFormat(undefined, { ...zone, hour: '2-digit', minute: '2-digit' }).format(date),
      long: new Intl.DateTimeFormat(undefined, { ...zone, weekday: 'short', day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' }).format(date),
    }
  }
  return {
    label: new Intl.DateTimeFormat(undefined, { ...zone, day: 'numeric', month: 'short' }).format(date),
    long: new Intl.DateTimeFormat(undefined, { ...zone, weekday: 'long', day: 'numeric', month: 'long', year: 'numeric' }).format(date),
  }
}

/** The series of GET /reports/decisions as columns: one bucket per point time, a value per outcome. */
export function columnsOf(report) {
  const byTime = new Map()
  for (const one of report.series ?? []) {
    for (const point of one.points ?? []) {
      if (!byTime.has(point.t)) byTime.set(point.t, {})
      byTime.get(point.t)[one.key] = (byTime.get(point.t)[one.key] ?? 0) + point.count
    }
  }
  return [...byTime.entries()].sort(([a], [b]) => Date.parse(a) - Date.parse(b)).map(([t, values]) => ({ ...bucketLabels(t, report.bucket, report.tz), values }))
}
