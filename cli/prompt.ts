// Reading a password from the operator's standard input. On a terminal the characters typed are
// never shown (someone behind the operator, a screen share or a terminal recording would see
// them); from a pipe the first line is the password.
import { createInterface } from 'node:readline'
import { StringDecoder } from 'node:string_decoder'
import { CommandFailed } from './command.ts'

export type Input = NodeJS.ReadableStream & {
  isTTY?: boolean
  setRawMode?: (mode: boolean) => unknown
  /**
   * Reads the password somewhere else: a running server carrying out a forwarded command asks
   * the operator's own process, which prompts on its own terminal (without echo) or reads its pipe.
   */
  readPassword?: () => Promise<string | null>
}

const ENTER = new Set(['\r', '\n'])
const ERASE = new Set(['\u007f', '\b'])
const INTERRUPT = '\u0003' // Ctrl-C: raw mode turns off the terminal's own SIGINT
const END = '\u0004' // Ctrl-D

/**
 * Reads one line from a terminal in raw mode, so nothing typed is echoed. Null when the operator
 * ends the input (Ctrl-D on an empty line, or the stream ends) without typing anything.
 */
export function readHiddenLine(input: Input & { setRawMode: (mode: boolean) => unknown }, output: NodeJS.WritableStream, prompt: string): Promise<string | null> {
  output.write(prompt)
  input.setRawMode(true)
  const decoder = new StringDecoder('utf8')
  let typed = ''
  return new Promise<string | null>((resolve, reject) => {
    const finish = (error: Error | null, value: string | null): void => {
      input.removeListener('data', onData)
      input.removeListener('end', onEnd)
      input.setRawMode(false)
      input.pause()
      output.write('\n')
      if (error) reject(error)
      else resolve(value)
    }
    const onEnd = (): void => finish(null, typed === '' ? null : typed)
    const onData = (chunk: Buffer | string): void => {
      const chars = Array.from(typeof chunk === 'string' ? chunk : decoder.write(chunk))
      for (const [i, char] of chars.entries()) {
        if (ENTER.has(char)) {
          // What follows the line (a pasted second line) is left for the next read.
          const rest = chars.slice(char === '\r' && chars[i + 1] === '\n' ? i + 2 : i + 1).join('')
          finish(null, typed)
          if (rest !== '') input.unshift(Buffer.from(rest))
          return
        }
        if (char === INTERRUPT) return finish(new CommandFailed('cancelled', 130), null)
        if (char === END && typed === '') return finish(null, null)
        if (ERASE.has(char)) typed = Array.from(typed).slice(0, -1).join('')
        else if (char >= ' ') typed += char
      }
    }
    input.on('data', onData)
    input.on('end', onEnd)
    input.resume()
  })
}

/** The first line of a pipe or file; null when it ends before any line. */
async function readFirstLine(input: Input): Promise<string | null> {
  const lines = createInterface({ input, terminal: false })
  try {
    for await (const line of lines) return line
    return null
  } finally {
    lines.close()
  }
}

/**
 * A password typed at a terminal (twice: it cannot be seen, so a typo would go unnoticed) or read
 * from a pipe. Null when none was given.
 */
export async function readPasswordInput(input: Input | null, output: NodeJS.WritableStream): Promise<string | null> {
  if (!input) return null
  if (typeof input.readPassword === 'function') return input.readPassword()
  if (!input.isTTY || typeof input.setRawMode !== 'function') return readFirstLine(input)
  const tty = input as Input & { setRawMode: (mode: boolean) => unknown }
  const first = await readHiddenLine(tty, output, 'password: ')
  if (!first) return null
  const again = await readHiddenLine(tty, output, 'password again: ')
  if (again !== first) throw new CommandFailed('the two passwords typed differ; nothing was changed', 2)
  return first
}
