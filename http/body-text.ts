// A request body as text, the one way: bounded in size and time, strict UTF-8. Read through the
// standard Request only (`arrayBuffer()` or `body`), so it works the same on every runtime.
import { ClientAbortError, HttpError } from './errors.ts'

const decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * Reads the body as text, refusing more than `limit` bytes while reading: a Content-Length
 * over the limit is refused before any byte is read, and a chunked body is cut off as soon as
 * it passes the limit. The whole body must arrive within `timeoutMs` (a client trickling one
 * byte a second would otherwise hold the request open for as long as it likes): 408.
 * A body that stops because the client went away is a ClientAbortError, never a server fault.
 * Refusals close the connection: the unread rest of the body cannot be left for the next request.
 */
export function readText(request: Request, limit: number, timeoutMs: number): Promise<string> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > limit) return Promise.reject(tooLarge(limit))
  // One promise settled by whichever comes first, the body or the deadline, rather than a race
  // of two: every lead form post reads its body here.
  return new Promise<string>((resolve, reject) => {
    let reader: ReadableStreamDefaultReader<Uint8Array> | null = null
    const timer = setTimeout(() => {
      // Stop waiting for the stream; the 408 closes the connection, which ends any read left.
      reader?.cancel().catch(() => {})
      reject(tooSlow(timeoutMs))
    }, timeoutMs)
    readBytes(request, limit, declared, (opened) => (reader = opened)).then(
      (bytes) => {
        clearTimeout(timer)
        try {
          resolve(decodeUtf8(bytes))
        } catch (error) {
          reject(error)
        }
      },
      (error: unknown) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}

/** The media type of the request, lower-cased, without parameters. */
export function mediaType(request: Request): string {
  const header = request.headers.get('content-type')
  if (header === null) return ''
  const end = header.indexOf(';')
  return (end < 0 ? header : header.slice(0, end)).trim().toLowerCase()
}

const DIGITS = /^\d+$/

function readBytes(
  request: Request,
  limit: number,
  declared: string | null,
  opened: (reader: ReadableStreamDefaultReader<Uint8Array>) => void,
): Promise<Uint8Array> {
  if (declared !== null && DIGITS.test(declared)) {
    // A declared length within the limit bounds the read (the HTTP parser frames the body by it),
    // so read it whole: on @hono/node-server this reads the IncomingMessage directly, without a
    // ReadableStream.
    return request.arrayBuffer().then((buffer) => {
      if (buffer.byteLength > limit) throw tooLarge(limit)
      return new Uint8Array(buffer)
    }, clientFailure)
  }
  return readStream(request, limit, opened)
}

/** A body of unknown length (chunked), read chunk by chunk and cut off past the limit. */
async function readStream(request: Request, limit: number, opened: (reader: ReadableStreamDefaultReader<Uint8Array>) => void): Promise<Uint8Array> {
  if (request.body === null) return new Uint8Array(0)
  const reader = request.body.getReader()
  opened(reader)
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    for (;;) {
      const { done, value } = await reader.read().catch(clientFailure)
      if (done) break
      size += value.byteLength
      if (size > limit) throw tooLarge(limit)
      chunks.push(value)
    }
  } catch (error) {
    // A 413 (or a dead stream): stop reading and free the stream.
    reader.cancel().catch(() => {})
    throw error
  }
  return chunks.length === 1 ? chunks[0]! : concat(chunks, size)
}

/**
 * A failed read of the body is the client's stream failing (a reset, a close mid-upload): name it
 * so, or it passes for whatever its error code resembles (ECONNRESET looks like a lost database
 * connection). Every read is awaited or chained by its caller, even after a 408 was answered, so a
 * late failure is never unhandled.
 */
function clientFailure(error: unknown): never {
  if (error instanceof HttpError) throw error
  throw new ClientAbortError('The client closed the connection while sending the request body', { cause: error })
}

function decodeUtf8(bytes: Uint8Array): string {
  if (bytes.byteLength === 0) return ''
  try {
    return decoder.decode(bytes)
  } catch {
    throw new HttpError(400, 'Request body is not valid UTF-8')
  }
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  const out = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    out.set(chunk, offset)
    offset += chunk.byteLength
  }
  return out
}

function tooLarge(limit: number): HttpError {
  return new HttpError(413, `Request body is larger than ${limit} bytes`, { headers: { Connection: 'close' } })
}

function tooSlow(timeoutMs: number): HttpError {
  return new HttpError(408, `Request body did not arrive within ${timeoutMs} ms`, { headers: { Connection: 'close' } })
}
