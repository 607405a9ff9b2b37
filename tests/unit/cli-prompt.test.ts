// The password prompt of the operator commands: on a terminal nothing typed is echoed (raw mode,
// restored afterwards); from a pipe the first line is the password. A fake terminal stands in
// for a real one: a stream with isTTY and a setRawMode that records its calls.
import { PassThrough } from 'node:stream'
import t from 'tap'
import { CommandFailed } from '../../cli/command.ts'
import { readHiddenLine, readPasswordInput } from '../../cli/prompt.ts'

interface FakeTerminal {
  input: PassThrough & { isTTY: true; setRawMode(mode: boolean): void }
  rawModes: boolean[]
  output: PassThrough
  written(): string
}

function fakeTerminal(): FakeTerminal {
  const rawModes: boolean[] = []
  const input = Object.assign(new PassThrough(), {
    isTTY: true as const,
    setRawMode(mode: boolean) {
      rawModes.push(mode)
    },
  })
  const output = new PassThrough()
  let written = ''
  output.on('data', (chunk) => (written += chunk))
  return { input, rawModes, output, written: () => written }
}

t.test('a terminal prompt reads in raw mode and echoes nothing of what is typed', async (t) => {
  const term = fakeTerminal()
  const read = readHiddenLine(term.input, term.output, 'password: ')
  term.input.write('hunter2!')
  term.input.write('\u007f2 long pw\r')
  t.equal(await read, 'hunter22 long pw', 'backspace erases the last character')
  t.same(term.rawModes, [true, false], 'raw mode is switched on, then restored')
  t.equal(term.written(), 'password: \n', 'only the prompt and the final newline are written')
  t.ok(term.input.isPaused(), 'the input is paused again, so the process can exit')
})

t.test('Ctrl-C cancels the prompt with exit code 130 and restores the terminal', async (t) => {
  const term = fakeTerminal()
  const read = readHiddenLine(term.input, term.output, 'password: ')
  term.input.write('abc\u0003')
  const error = await read.then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof CommandFailed)
  t.equal((error as CommandFailed).exitCode, 130)
  t.same(term.rawModes, [true, false])
})

t.test('Ctrl-D on an empty line means no password', async (t) => {
  const term = fakeTerminal()
  const read = readHiddenLine(term.input, term.output, 'password: ')
  term.input.write('\u0004')
  t.equal(await read, null)
  t.same(term.rawModes, [true, false])
})

t.test('on a terminal the password is typed twice; a pasted pair arriving at once is split', async (t) => {
  const term = fakeTerminal()
  const read = readPasswordInput(term.input, term.output)
  term.input.write('correct horse battery\r\ncorrect horse battery\r')
  t.equal(await read, 'correct horse battery')
  t.equal(term.written(), 'password: \npassword again: \n')
  t.same(term.rawModes, [true, false, true, false])
})

t.test('two different passwords typed at the terminal are refused', async (t) => {
  const term = fakeTerminal()
  const read = readPasswordInput(term.input, term.output)
  term.input.write('correct horse battery\r')
  term.input.write('correct horse batteyr\r')
  const error = await read.then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof CommandFailed)
  t.equal((error as CommandFailed).message, 'the two passwords typed differ; nothing was changed')
  t.equal((error as CommandFailed).exitCode, 2)
})

t.test('from a pipe, the first line is the password and nothing is prompted', async (t) => {
  const input = new PassThrough()
  const output = new PassThrough()
  let written = ''
  output.on('data', (chunk) => (written += chunk))
  input.end('from a pipe 123\nsecond line\n')
  t.equal(await readPasswordInput(input, output), 'from a pipe 123')
  t.equal(written, '')
})

t.test('an empty pipe, or no input at all, means no password', async (t) => {
  const input = new PassThrough()
  input.end()
  t.equal(await readPasswordInput(input, new PassThrough()), null)
  t.equal(await readPasswordInput(null, new PassThrough()), null)
})
