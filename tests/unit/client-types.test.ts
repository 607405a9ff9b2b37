// The TypeScript client's types are generated from the OpenAPI document the server builds from
// its valibot schemas (tests/support/client-types.ts): this fails when a route changed and the
// generated file was not regenerated, and checks the generator on a few schema shapes.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { generateClientTypes, TYPES_FILE, tsType } from '../support/client-types.ts'

t.test('clients/typescript/src/types.gen.ts is up to date', async (t) => {
  const fresh = generateClientTypes()
  const current = readFileSync(TYPES_FILE, 'utf8')
  t.ok(current === fresh, 'stale: run `node --import tsx tests/support/client-types.ts` and commit the file')
  t.match(current, /export type PolicyPlan = \{/)
  t.match(current, /applyPolicySet: \{\n {4}method: "POST"\n {4}path: "\/policies\/apply"/)
})

t.test('JSON Schema to TypeScript', async (t) => {
  const cases: [unknown, string][] = [
    [{ type: 'string' }, 'string'],
    [{ type: 'integer' }, 'number'],
    [{ anyOf: [{ type: 'string' }, { type: 'null' }] }, 'string | null'],
    [{ enum: ['allow', 'deny'], type: 'string' }, '"allow" | "deny"'],
    [{ const: 'Bearer' }, '"Bearer"'],
    [{ type: 'array', items: { $ref: '#/components/schemas/Policy' } }, 'Array<Policy>'],
    [{ type: 'object', properties: { a: { type: 'number' }, 'b-c': { type: 'boolean' } }, required: ['a'] }, '{\n  a: number\n  "b-c"?: boolean\n}'],
    [{ type: 'object', additionalProperties: { type: 'number' } }, '{\n  [key: string]: number\n}'],
    [{ type: 'object', additionalProperties: false }, 'Record<string, never>'],
    [{}, 'unknown'],
  ]
  for (const [schema, expected] of cases) t.equal(tsType(schema as never), expected, JSON.stringify(schema))
})
