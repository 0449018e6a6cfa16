import type { Kysely, SelectQueryBuilder } from 'kysely';
import type { Database } from '../../db/schema.js';
import { type Page, type PageRequest, paginate } from '../../lib/pagination.js';
import { insertAudit, type AuditRow } from './audit.js';
import type { AuditFilter } from './audit.schemas.js';

/** An event row with `at` as `created_at`, so the lists' one keyset pagination (newest first) pages it. */
type PagedRow = Omit<AuditRow, 'at'> & { created_at: string };

export function createAuditStore(db: Kysely<Database>) {
  /** The workspace's events matching `filter`, `at` named `created_at` (a derived table: both backends flatten it). */
  function matching(workspaceId: string, filter: AuditFilter): SelectQueryBuilder<any, 'e', PagedRow> {
    let inner = db
      .selectFrom('audit_events')
      .select([
        'id',
        'workspace_id',
        'at as created_at',
        'actor_type',
        'actor_id',
        'actor_name',
        'on_behalf_of',
        'action',
        'target_type',
        'target_id',
        'outcome',
        'request_id',
        'ip',
        'user_agent',
        'changes',
      ])
      .where('workspace_id', '=', workspaceId);
    if (filter.actor !== undefined) inner = inner.where('actor_id', '=', filter.actor);
    if (filter.action !== undefined) inner = inner.where('action', '=', filter.action);
    if (filter.targetType !== undefined) inner = inner.where('target_type', '=', filter.targetType);
    if (filter.targetId !== undefined) inner = inner.where('target_id', '=', filter.targetId);
    if (filter.since !== undefined) inner = inner.where('at', '>=', filter.since);
    if (filter.until !== undefined) inner = inner.where('at', '<', filter.until);
    return (db as Kysely<any>).selectFrom(inner.as('e')).selectAll() as SelectQueryBuilder<any, 'e', PagedRow>;
  }

  return {
    insert: (row: AuditRow | readonly AuditRow[]) => insertAudit(db, row),
    /** A page, newest first. */
    list: (workspaceId: string, filter: AuditFilter, page: PageRequest): Promise<Page<PagedRow>> => paginate(matching(workspaceId, filter), page),
    /** Every matching event, newest first, `size` at a time (keyset, so a long export holds one batch). */
    async *batches(workspaceId: string, filter: AuditFilter, size: number): AsyncGenerator<PagedRow[]> {
      let cursor: string | undefined;
      do {
        const page = await paginate(matching(workspaceId, filter), { limit: size, cursor });
        if (page.data.length > 0) yield page.data;
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    },
    /** Deletes at most `limit` events older than `before` (any workspace); how many it deleted. */
    async purgeBefore(before: string, limit: number): Promise<number> {
      const ids = db.selectFrom('audit_events').select('id').where('at', '<', before).limit(limit);
      const r = await db.deleteFrom('audit_events').where('id', 'in', ids).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}

export type AuditStore = ReturnType<typeof createAuditStore>;
export type AuditPagedRow = PagedRow;
