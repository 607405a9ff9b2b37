// CEL conditions: compile errors name a position (for a 400 when a policy is written), run-time
// errors and non-bool results are reported (and fail closed in decisions), and constructs whose
// cost an agent could inflate are refused when the condition is written.
import t from 'tap'
import { compileCondition, MAX_CONDITION_BYTES, type ConditionVariables } from '../../engine/condition.ts'

const VARS: ConditionVariables = {
  agent: { id: 'agent-1', handle: 'support-bot', labels: { team: 'support' } },
  action: 'payments.refund',
  resource: 'order/1',
  args: { amount: 120, currency: 'EUR', items: ['a', 'b'], nested: { ok: true } },
  context: { on_behalf_of: 'ada@acme.example' },
  now: new Date('2025-03-01T12:00:00Z'),
}

function evaluate(source: string, vars: ConditionVariables = VARS): unknown {
  const compiled = compileCondition(source)
  if (!compiled.ok) throw new Error(`did not compile: ${compiled.error.message}`)
  return compiled.condition.evaluate(vars)
}

t.test('compile errors carry a message and a position', async (t) => {
  t.same(compileCondition('args.amount >'), { ok: false, error: { message: 'Unexpected token: EOF', offset: 13, line: 1, column: 14 } })
  t.same(compileCondition('true &&\n  args.amount =='), { ok: false, error: { message: 'Unexpected token: EOF', offset: 24, line: 2, column: 17 } })
  t.same(compileCondition('user.admin'), { ok: false, error: { message: 'Unknown variable: user', offset: 0, line: 1, column: 1 } })
  t.same(compileCondition('action + 1 == 2'), { ok: false, error: { message: 'no such overload: string + int', offset: 0, line: 1, column: 1 } })
  t.same(compileCondition('1 + 1'), { ok: false, error: { message: 'Condition must return a bool, not int', offset: 0, line: 1, column: 1 } })
  t.same(compileCondition('"yes"'), { ok: false, error: { message: 'Condition must return a bool, not string', offset: 0, line: 1, column: 1 } })
})

t.test('size limit: 4 KiB of UTF-8', async (t) => {
  const padded = (bytes: number) => `"${'x'.repeat(bytes - 8)}" != ""`
  t.equal(padded(MAX_CONDITION_BYTES).length, MAX_CONDITION_BYTES)
  t.equal(compileCondition(padded(MAX_CONDITION_BYTES)).ok, true)
  const over = compileCondition(padded(MAX_CONDITION_BYTES + 1))
  t.same(over.ok ? null : over.error.message, 'Condition is longer than 4096 bytes')
  const multibyte = `"${'é'.repeat(2100)}" != ""`
  t.equal(compileCondition(multibyte).ok, false, 'counted in bytes, not characters')
})

t.test('refused constructs: regular expressions and nested loops over request data', async (t) => {
  const matches = compileCondition('args.currency.matches("^(E+)+$")')
  t.same(matches.ok ? null : matches.error.message, 'matches() is not available in conditions: use startsWith, endsWith or contains')
  const nested = compileCondition('args.items.exists(x, args.items.exists(y, x == y))')
  t.same(nested.ok ? null : nested.error, { message: 'exists() inside another list macro is not allowed: nested loops over request data are too costly', offset: 21, line: 1, column: 22 })
  t.equal(compileCondition('args.items.exists(x, x == "a") && args.items.all(y, y != "")').ok, true, 'side by side is fine')
  t.equal(compileCondition('args.items.map(x, x + "!").exists(y, y == "a!")').ok, true, 'chained is fine (linear)')
  const deep = compileCondition('('.repeat(40) + 'true' + ')'.repeat(40))
  t.same(deep.ok ? null : deep.error.message, 'Exceeded maxDepth (32)')
})

t.test('evaluation: the variables and the usual features', async (t) => {
  const cases: Array<[string, boolean]> = [
    ['args.amount > 100', true],
    ['args.amount == 120', true],
    ['args.amount > 100.5 && args.amount < 120.5', true],
    ['args.currency == "EUR" && args.currency != "USD"', true],
    ['"a" in args.items && !("c" in args.items)', true],
    ['size(args.items) == 2', true],
    ['has(args.nested.ok) && !has(args.refund_reason)', true],
    ['"team" in agent.labels && agent.labels.team == "support"', true],
    ['args.nested.ok', true],
    ['context.on_behalf_of.endsWith("@acme.example")', true],
    ['resource.startsWith("order/") && action.contains("refund")', true],
    ['now > timestamp("2025-01-01T00:00:00Z")', true],
    ['now - duration("1h") < timestamp("2025-03-01T11:30:00Z")', true],
    ['now.getDayOfWeek() == 6', true],
    ['args.items.exists(x, x == "b")', true],
    ['args.amount > 1000 || args.currency == "USD"', false],
  ]
  for (const [source, want] of cases) t.same(evaluate(source), { ok: true, value: want }, source)
})

t.test('run-time errors and non-bool results are errors, never a silent value', async (t) => {
  t.same(evaluate('args.reason == "x"'), { ok: false, message: 'No such key: reason' })
  t.same(evaluate('agent.labels.env == "prod"'), { ok: false, message: 'No such key: env' })
  t.same(evaluate('args.amount * 2 > 100'), { ok: false, message: 'no such overload: dyn<double> * int' })
  t.same(evaluate('args.amount'), { ok: false, message: 'Condition returned a double, not a bool' })
  t.same(evaluate('args.nested'), { ok: false, message: 'Condition returned a object, not a bool' })
  t.same(evaluate('args.items[5] == "x"'), { ok: false, message: 'No such key: index out of bounds, index 5 >= size 2' })
  t.same(evaluate('args.reason == "x" || true'), { ok: true, value: true }, 'CEL ors absorb errors when another side is true')
})

t.test('JSON objects expose only their own keys', async (t) => {
  const args = JSON.parse('{"__proto__": {"admin": true}, "plain": 1}') as Record<string, unknown>
  t.same(evaluate('has(args.constructor) || "toString" in args', { ...VARS, args }), { ok: true, value: false })
  t.same(evaluate('args.constructor == null', { ...VARS, args }), { ok: false, message: 'No such key: constructor' })
  t.same(evaluate('has(args.admin)', { ...VARS, args }), { ok: true, value: false }, 'no prototype lookup')
})
