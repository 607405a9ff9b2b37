// Plugin manifest v1 (/.well-known/ai-plugin.json), with the field limits clients enforce.
import type { Config } from '../config.ts'

export interface AiPluginManifest {
  readonly schema_version: 'v1'
  readonly name_for_human: string
  readonly name_for_model: string
  readonly description_for_human: string
  readonly description_for_model: string
  readonly auth: { readonly type: 'user_http'; readonly authorization_type: 'bearer' }
  readonly api: { readonly type: 'openapi'; readonly url: string }
  readonly logo_url: string
  readonly contact_email: string
  readonly legal_info_url: string
}

const AI_PLUGIN_LIMITS = Object.freeze({ name_for_human: 20, name_for_model: 50, description_for_human: 100, description_for_model: 8000 })

export function buildAiPlugin(config: Config): AiPluginManifest {
  const manifest: AiPluginManifest = {
    schema_version: 'v1',
    name_for_human: 'Steward',
    name_for_model: 'steward',
    description_for_human: 'Read and enforce the policies that govern the AI agents of your organization.',
    description_for_model:
      'Governance API for autonomous AI agents in an enterprise: list and read the policies that say what agents may do ' +
      '(allow, deny or require human approval), and create policies. Needs an organization API key provisioned by a human ' +
      'in the console; agents cannot self-provision. Not a content generator or question-answering model. ' +
      'Public operations also accept demo requests and newsletter subscriptions.',
    // Human-held credential sent as "Authorization: Bearer <key>" (docs/api.md).
    auth: { type: 'user_http', authorization_type: 'bearer' },
    api: { type: 'openapi', url: `${config.appUrl}/openapi.json` },
    logo_url: `${config.appUrl}/logo.svg`,
    contact_email: config.contactEmail,
    legal_info_url: config.appUrl,
  }
  for (const [field, limit] of Object.entries(AI_PLUGIN_LIMITS)) {
    const value = manifest[field as keyof typeof AI_PLUGIN_LIMITS]
    if (value.length > limit) throw new Error(`ai-plugin.json: ${field} is longer than ${limit} characters`)
  }
  return manifest
}
