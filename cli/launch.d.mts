// Types of cli/launch.mjs (plain JavaScript, so that Node runs it without a TypeScript loader).
export declare function bundleIsFresh(meta?: unknown): boolean
export declare function buildBundle(): Promise<void>
