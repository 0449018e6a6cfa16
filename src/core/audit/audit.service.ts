/**
 * The audit log (API.md §14): reading it (admin and up), exporting it, writing what happens before
 * a service runs (403s) or what changes nothing stored (an export), and keeping it no longer than
 * the retention window. Changes write their own events in their own transactions (audit.ts).
 */
import type { Logger } from 'pino';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import { mapPage, type Page, type PageRequest } from '../../lib/pagination.js';
import type { Actor } from '../auth/actor.js';
import { type AuditEntry, auditRow } from './audit.js';
import type { AuditEvent, AuditFilter } from './audit.schemas.js';
import type { AuditPagedRow, AuditStore } from './audit.store.js';

/** The action of every refusal (a 403 of the API, an MCP tool the caller may not call). */
export const DENIED_ACTION = 'request.denied';

/** Export columns, in order (CSV header). */
export const AUDIT_COLUMNS = [
  'id',
  'at',
  'workspaceId',
  'actorType',
  'actorId',
  'actorName',
  'onBehalfOf',
  'action',
  'targetType',
  'targetId',
  'outcome',
  'requestId',
  'ip',
  'userAgent',
  'changes',
] as const;

/** Events deleted per statement by the retention sweep: a big backlog never holds one long lock. */
const PURGE_BATCH = 1000;
const EXPORT_BATCH = 500;

export function toAuditEvent(row: AuditPagedRow): AuditEvent {
  return {
    id: row.id,
    at: row.created_at,
    workspaceId: row.workspace_id,
    actor: { type: row.actor_type, id: row.actor_id, name: row.actor_name },
    ...(row.on_behalf_of !== null ? { onBehalfOf: row.on_behalf_of } : {}),
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    outcome: row.outcome,
    requestId: row.request_id,
    ip: row.ip,
    userAgent: row.user_agent,
    ...(row.changes !== null ? { changes: JSON.parse(row.changes) as string[] } : {}),
  };
}

/** One event as a flat export record. */
function flat(e: AuditEvent): Record<(typeof AUDIT_COLUMNS)[number], string | null> {
  return {
    id: e.id,
    at: e.at,
    workspaceId: e.workspaceId,
    actorType: e.actor.type,
    actorId: e.actor.id,
    actorName: e.actor.name,
    onBehalfOf: e.onBehalfOf ?? null,
    action: e.action,
    targetType: e.target.type,
    targetId: e.target.id,
    outcome: e.outcome,
    requestId: e.requestId,
    ip: e.ip,
    userAgent: e.userAgent,
    changes: e.changes ? e.changes.join(' ') : null,
  };
}

export interface AuditServiceDeps {
  store: AuditStore;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  retentionDays: number;
}

export function createAuditService({ store, clock, ids, logger, retentionDays }: AuditServiceDeps) {
  return {
    async list(workspaceId: string, filter: AuditFilter, page: PageRequest): Promise<Page<AuditEvent>> {
      return mapPage(await store.list(workspaceId, filter, page), toAuditEvent);
    },

    /** Every matching event (newest first) in batches: NDJSON lines as the API objects, CSV rows flattened. */
    async *export(workspaceId: string, filter: AuditFilter): AsyncGenerator<Array<Record<string, unknown>>> {
      for await (const rows of store.batches(workspaceId, filter, EXPORT_BATCH)) yield rows.map((r) => flat(toAuditEvent(r)));
    },

    /** The events of `workspaceId`, as the API objects, in batches (NDJSON keeps their nesting). */
    async *exportEvents(workspaceId: string, filter: AuditFilter): AsyncGenerator<AuditEvent[]> {
      for await (const rows of store.batches(workspaceId, filter, EXPORT_BATCH)) yield rows.map(toAuditEvent);
    },

    /** An event for what changes nothing stored (an export), on its own. */
    async record(actor: Actor, entry: AuditEntry): Promise<void> {
      await store.insert(auditRow(ids, clock, actor, entry));
    },

    /**
     * A refusal (403) of a known actor: written without delaying the answer; a failure to write it
     * is logged, never turned into another error for the caller.
     */
    async denied(actor: Actor, target: { type: string; id: string | null }): Promise<void> {
      try {
        await store.insert(auditRow(ids, clock, actor, { action: DENIED_ACTION, target, outcome: 'denied' }));
      } catch (err) {
        logger.error({ err }, 'audit event of a refusal could not be written');
      }
    },

    /** Deletes events older than the retention window, in batches; how many. */
    async purgeExpired(): Promise<number> {
      const before = new Date(clock.now().getTime() - retentionDays * 86_400_000).toISOString();
      let total = 0;
      for (;;) {
        const n = await store.purgeBefore(before, PURGE_BATCH);
        total += n;
        if (n < PURGE_BATCH) return total;
      }
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
