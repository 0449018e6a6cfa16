/**
 * Audit events (API.md §14): a service that changes data writes one through its store, in the
 * change's own transaction (`insertAudit(trx, …)`); transports write only what happens before a
 * service runs (sign-ins, 403s). Events hold names of things, never secrets or message text.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { Clock } from '../../lib/clock.js';
import type { IdGenerator } from '../../lib/ids.js';
import type { Actor } from '../auth/actor.js';

export interface AuditEntry {
  /** `<target type>.<verb>`: `persona.update`, `key.revoke`, `member.role`, `session.signin`… */
  action: string;
  target: { type: string; id: string | null };
  outcome?: 'success' | 'denied';
  /** The names of the fields changed (never their values). */
  changes?: readonly string[];
  /** The person an admin acted for (a handoff answered in another member's name). */
  onBehalfOf?: string;
}

export type AuditRow = Database['audit_events'];

/** The row of an event `actor` caused now. */
export function auditRow(ids: IdGenerator, clock: Clock, actor: Actor, entry: AuditEntry): AuditRow {
  return {
    id: ids('aud'),
    workspace_id: actor.workspaceId,
    at: clock.now().toISOString(),
    actor_type: actor.kind,
    // An OAuth client is known by its grant (the key behind it is `actor.id`).
    actor_id: actor.kind === 'oauth' ? (actor.grantId ?? actor.id) : actor.id,
    actor_name: actor.name,
    on_behalf_of: entry.onBehalfOf ?? null,
    action: entry.action,
    target_type: entry.target.type,
    target_id: entry.target.id,
    outcome: entry.outcome ?? 'success',
    request_id: actor.origin?.requestId ?? null,
    ip: actor.origin?.ip ?? null,
    user_agent: actor.origin?.userAgent ?? null,
    changes: entry.changes && entry.changes.length > 0 ? JSON.stringify([...entry.changes]) : null,
  };
}

/** Writes events with the executor given: the change's transaction, so both land or neither does. */
export async function insertAudit(db: Kysely<Database> | Transaction<Database>, rows: AuditRow | readonly AuditRow[]): Promise<void> {
  const list = Array.isArray(rows) ? rows : [rows as AuditRow];
  if (list.length === 0) return;
  await db.insertInto('audit_events').values(list).execute();
}

/** Builds events for one service: `audit(actor, entry)` → the row its store inserts in the change's transaction. */
export function createAuditRows(ids: IdGenerator, clock: Clock) {
  return (actor: Actor, entry: AuditEntry): AuditRow => auditRow(ids, clock, actor, entry);
}

export type AuditRows = ReturnType<typeof createAuditRows>;

/**
 * Runs a store's change and writes its event in one transaction: both land or neither does. A
 * change answering `false` (nothing matched: gone, or changed by another request first) writes no
 * event. Without an event (`row` undefined) the change runs as it did, on `db`.
 */
export async function withAudit<T>(
  db: Kysely<Database>,
  row: AuditRow | undefined,
  change: (trx: Kysely<Database> | Transaction<Database>) => Promise<T>,
): Promise<T> {
  if (row === undefined) return change(db);
  return db.transaction().execute(async (trx) => {
    const result = await change(trx);
    if (result !== false) await insertAudit(trx, row);
    return result;
  });
}
