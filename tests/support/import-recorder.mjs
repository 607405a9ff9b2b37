// Module-resolution hooks (node:module register) for tests that check what a piece of code
// imports: every resolved URL is posted to the port the test gave.
let port
export async function initialize(data) {
  port = data.port
}
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  port.postMessage(result.url)
  return result
}
