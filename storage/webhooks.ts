// Webhook endpoints: create, list, read, delete (with their audit events). The delivery log and
// the worker's claims are storage/webhook-deliveries.ts; the fan-out is storage/webhook-fanout.ts.
import type { Kysely } from 'kysely'
import type { Actor } from '../domain/audit.ts'
import { recordEvent } from './audit.ts'
import type { Database } from '../database/schema.ts'

export interface WebhookRow {
  webhook_id: string
  organization_id: string
  url: string
  event_types: string[]
  description: string
  status: 'active' | 'disabled'
  created_at: Date
  created_by: string
  disabled_at: Date | null
  disabled_reason: string | null
}

const COLUMNS = ['webhook_id', 'organization_id', 'url', 'event_types', 'description', 'status', 'created_at', 'created_by', 'disabled_at', 'disabled_reason'] as const

function toWebhook(row: Record<string, unknown>): WebhookRow {
  const types = row.event_types
  return {
    ...(row as unknown as WebhookRow),
    event_types: typeof types === 'string' ? (JSON.parse(types) as string[]) : (types as string[]),
  }
}

export interface Change {
  readonly actor: Actor
  readonly requestId: string | null
  readonly now: Date
}

export async function createWebhook(
  db: Kysely<Database>,
  input: { organizationId: string; url: string; eventTypes: readonly string[]; description: string; secret: string; createdBy: string },
  change: Change,
): Promise<WebhookRow> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .insertInto('webhooks')
      .values({
        webhook_id: crypto.randomUUID(),
        organization_id: input.organizationId,
        url: input.url,
        event_types: JSON.stringify(input.eventTypes),
        description: input.description,
        secret: input.secret,
        created_at: change.now,
        created_by: input.createdBy,
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow()
    const webhook = toWebhook(row)
    await recordEvent(trx, {
      organizationId: input.organizationId,
      actor: change.actor,
      type: 'webhook.created',
      target: { type: 'webhook', id: webhook.webhook_id },
      data: { url: webhook.url, event_types: webhook.event_types, description: webhook.description },
      requestId: change.requestId,
      occurredAt: change.now,
    })
    return webhook
  })
}

export interface WebhookCursor {
  createdAt: Date
  webhookId: string
}

/** Newest first. */
export async function listWebhooks(db: Kysely<Database>, organizationId: string, after: WebhookCursor | null, limit: number): Promise<WebhookRow[]> {
  let query = db.selectFrom('webhooks').select(COLUMNS).where('organization_id', '=', organizationId)
  if (after) {
    query = query.where((eb) =>
      eb.or([eb('created_at', '<', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('webhook_id', '<', after.webhookId)])]),
    )
  }
  const rows = await query.orderBy('created_at', 'desc').orderBy('webhook_id', 'desc').limit(limit).execute()
  return rows.map(toWebhook)
}

export async function findWebhook(db: Kysely<Database>, organizationId: string, webhookId: string): Promise<WebhookRow | null> {
  const row = await db.selectFrom('webhooks').select(COLUMNS).where('organization_id', '=', organizationId).where('webhook_id', '=', webhookId).executeTakeFirst()
  return row ? toWebhook(row) : null
}

/** Deletes the endpoint and its delivery log; false when it is not the organization's. */
export async function deleteWebhook(db: Kysely<Database>, organizationId: string, webhookId: string, change: Change): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.deleteFrom('webhooks').where('organization_id', '=', organizationId).where('webhook_id', '=', webhookId).returning(['url']).executeTakeFirst()
    if (!row) return false
    await recordEvent(trx, {
      organizationId,
      actor: change.actor,
      type: 'webhook.deleted',
      target: { type: 'webhook', id: webhookId },
      data: { url: row.url },
      requestId: change.requestId,
      occurredAt: change.now,
    })
    return true
  })
}
