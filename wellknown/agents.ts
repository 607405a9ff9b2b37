// agents.json (/agents.json and /.well-known/agents.json): one flow per documented, current
// operation of the OpenAPI document, so every operationId named exists there by construction.
import type { Config } from '../config.ts'

export const AGENTS_JSON_VERSION = '0.1.0'

export interface AgentsAction {
  readonly id: string
  readonly sourceId: string
  readonly operationId: string
}

export interface AgentsFlow {
  readonly id: string
  readonly title: string
  readonly description: string
  readonly actions: readonly AgentsAction[]
  readonly fields: { readonly parameters: readonly unknown[]; readonly responses: { readonly success: Record<string, never> } }
}

export interface AgentsJson {
  readonly agentsJson: string
  readonly info: { readonly title: string; readonly version: string; readonly description: string }
  readonly sources: readonly { readonly id: string; readonly path: string }[]
  readonly flows: readonly AgentsFlow[]
}

/** "createDemoRequest" → "create_demo_request". */
export function snakeCase(identifier: string): string {
  return identifier
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1_$2')
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .toLowerCase()
}

interface OperationLike {
  operationId?: unknown
  summary?: unknown
  description?: unknown
  deprecated?: unknown
  tags?: unknown
}

const SOURCE_ID = 'steward_api'

export function buildAgentsJson(config: Config, openapi: { paths?: Record<string, Record<string, unknown>> }, apiVersion: string): AgentsJson {
  const flows: AgentsFlow[] = []
  for (const item of Object.values(openapi.paths ?? {})) {
    for (const value of Object.values(item)) {
      const operation = value as OperationLike
      if (typeof operation?.operationId !== 'string') continue
      // Deprecated aliases and the discovery documents are no agent tasks.
      if (operation.deprecated === true) continue
      if (Array.isArray(operation.tags) && operation.tags.includes('Discovery')) continue
      const id = snakeCase(operation.operationId)
      const title = typeof operation.summary === 'string' ? operation.summary : operation.operationId
      flows.push({
        id,
        title,
        description: typeof operation.description === 'string' ? operation.description : title,
        actions: [{ id, sourceId: SOURCE_ID, operationId: operation.operationId }],
        fields: { parameters: [], responses: { success: {} } },
      })
    }
  }
  return {
    agentsJson: AGENTS_JSON_VERSION,
    info: {
      title: 'Steward',
      version: apiVersion,
      description: 'Lead capture and the bearer-token API that governs autonomous AI agents. Credentials are provisioned by a human; agents cannot self-provision.',
    },
    sources: [{ id: SOURCE_ID, path: `${config.appUrl}/openapi.json` }],
    flows,
  }
}
