// The policy engine's public surface: pure functions over compiled policy sets. Routes and
// storage import from here; nothing in engine/ imports from them.
export { compilePattern, compilePatternList, isExactPattern, matchesPattern, type Matcher } from './patterns.ts'
export { compileCondition, MAX_CONDITION_BYTES, type CompiledCondition, type ConditionCompileError, type ConditionCompileResult, type ConditionOutcome, type ConditionVariables } from './condition.ts'
export { candidatesFor, compilePolicy, compilePolicySet, normalizeApproval, type CompiledPolicy, type CompiledPolicySet, type CompileProblem } from './policyset.ts'
export { applyingPolicies, combineApprovals, decide, type ApprovalRequirement, type DecisionOutcome, type DecisionRequest, type DecisionView } from './decide.ts'
export { argsSha256, canonicalJson, canonicalSha256, CanonicalJsonError, type BoundCall } from './canonical.ts'
export { capabilitiesOf, capabilityOf, type Capability, type CapabilityAgent, type CapabilityEntry, type CapabilityPolicy } from './capabilities.ts'
export { DEFAULT_REPLAY_SAMPLE, replay, type LoggedDecision, type ReplayResult, type ReplaySample } from './replay.ts'
export * from './types.ts'
export { addTo, applyLimits, replayCounter, bucketWidthMs, compileLimit, counterKey, currentOf, isTimeZone, MAX_LIMIT_VALUE, MAX_LIMITS_PER_POLICY, releaseFrom, resetsAt, slotOf, unitsLabel, windowAt, windowLabel, type AppliedLimit, type CompiledLimit, type CounterState, type LimitInput, type LimitKind, type LimitMode, type LimitScope, type LimitWindow, type WindowSpan, type WindowType } from './limits.ts'
