// Operator commands of the product API. Placeholder until issue 3 lands.
import type { Command } from './command.ts'

export const provisionCommands: readonly Command[] = []
