// How many logged decisions one replay may evaluate: enough for a month of a busy deployment,
// small enough to answer within seconds.
export const MAX_REPLAY = 100_000
