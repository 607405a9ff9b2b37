// The lifecycle configuration (LIFECYCLE or LIFECYCLE_FILE, docs/api.md, versioning and
// lifecycle) as JSON: its schema, the shipped default, and where in it a problem is. config.ts
// reads the text and turns a problem into a ConfigError.
import * as v from 'valibot'
import type { Lifecycle, LifecycleEntry } from './lifecycle.ts'

/** A date in a lifecycle entry: an ISO string or epoch milliseconds. */
const LifecycleDate = v.pipe(
  v.unknown(),
  v.check((value) => typeof value === 'string' || typeof value === 'number', ' must be an ISO date'),
  v.check((value) => !Number.isNaN(new Date(value as string).getTime()), (issue) => ` is not a valid date: ${String(issue.input)}`),
  v.transform((value) => new Date(value as string)),
)

const OptionalText = v.nullish(v.pipe(v.string(' must be a non-empty string'), v.nonEmpty(' must be a non-empty string')), null)

const LifecycleEntrySchema = v.pipe(
  v.object(
    {
      // A missing deprecation reaches the date check (as null) and is named there.
      deprecation: v.optional(LifecycleDate, () => null),
      sunset: v.nullish(LifecycleDate, null),
      deprecationLink: OptionalText,
      sunsetLink: OptionalText,
      replacement: OptionalText,
    },
    ' must be an object',
  ),
  // RFC 8594 §3 / RFC 9745 §3: a sunset before its deprecation is a configuration error.
  v.check(
    (entry) => entry.sunset === null || entry.sunset.getTime() >= entry.deprecation.getTime(),
    (issue) => {
      const entry = issue.input as { sunset: Date; deprecation: Date }
      return `: sunset (${entry.sunset.toISOString()}) precedes deprecation (${entry.deprecation.toISOString()})`
    },
  ),
  v.transform((entry): LifecycleEntry => Object.freeze(entry)),
)

const LifecycleSection = v.nullish(
  v.pipe(
    v.record(v.string(), LifecycleEntrySchema, ' must be an object'),
    v.transform((entries) => Object.freeze(Object.assign(Object.create(null) as Record<string, LifecycleEntry>, entries))),
  ),
  {},
)

const LifecycleSchema = v.pipe(
  v.custom<Record<string, unknown>>((value) => typeof value === 'object' && value !== null && !Array.isArray(value), ' must be a JSON object'),
  v.object({ routes: LifecycleSection, versions: LifecycleSection }),
  v.transform((lifecycle): Lifecycle => Object.freeze(lifecycle)),
)

/** `lifecycle.routes["/x"].sunset`: where in the lifecycle JSON an issue is. */
function lifecyclePath(issue: v.BaseIssue<unknown>): string {
  return (issue.path ?? []).map((item, depth) => (depth === 1 ? `["${String(item.key)}"]` : `.${String(item.key)}`)).join('')
}

/** The lifecycle JSON checked, or what is wrong with it and where. */
export function readLifecycleJson(raw: unknown): { lifecycle: Lifecycle } | { problem: string } {
  const result = v.safeParse(LifecycleSchema, raw)
  if (result.success) return { lifecycle: result.output }
  const issue = result.issues[0]
  return { problem: `lifecycle${lifecyclePath(issue)}${issue.message}` }
}

/** The shipped lifecycle: the legacy /waitlist alias is deprecated in favour of /newsletter. */
export function defaultLifecycle(appUrl: string): unknown {
  return {
    routes: {
      '/waitlist': {
        deprecation: '2025-12-31T23:59:59Z',
        sunset: '2027-01-31T23:59:59Z',
        deprecationLink: `${appUrl}/openapi.json`,
        sunsetLink: `${appUrl}/openapi.json`,
        replacement: '/newsletter',
      },
    },
    versions: {},
  }
}
