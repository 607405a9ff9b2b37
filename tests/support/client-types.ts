// Generates clients/typescript/src/types.gen.ts from the product API's OpenAPI document, which is
// built from the valibot schemas the routes validate with: the TypeScript client's types are never
// a second hand-written copy. tests/unit/client-types.test.ts fails when the file is stale.
//
//   node --import tsx tests/support/client-types.ts          (writes the file)
//   node --import tsx tests/support/client-types.ts --check  (exit 1 when it is stale)
import { readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../../config.ts'
import { createProductSurface } from '../../routes/product.ts'
import { buildOpenApi } from '../../wellknown/openapi.ts'

export const TYPES_FILE = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'clients', 'typescript', 'src', 'types.gen.ts')

type Json = Record<string, any>

/** Tags whose routes are not the product API a client calls (contracts: lead capture, health). */
export const NOT_CLIENT_TAGS = new Set(['Lead capture', 'Health'])

/** The product API's OpenAPI document, built without a database (only the routes' docs are read). */
export function productOpenApi(): Json {
  const config = loadConfig({ DATABASE_URL: 'memory://', BASE_URL: 'https://api.example.com', PRODUCT_API_URL: 'https://api.example.com', APP_URL: 'https://app.example.com' })
  const surface = createProductSurface(config, { db: null, clock: () => 0, logger: { log() {} } } as never)
  return buildOpenApi(config, [surface]) as Json
}

export interface ClientOperation {
  readonly method: string
  readonly path: string
  readonly operationId: string
  readonly tags: readonly string[]
}

/** Every operation a client must cover: the product routes but lead capture and health. */
export function clientOperations(document: Json = productOpenApi()): ClientOperation[] {
  const out: ClientOperation[] = []
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue
      const tags: string[] = op.tags ?? []
      if (tags.some((tag) => NOT_CLIENT_TAGS.has(tag))) continue
      out.push({ method: method.toUpperCase(), path, operationId: op.operationId, tags })
    }
  }
  return out
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/
const key = (name: string) => (IDENTIFIER.test(name) ? name : JSON.stringify(name))
const refName = (ref: string) => ref.replace('#/components/schemas/', '')

function doc(schema: Json, indent: string): string {
  const text = typeof schema.description === 'string' ? schema.description : ''
  return text ? `${indent}/** ${text.replaceAll('*/', '*\\/').replaceAll('\n', ' ')} */\n` : ''
}

/** A JSON Schema (the subset the valibot conversion emits) as a TypeScript type. */
export function tsType(schema: Json | boolean | undefined, indent = ''): string {
  if (schema === undefined || schema === true) return 'unknown'
  if (schema === false) return 'never'
  if (schema.$ref) return refName(schema.$ref)
  if (schema.const !== undefined) return JSON.stringify(schema.const)
  if (Array.isArray(schema.enum)) return schema.enum.map((value: unknown) => JSON.stringify(value)).join(' | ')
  const union = schema.anyOf ?? schema.oneOf
  if (Array.isArray(union)) return union.map((member: Json) => wrap(tsType(member, indent))).join(' | ')
  if (Array.isArray(schema.allOf)) return schema.allOf.map((member: Json) => wrap(tsType(member, indent))).join(' & ')
  if (Array.isArray(schema.type)) return schema.type.map((type: string) => tsType({ ...schema, type }, indent)).join(' | ')
  switch (schema.type) {
    case 'string':
      return 'string'
    case 'number':
    case 'integer':
      return 'number'
    case 'boolean':
      return 'boolean'
    case 'null':
      return 'null'
    case 'array':
      return `Array<${tsType(schema.items, indent)}>`
    case 'object':
      return objectType(schema, indent)
    default:
      return schema.properties ? objectType(schema, indent) : 'unknown'
  }
}

function wrap(type: string): string {
  return type.includes(' | ') || type.includes(' & ') ? `(${type})` : type
}

function objectType(schema: Json, indent: string): string {
  const properties: Json = schema.properties ?? {}
  const required = new Set<string>(schema.required ?? [])
  const inner = `${indent}  `
  const lines = Object.entries(properties).map(([name, property]) => `${doc(property as Json, inner)}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${tsType(property as Json, inner)}`)
  const extra = schema.additionalProperties
  if (extra !== undefined && extra !== false) lines.push(`${inner}[key: string]: ${Object.keys(properties).length > 0 ? 'unknown' : tsType(extra, inner)}`)
  if (lines.length === 0) return extra === false ? 'Record<string, never>' : 'Record<string, unknown>'
  return `{\n${lines.join('\n')}\n${indent}}`
}

function jsonSchemaOf(content: Json | undefined): Json | undefined {
  if (!content) return undefined
  return (content['application/json'] ?? Object.values(content)[0])?.schema
}

/** The generated module's text. */
export function generateClientTypes(document: Json = productOpenApi()): string {
  const out: string[] = [
    '// GENERATED by tests/support/client-types.ts from the OpenAPI document the server builds from its',
    '// valibot schemas. Do not edit: run `node --import tsx tests/support/client-types.ts` after changing a route.',
    '/* eslint-disable */',
    '',
  ]
  for (const [name, schema] of Object.entries(document.components.schemas as Json)) {
    out.push(`${doc(schema as Json, '')}export type ${name} = ${tsType(schema as Json)}`, '')
  }
  out.push('/** Every product operation: its method, path, parameters, body and successful answer. */', 'export interface Operations {')
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue
      const parameters: Json[] = (op.parameters ?? []).filter((p: Json) => !p.$ref)
      const group = (where: string) => {
        const entries = parameters.filter((p) => p.in === where).map((p) => `${key(p.name)}${p.required ? '' : '?'}: ${tsType(p.schema)}`)
        return entries.length === 0 ? 'Record<string, never>' : `{ ${entries.join('; ')} }`
      }
      const success = Object.entries(op.responses as Json).find(([status]) => status.startsWith('2'))
      const answer = success ? jsonSchemaOf((success[1] as Json).content) : undefined
      const body = jsonSchemaOf(op.requestBody?.content)
      out.push(
        `  ${key(op.operationId)}: {`,
        `    method: ${JSON.stringify(method.toUpperCase())}`,
        `    path: ${JSON.stringify(path)}`,
        `    params: ${group('path')}`,
        `    query: ${group('query')}`,
        `    body: ${body ? tsType(body, '    ') : 'never'}`,
        `    response: ${answer ? tsType(answer, '    ') : 'void'}`,
        '  }',
      )
    }
  }
  out.push('}', '')
  out.push('/** Where each operation lives: the client builds its requests from this table. */', 'export const OPERATIONS = {')
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue
      out.push(`  ${key(op.operationId)}: { method: ${JSON.stringify(method.toUpperCase())}, path: ${JSON.stringify(path)} },`)
    }
  }
  out.push('} as const satisfies { [K in keyof Operations]: { method: Operations[K][\'method\']; path: Operations[K][\'path\'] } }', '')
  return out.join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = generateClientTypes()
  if (process.argv.includes('--check')) {
    let current = ''
    try {
      current = readFileSync(TYPES_FILE, 'utf8')
    } catch {}
    if (current !== text) {
      console.error(`${TYPES_FILE} is stale: run node --import tsx tests/support/client-types.ts`)
      process.exit(1)
    }
  } else {
    writeFileSync(TYPES_FILE, text)
    console.log(`wrote ${TYPES_FILE}`)
  }
  process.exit(0)
}
