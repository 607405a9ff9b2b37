// Runs the client on whichever runtime runs this file (Node through tsx, Bun, Deno) against a
// live server: ci/runtimes.mjs starts the server, seeds it and passes STEWARD_BASE_URL and
// STEWARD_API_KEY (a Manager key). Prints "client fixture ok" and exits 0, or exits 1.
import { ActionDenied, NotFoundError, Steward } from '../src/index.ts'

const g = globalThis as { Bun?: unknown; Deno?: unknown }
const runtime = g.Bun ? 'bun' : g.Deno ? 'deno' : 'node'

async function main(): Promise<void> {
  const steward = new Steward()
  const organization = await steward.organization.get()
  const policies: string[] = []
  for await (const policy of steward.policies.list({ limit: 1 })) policies.push(policy.policy_id)
  if (policies.length === 0) throw new Error('no policy listed')
  const decision = await steward.decisions.decide({ agent: 'runtime-fixture-bot', action: 'payments.refund', resource: 'order/1' })
  if (!['allow', 'deny', 'require_approval'].includes(decision.decision)) throw new Error(`odd decision ${decision.decision}`)
  const guarded = steward.guard(async () => 'ran', { action: 'fixture.never-allowed', agent: 'runtime-fixture-bot' })
  const denied = await guarded().then(() => null, (error: unknown) => error)
  if (!(denied instanceof ActionDenied)) throw new Error(`guard did not deny: ${String(denied)}`)
  const missing = await steward.policies.get(crypto.randomUUID()).then(() => null, (error: unknown) => error)
  if (!(missing instanceof NotFoundError) || missing.status !== 404 || !missing.requestId) throw new Error(`no NotFoundError: ${String(missing)}`)
  const plan = await steward.policies.plan({ policies: [] })
  if (plan.archive.length !== policies.length) throw new Error('the plan of an empty set does not archive every policy')
  console.log(`client fixture ok: ${runtime}, organization ${organization.organization_id}, ${policies.length} policies, decision ${decision.decision}`)
}

main().then(
  () => {
    // Deno and Bun keep no handle open, but Node's fetch may: leave at once.
    ;(globalThis as { process?: { exit(code: number): void } }).process?.exit(0)
  },
  (error: unknown) => {
    console.error(`client fixture failed on ${runtime}: ${error instanceof Error ? error.message : String(error)}`)
    const exit = (globalThis as { process?: { exit(code: number): void }; Deno?: { exit(code: number): void } })
    ;(exit.process ?? exit.Deno)?.exit(1)
  },
)
