// Deprecation and sunset of a route or an API version (docs/api.md, versioning and lifecycle):
// parsed by domain/lifecycle-json.ts for config.ts, announced by http/lifecycle.ts, published by wellknown/openapi.ts.

export interface LifecycleEntry {
  /** When the route or version was (or will be) deprecated (RFC 9745). */
  readonly deprecation: Date
  /** When it stops working (RFC 8594); after this the route answers 410. */
  readonly sunset: Date | null
  /** Human documentation of the deprecation (Link rel="deprecation"). */
  readonly deprecationLink: string | null
  /** Human documentation of the sunset (Link rel="sunset"). */
  readonly sunsetLink: string | null
  /** Path of the route that replaces it, named in the 410 body. */
  readonly replacement: string | null
}

export interface Lifecycle {
  /** Keyed by exact route path, e.g. "/waitlist". */
  readonly routes: Readonly<Record<string, LifecycleEntry>>
  /** Keyed by API version alias, e.g. "v1". */
  readonly versions: Readonly<Record<string, LifecycleEntry>>
}
